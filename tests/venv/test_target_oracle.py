"""NVFP4 under --target sm_100 (issue 33) against an independent NumPy model of Blackwell's 35-bit
block-scaled accumulator (docs/formats.md, "Target architectures").

The model, written here from the documented rule and not from precis's code: the units are
e2m1 value x E4M3 block scale (quantizer oracle of test_formats_oracle.py), which are integer
multiples of 2^-10, so products are integers times 2^-20 and every 64-product block sum is an exact
int64; per MMA instruction (64 products) the accumulator D and the products are aligned to the
largest exponent among them and truncated toward zero to 35 fraction bits below it, summed exactly,
and D is written back as an fp32 rounded toward zero; after the whole k, D is multiplied by
fp32(s_a * s_b), the nv tensor scales. precis's output must equal that bit for bit. The same
comparison must fail against the sm_90 run (emulated: fp32 sums) and against the same model with
25 fraction bits, so the test tells the widths apart."""
import csv as csv_module
import json
import os
import subprocess
import sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "py"))
import scratch  # noqa: E402  (tests/py/scratch.py: scratch under the build tree, removed on a signal)

import numpy as np

try:
    import h5py
    import ml_dtypes  # noqa: F401
except ImportError as exc:  # pragma: no cover
    print(f"SKIP: {exc} (cmake/python-test-requirements.txt)", file=sys.stderr)
    sys.exit(77)

BUILD = os.environ.get("PRECIS_BUILD_DIR", "build")
PRECIS = os.environ.get("PRECIS") or os.path.join(BUILD, "precis")
os.environ.setdefault("PRECIS_QUANT_DRIVER", os.path.join(BUILD, "tests", "quantize_driver"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_formats_oracle as fo  # noqa: E402

F32 = np.float32
FAST = ["--backend", "cpu", "--quiet", "--max-time-ms", "1", "--min-samples", "1", "--max-samples", "1"]
SPEC = "a=e2m1@nv,b=e2m1@nv,out=fp32"
M, N, K = 12, 40, 352  # k: five full 64-blocks and a 32-product tail
failures = []


def check(cond, what):
    print(f"{'ok  ' if cond else 'FAIL'} {what}")
    if not cond:
        failures.append(what)


def units_of(x, side):
    """Integer units (value x block scale x 2^10) and the fp32 tensor scale of an nv operand."""
    r = fo.reference(x, "e2m1", "nv", "sym", side)
    gr, gc = fo.group_shape("nv", side, *x.shape)
    scale = np.repeat(np.repeat(r["scales"].astype(np.float64), gr, 0), gc, 1)[: x.shape[0], : x.shape[1]]
    u = fo.dec("e2m1", r["codes"]).astype(np.float64) * scale * 1024.0
    ui = np.rint(u).astype(np.int64)
    assert np.array_equal(ui.astype(np.float64), u), "units are not multiples of 2^-10"
    return ui, F32(r["tensor_scale"])


def truncate_to(v, quantum_exp):
    """v (python int) truncated toward zero to a multiple of 2^quantum_exp."""
    if quantum_exp <= 0:
        return v
    mag = (abs(v) >> quantum_exp) << quantum_exp
    return -mag if v < 0 else mag


def model(a, b, fraction_bits, block=64):
    """Per instruction of `block` products: D and the exact products aligned to the largest exponent
    and truncated to fraction_bits bits below it, summed exactly, D written as an fp32 toward zero.
    Everything in integers at the scale 2^-20 (units are multiples of 2^-10)."""
    ua, sa = units_of(a, "a")
    ub, sb = units_of(b, "b")
    alpha = F32(sa * sb)
    c = np.zeros((a.shape[0], b.shape[1]), F32)
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            d = 0
            for k0 in range(0, a.shape[1], block):
                terms = [d] + [int(x) for x in ua[i, k0:k0 + block] * ub[k0:k0 + block, j]]
                nonzero = [abs(t) for t in terms if t]
                if not nonzero:
                    continue
                emax = max(t.bit_length() - 1 for t in nonzero)
                s = sum(truncate_to(t, emax - fraction_bits) for t in terms)
                d = truncate_to(s, abs(s).bit_length() - 24) if s else 0  # fp32: 24 significant bits
            c[i, j] = F32(alpha * F32(d * 2.0 ** -20))
    return c


def main():
    tmp = scratch.mkdtemp(prefix="precis-target-")
    ds = os.path.join(tmp, "d.h5")
    rng = np.random.default_rng(33)
    # Every 16-block of k at its own scale, 2^-7..2^7: products spread over ~2^28, so the block sums
    # need more bits than fp32 keeps and a 25-bit accumulator truncates where a 35-bit one does not.
    a = (rng.standard_normal((1, M, K)) * np.repeat(2.0 ** rng.integers(-7, 8, (1, M, K // 16)), 16, 2)).astype(F32)
    b = (rng.standard_normal((K, N)) * np.repeat(2.0 ** rng.integers(-7, 8, (K // 16, N)), 16, 0)).astype(F32)
    with h5py.File(ds, "w") as f:
        f.attrs.update(format="precis-dataset", format_version=1, generator="test_target_oracle.py",
                       created_utc="2026-01-01T00:00:00Z", seed=0, suite="", dataset_id="target-oracle")
        w = f.create_group("workloads/nv")
        w.attrs.update(kind="gemm", m=M, n=N, k=K, batch=1, description="oracle", a_dist="normal", b_dist="normal")
        w["a"], w["b"] = a, b
        w["c_ref"] = (a[0].astype(np.float64) @ b.astype(np.float64))[None]
        w["ab_abs"] = (np.abs(a[0].astype(np.float64)) @ np.abs(b.astype(np.float64)))[None]
    outs = {}
    for target in ("sm_100", "sm_90"):
        rep, saved = os.path.join(tmp, target), os.path.join(tmp, target + ".h5")
        proc = subprocess.run([PRECIS, "run", ds, "--recipes", SPEC, "--target", target, "-o", rep, "--save-outputs",
                               saved, *FAST], capture_output=True, text=True)
        check(proc.returncode in (0, 3), f"precis run --target {target}: exit {proc.returncode} {proc.stderr[-300:]}")
        if proc.returncode not in (0, 3):
            return 1
        row = json.load(open(os.path.join(rep, "report.json")))["rows"][0]
        check(row["status"] == "ok" and row["target"] == target, f"{target}: row ok, target recorded ({row['target']})")
        want_way = "native" if target == "sm_100" else "emulated"
        check(row["details"].get("target_way") == want_way, f"{target}: {row['details'].get('target_plan')}")
        with h5py.File(saved, "r") as o:
            outs[target] = o[f"workloads/nv/{row['recipe']}/c"][()].reshape(M, N)
        with open(os.path.join(rep, "report.csv"), newline="") as f:
            table = list(csv_module.reader(f))
        check("target" in table[0] and table[1][table[0].index("target")] == target, f"{target}: report.csv target")
    want35 = model(a[0], b, 35)
    want25 = model(a[0], b, 25)
    got = outs["sm_100"]
    same = np.array_equal(got.view(np.uint32), want35.view(np.uint32))
    check(same, f"sm_100 bit for bit against the 35-bit NumPy model ({int(np.sum(got != want35))} of {got.size} differ)")
    d25 = int(np.sum(got.view(np.uint32) != want25.view(np.uint32)))
    check(d25 > 0, f"the 25-bit model differs in {d25} elements (the test tells the widths apart)")
    d90 = int(np.sum(outs["sm_90"].view(np.uint32) != want35.view(np.uint32)))
    check(d90 > 0, f"sm_90 (emulated, fp32 sums) differs from the sm_100 model in {d90} elements")
    print(f"{len(failures)} failed checks")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
