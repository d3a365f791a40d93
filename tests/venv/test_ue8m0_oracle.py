"""UE8M0 fp8 scales (issue 33: `e4m3@k128:ue8m0`, the fp8-block-ue8m0 preset) against an independent
NumPy implementation of DeepGEMM's rule.

DeepGEMM (deep_gemm/utils/math.py, per_token_cast_to_fp8 / per_block_cast_to_fp8 with use_ue8m0):
sf = amax / 448, then ceil_to_ue8m0(sf) = 2^ceil(log2(sf)), and x / sf cast to e4m3. Written here
with NumPy's frexp on the fp32 quotient (not precis's code): for every group of every
granularity (tensor, row, col, k128, 128x128, 1x128, ragged edges) and e4m3/e5m2, the scale must be
a power of two, >= the fp32 scale amax/max, < twice it, equal to the NumPy value bit for bit, its
E8M0 code its exponent + 127, and the codes e4m3/e5m2(x / s) by ml_dtypes (saturating); no element
may saturate (the scale rounds up). Then the fp8-block-ue8m0 preset through `precis run` against
the NumPy dequantize-and-multiply within the summation tolerance, and its tensor bytes (one byte
per scale)."""
import json
import os
import subprocess
import sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "py"))
import scratch  # noqa: E402  (tests/py/scratch.py: scratch under the build tree, removed on a signal)

import numpy as np

try:
    import h5py
    import ml_dtypes as md
except ImportError as exc:  # pragma: no cover
    print(f"SKIP: {exc} (cmake/python-test-requirements.txt)", file=sys.stderr)
    sys.exit(77)

BUILD = os.environ.get("PRECIS_BUILD_DIR", "build")
PRECIS = os.environ.get("PRECIS") or os.path.join(BUILD, "precis")
DRIVER = os.environ.get("PRECIS_QUANT_DRIVER") or os.path.join(BUILD, "tests", "quantize_driver")
F32 = np.float32
MAXES = {"e4m3": 448.0, "e5m2": 57344.0}
DTYPES = {"e4m3": md.float8_e4m3fn, "e5m2": md.float8_e5m2}
failures = []


def check(cond, what):
    print(f"{'ok  ' if cond else 'FAIL'} {what}")
    if not cond:
        failures.append(what)


def group_shape(gran, side, rows, cols):
    if gran == "tensor":
        g = (rows, cols)
    elif gran == "row":
        g = (1, cols)
    elif gran == "col":
        g = (rows, 1)
    elif gran.startswith("k"):
        n = int(gran[1:])
        g = (1, n) if side == "a" else (n, 1)
    else:
        r, c = gran.split("x")
        g = (int(r), int(c))
    return min(g[0], rows), min(g[1], cols)


def ceil_pow2(s):
    """2^ceil(log2(s)) for a positive fp32 s, exactly (frexp: s = m * 2^e, m in [0.5, 1))."""
    m, e = np.frexp(np.float64(s))
    return np.ldexp(1.0, int(e) - 1) if m == 0.5 else np.ldexp(1.0, int(e))


def driver(tmp, x, elem, gran, side):
    rows, cols = x.shape
    path, prefix = os.path.join(tmp, "in.f32"), os.path.join(tmp, "out")
    x.astype(F32).tofile(path)
    r = subprocess.run([DRIVER, "quantize", elem, gran, "ue8m0", side, str(rows), str(cols), path, prefix],
                       capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"quantize_driver {elem} {gran} ue8m0: {r.stderr}")
    meta = open(prefix + ".meta").read().split()
    sr, sc = int(meta[0]), int(meta[1])
    return (np.fromfile(prefix + ".codes", np.uint8).reshape(rows, cols),
            np.fromfile(prefix + ".scales", F32).reshape(sr, sc),
            np.fromfile(prefix + ".scale_codes", np.uint8).reshape(sr, sc), int(meta[2]))


def check_quantizer(tmp, rng):
    configs = 0
    for elem in ("e4m3", "e5m2"):
        for side, grans in (("a", ["tensor", "row", "k128", "k32", "1x128", "16x8"]),
                            ("b", ["tensor", "col", "k128", "128x128", "16x8"])):
            for rows, cols in ((200, 300), (37, 129)):
                x = (rng.standard_normal((rows, cols)) * np.exp(rng.uniform(-12, 12, (rows, 1)))).astype(F32)
                x[3] = 0  # an all-zero row: scale 1 (code 127), codes 0
                for gran in grans:
                    codes, scales, scode, clipped = driver(tmp, x, elem, gran, side)
                    gr, gc = group_shape(gran, side, rows, cols)
                    bad = []
                    for gi in range(scales.shape[0]):
                        for gj in range(scales.shape[1]):
                            blk = x[gi * gr:(gi + 1) * gr, gj * gc:(gj + 1) * gc]
                            amax = F32(np.max(np.abs(blk)))
                            s = scales[gi, gj]
                            if amax == 0:
                                if not (s == 1.0 and scode[gi, gj] == 127 and not codes[gi * gr:(gi + 1) * gr,
                                                                                       gj * gc:(gj + 1) * gc].any()):
                                    bad.append((gi, gj, "zero group"))
                                continue
                            s32 = F32(amax / F32(MAXES[elem]))  # the fp32 scale (IEEE quotient)
                            want = ceil_pow2(s32)
                            m, e = np.frexp(np.float64(s))
                            if not (m == 0.5 and s >= s32 and s < 2 * s32 and np.float64(s) == want
                                    and scode[gi, gj] == int(e) - 1 + 127):
                                bad.append((gi, gj, float(s), float(s32), float(want), int(scode[gi, gj])))
                                continue
                            q = np.clip(blk.astype(np.float64) / np.float64(s), -MAXES[elem], MAXES[elem])
                            want_codes = q.astype(F32).astype(DTYPES[elem]).view(np.uint8)
                            if not np.array_equal(want_codes, codes[gi * gr:(gi + 1) * gr, gj * gc:(gj + 1) * gc]):
                                bad.append((gi, gj, "codes"))
                    check(not bad, f"{elem}@{gran}:ue8m0 side {side} {rows}x{cols}: every scale 2^ceil(log2(amax/max))"
                          f" >= the fp32 scale, E8M0 code, element codes{'' if not bad else ' ' + str(bad[:3])}")
                    check(clipped == 0, f"{elem}@{gran}:ue8m0 {rows}x{cols}: nothing saturates ({clipped})")
                    configs += 1
    return configs


def check_preset(tmp, rng):
    m, n, k = 24, 160, 384
    a = (rng.standard_normal((1, m, k)) * np.exp(rng.uniform(-3, 3, (1, m, 1)))).astype(F32)
    b = (rng.standard_normal((k, n)) * 0.05).astype(F32)
    ds = os.path.join(tmp, "d.h5")
    with h5py.File(ds, "w") as f:
        f.attrs.update(format="precis-dataset", format_version=1, generator="test_ue8m0_oracle.py",
                       created_utc="2026-01-01T00:00:00Z", seed=0, suite="", dataset_id="ue8m0-oracle")
        w = f.create_group("workloads/w")
        w.attrs.update(kind="gemm", m=m, n=n, k=k, batch=1, description="oracle", a_dist="normal", b_dist="normal")
        w["a"], w["b"] = a, b
        w["c_ref"] = (a[0].astype(np.float64) @ b.astype(np.float64))[None]
        w["ab_abs"] = (np.abs(a[0].astype(np.float64)) @ np.abs(b.astype(np.float64)))[None]
    rep, saved = os.path.join(tmp, "rep"), os.path.join(tmp, "out.h5")
    r = subprocess.run([PRECIS, "run", ds, "--recipes", "fp8-block-ue8m0,fp8-block", "-o", rep, "--save-outputs", saved,
                        "--backend", "cpu", "--quiet", "--max-time-ms", "1", "--min-samples", "1", "--max-samples", "1"],
                       capture_output=True, text=True)
    check(r.returncode in (0, 3), f"precis run fp8-block-ue8m0: exit {r.returncode} {r.stderr[-300:]}")
    rows = {x["recipe"]: x for x in json.load(open(os.path.join(rep, "report.json")))["rows"]}
    row = rows["fp8-block-ue8m0"]
    check(row["status"] == "ok", f"fp8-block-ue8m0 ok ({row.get('reason')})")
    # Dequantized operands by the rule above, then the float64 product; the cpu backend sums units in
    # fp32 per 128-segment and scales in fp32: within (k + 8) 2^-24 sum|a_q||b_q| plus bf16's half ulp.
    def deq(x, gr, gc):
        out = np.zeros_like(x, dtype=np.float64)
        for i in range(0, x.shape[0], gr):
            for j in range(0, x.shape[1], gc):
                blk = x[i:i + gr, j:j + gc]
                amax = F32(np.max(np.abs(blk)))
                s = ceil_pow2(F32(amax / F32(448))) if amax > 0 else 1.0
                q = np.clip(blk.astype(np.float64) / s, -448, 448).astype(F32).astype(md.float8_e4m3fn)
                out[i:i + gr, j:j + gc] = q.astype(np.float64) * s
        return out
    da, db = deq(a[0], 1, 128), deq(b, 128, 128)
    want = da @ db
    tol = (k + 8) * 2.0 ** -24 * (np.abs(da) @ np.abs(db)) + 2.0 ** -8 * np.abs(want)
    with h5py.File(saved, "r") as o:
        got = o["workloads/w/fp8-block-ue8m0/c"][()].reshape(m, n).astype(np.float64)
        plain = o["workloads/w/fp8-block/c"][()].reshape(m, n).astype(np.float64)
    err = np.abs(got - want)
    check(bool(np.all(err <= tol)), f"fp8-block-ue8m0 output within tolerance of NumPy (worst {np.max(err / tol):.3g})")
    check(bool(np.any(np.abs(plain - want) > tol)), "the tolerance tells it from fp8-block (fp32 scales)")
    a_scales, b_scales = m * (k // 128), (k // 128) * ((n + 127) // 128)
    plain_bytes = rows["fp8-block"]["memory"]["tensor_bytes"]
    check(plain_bytes - row["memory"]["tensor_bytes"] == 3 * (a_scales + b_scales),
          f"tensor bytes: one byte per scale ({row['memory']['tensor_bytes']} vs {plain_bytes})")


def main():
    rng = np.random.default_rng(8)
    with scratch.TemporaryDirectory() as tmp:
        configs = check_quantizer(tmp, rng)
        check_preset(tmp, rng)
    print(f"{configs} quantizer configurations; {len(failures)} failed checks")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
