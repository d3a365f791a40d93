"""verify --layer-rows N (issue 40): the per-layer rows on a stated, deterministic subsample of token
rows, the same N // samples evenly spread positions of every window; the end-to-end figures on every
token. The isolated rows on the subsample equal, bit for bit in every metric field, the rows `precis
run` writes for the dataset `precis import --model --activations` makes of the same subsampled inputs
(the Llama and mixed plan of test_python_verify_isolated.py: int8 row scales, an fp8 tensor scale over
the whole subsampled A, bf16, the 5000-word head's logit metrics). The report states the subsample
(report.json's verify.layer_rows, the per-layer sections of report.md and report.html). The default
is 256 rows (a verify of 8 x 64 tokens measures 32 of each window's); --layer-rows all (layer_rows=None)
measures every row, as before issue 40's last stop.
"""
import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_python_verify_isolated as iso  # noqa: E402  (its Llama, plan, old way and row comparison)
from cli_checks import FAILURES, check  # noqa: E402
import scratch  # noqa: E402

np, torch = iso.np, iso.torch
verify, pt = iso.verify, iso.pt


def main():
    tmp = scratch.mkdtemp(prefix="precis-verify-layer-rows-")
    try:
        model = iso.llama()
        ids = np.random.default_rng(3).integers(0, 5000, (8, 64)).astype(np.int64)
        positions = verify.layer_rows_positions(40, 8, 64)
        check(positions == [6, 19, 32, 44, 57], f"40 rows of 8 windows of 64: 5 evenly spread tokens each, got {positions}")
        check(verify.layer_rows_positions(None, 8, 64) is None and verify.layer_rows_positions(512, 8, 64) is None
              and verify.layer_rows_positions(3, 8, 64) == [32], "no subsample without N or at N >= all rows; 1 at least")
        chosen = pt.resolve_plan(model, iso.PLAN)
        want, _ = iso.precis_run_rows(tmp, model, chosen, torch.from_numpy(ids), positions=positions)

        out = os.path.join(tmp, "verify")
        res = verify.verify(model, iso.PLAN, ids, batch_size=8, layer_rows=40, out=out)
        got = {r["layer"]: r for r in res.report["rows"]}
        check(sorted(got) == sorted(chosen), f"one isolated row per planned layer: {sorted(got)}")
        check(all(got[n]["m"] == 5 and got[n]["batch"] == 8 for n in got), "each row: 8 samples of 5 rows")
        equal = sum(iso.same_row(got[n], want[n], f"--layer-rows 40, {n} ({chosen[n]})") for n in chosen if n in got)
        check(equal == len(chosen), f"{equal} of {len(chosen)} subsampled rows equal precis run's on the same inputs")

        full = verify.verify(model, iso.PLAN, ids, batch_size=8, layer_rows="all")
        check(res.end_to_end["metrics"] == full.end_to_end["metrics"] and res.end_to_end["tokens"] == 8 * 64,
              "the end-to-end figures use every token, as with every row")
        check(full.report["verify"]["layer_rows"]["positions"] == "all" and full.report["verify"]["layer_rows"]["requested"]
              is None and all(r["m"] == 64 for r in full.report["rows"]), "with layer_rows='all' every row is measured")
        default = verify.verify(model, iso.PLAN, ids, batch_size=8)
        lr = default.report["verify"]["layer_rows"]
        check(verify.DEFAULT_LAYER_ROWS == 256 and lr["requested"] == 256 and lr["rows"] == 256
              and lr["positions"] == verify.layer_rows_positions(256, 8, 64)
              and all(r["m"] == 32 for r in default.report["rows"]),
              f"by default the rows are measured on 256 token rows (32 of each window's 64): {lr}")
        check(default.end_to_end["metrics"] == full.end_to_end["metrics"], "the default's end-to-end figures use every token")
        check(verify.parse_layer_rows("all") is None and verify.parse_layer_rows("ALL") is None
              and verify.parse_layer_rows("12") == 12, "--layer-rows takes a count or all")
        for bad in ("0", "-3", "many"):
            try:
                verify.parse_layer_rows(bad)
                check(False, f"--layer-rows {bad} was accepted")
            except verify.VerifyError as e:
                check("--layer-rows" in str(e) and "all" in str(e), f"--layer-rows {bad}: {e}")
        check(any(res.per_layer[i]["cumulative"]["rel_fro"] != full.per_layer[i]["cumulative"]["rel_fro"]
                  for i in range(len(chosen))), "the cumulative rows are measured on the subsample too")
        stated = res.report["verify"]["layer_rows"]
        check(stated == {"requested": 40, "rows": 40, "of": 512, "per_window": 5, "positions": positions},
              f"report.json states the subsample: {stated}")
        with open(os.path.join(out, "report.json")) as f:
            check(json.load(f)["verify"]["layer_rows"] == stated, "report.json on disk states it")
        for name in ("report.md", "report.html"):
            with open(os.path.join(out, name)) as f:
                text = f.read()
            check("--layer-rows 40" in text and "6, 19, 32, 44, 57" in text and "40 of 512 rows" in text,
                  f"{name}'s per-layer section states the subsample")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
