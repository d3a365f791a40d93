"""fp16/bf16/tf32 under --target sm_90 and sm_80 (issue 33) against an independent NumPy/Python model
of the tensor cores' fused dot-add (docs/formats.md, "Target architectures"; MMA-Sim, arXiv
2511.10909, `nv_fused_dot_add`).

The model, written here from the documented rule and not from precis's code: the inputs are
rounded to the operand format (RNE: ml_dtypes/NumPy casts; tf32 by its bit rule); k is cut into
fused dot-adds of `block` products (sm_90: 16 for fp16/bf16, 8 for tf32; sm_80: 8 and 4, its
m16n8k16 / m16n8k8 run as two halves); per dot-add, every nonzero term's exponent is taken (a
product's is ea + eb, each operand's floor(log2 |x|) but at least its format's smallest normal
exponent: -14 for fp16, -126 for bf16 and tf32; the fp32 accumulator d's at least -126), every term
(d and the exact products) is truncated toward zero to a multiple of 2^(emax - bits), the
truncated terms are summed exactly (Python integers), and d becomes that sum rounded toward zero
to fp32 (24 significant bits, 2^-149 below 2^-126). bits = 25 on sm_90, 24 on sm_80. precis's
output must equal the model bit for bit on each target, and the two targets' models must differ on
this data (so that the test can fail), as must the 24- and 25-bit models at the same block."""
import json
import math
import os
import subprocess
import sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "py"))
import scratch  # noqa: E402  (tests/py/scratch.py: scratch under the build tree, removed on a signal)

import numpy as np

try:
    import h5py
    import ml_dtypes
except ImportError as exc:  # pragma: no cover
    print(f"SKIP: {exc} (cmake/python-test-requirements.txt)", file=sys.stderr)
    sys.exit(77)

BUILD = os.environ.get("PRECIS_BUILD_DIR", "build")
PRECIS = os.environ.get("PRECIS") or os.path.join(BUILD, "precis")
F32 = np.float32
FAST = ["--backend", "cpu", "--quiet", "--max-time-ms", "1", "--min-samples", "1", "--max-samples", "1"]
M, N, K = 8, 12, 203  # k: a tail after the last full block of every size
# (spec, format, smallest normal exponent, block on sm_90, block on sm_80)
RECIPES = [("a=bf16,b=bf16,out=fp32", "bf16", -126, 16, 8),
           ("a=tf32,b=tf32,out=fp32", "tf32", -126, 8, 4),
           ("a=fp16,b=fp16,out=fp32", "fp16", -14, 16, 8)]
WIDTH = {"sm_90": 25, "sm_80": 24}
failures = []


def check(cond, what):
    print(f"{'ok  ' if cond else 'FAIL'} {what}")
    if not cond:
        failures.append(what)


def round_to(x, fmt):
    """x (float32) rounded to the format, nearest even, as float64."""
    if fmt == "bf16":
        return x.astype(ml_dtypes.bfloat16).astype(np.float64)
    if fmt == "fp16":
        return x.astype(np.float16).astype(np.float64)
    u = x.view(np.uint32).astype(np.uint64)  # tf32: 10 fraction bits, ties to even
    u = (u + 0xFFF + ((u >> 13) & 1)) & ~np.uint64(0x1FFF)
    return u.astype(np.uint32).view(F32).astype(np.float64)


def exponent(x, emin):
    return max(math.frexp(x)[1] - 1, emin)


def rz_f32(v):
    if v == 0:
        return 0.0
    q = 2.0 ** (exponent(v, -126) - 23)
    return math.trunc(v / q) * q


def model(a, b, bits, block, emin):
    c = np.zeros((a.shape[0], b.shape[1]), F32)
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            d = 0.0
            for k0 in range(0, a.shape[1], block):
                x, y = a[i, k0:k0 + block], b[k0:k0 + block, j]
                exps = [exponent(d, -126)] if d else []
                exps += [exponent(p, emin) + exponent(q, emin) for p, q in zip(x, y) if p and q]
                if not exps:
                    d = 0.0
                    continue
                shift = bits - max(exps)
                s = math.trunc(math.ldexp(d, shift))
                s += sum(math.trunc(math.ldexp(float(p) * float(q), shift)) for p, q in zip(x, y))
                d = rz_f32(math.ldexp(s, -shift))
            c[i, j] = F32(d)
    return c


def differ(x, y):
    return int(np.sum(x.view(np.uint32) != y.view(np.uint32)))


def main():
    tmp = scratch.mkdtemp(prefix="precis-mma-")
    ds = os.path.join(tmp, "d.h5")
    rng = np.random.default_rng(33)
    # Runs of k at their own scale, 2^-6..2^6: products spread over ~2^24 within a dot-add, so the
    # truncation below 24 or 25 bits drops bits that fp32 sums would keep.
    sa = np.repeat(2.0 ** rng.integers(-6, 7, (M, K // 7 + 1)), 7, 1)[:, :K]
    sb = np.repeat(2.0 ** rng.integers(-6, 7, (K // 5 + 1, N)), 5, 0)[:K]
    a = (rng.standard_normal((1, M, K)) * sa[None]).astype(F32)
    b = (rng.standard_normal((K, N)) * sb).astype(F32)
    with h5py.File(ds, "w") as f:
        f.attrs.update(format="precis-dataset", format_version=1, generator="test_mma_oracle.py",
                       created_utc="2026-01-01T00:00:00Z", seed=0, suite="", dataset_id="mma-oracle")
        w = f.create_group("workloads/mma")
        w.attrs.update(kind="gemm", m=M, n=N, k=K, batch=1, description="oracle", a_dist="normal", b_dist="normal")
        w["a"], w["b"] = a, b
        w["c_ref"] = (a[0].astype(np.float64) @ b.astype(np.float64))[None]
        w["ab_abs"] = (np.abs(a[0].astype(np.float64)) @ np.abs(b.astype(np.float64)))[None]
    outs = {}
    for target in WIDTH:
        for spec, fmt, emin, blk90, blk80 in RECIPES:
            name = f"{target}-{fmt}"
            rep, saved = os.path.join(tmp, name), os.path.join(tmp, name + ".h5")
            proc = subprocess.run([PRECIS, "run", ds, "--recipes", spec, "--target", target, "-o", rep,
                                   "--save-outputs", saved, *FAST], capture_output=True, text=True)
            check(proc.returncode in (0, 3), f"precis run {spec} --target {target}: exit {proc.returncode} "
                                             f"{proc.stderr[-300:]}")
            if proc.returncode not in (0, 3):
                return 1
            row = json.load(open(os.path.join(rep, "report.json")))["rows"][0]
            det = row["details"]
            blk = blk90 if target == "sm_90" else blk80
            check(row["status"] == "ok" and row["target"] == target, f"{target} {fmt}: row ok, target recorded")
            check(f"{WIDTH[target]} fraction bits" in det.get("accumulator", "") and "MMA-Sim" in det["accumulator"],
                  f"{target} {fmt}: accumulator detail: {det.get('accumulator', '')[:90]}")
            check(f"fused dot-add of {blk} products" in det.get("emulation", "")
                  and f"{WIDTH[target]} fraction bits" in det["emulation"],
                  f"{target} {fmt}: emulation detail: {det.get('emulation', '')[:110]}")
            with h5py.File(saved, "r") as o:
                outs[(target, fmt)] = o[f"workloads/mma/{row['recipe']}/c"][()].reshape(M, N)
    for spec, fmt, emin, blk90, blk80 in RECIPES:
        ar, br = round_to(a[0], fmt), round_to(b, fmt)
        want = {"sm_90": model(ar, br, 25, blk90, emin), "sm_80": model(ar, br, 24, blk80, emin)}
        for target in WIDTH:
            got = outs[(target, fmt)]
            check(differ(got, want[target]) == 0,
                  f"{fmt} {target}: bit for bit against the NumPy model ({differ(got, want[target])} of {got.size} differ)")
        d_targets = differ(want["sm_90"], want["sm_80"])
        d_width = differ(want["sm_90"], model(ar, br, 24, blk90, emin))
        plain = (ar.astype(F32) @ br.astype(F32)).astype(F32)
        d_plain = differ(want["sm_90"], plain)
        print(f"{fmt}: sm_90 vs sm_80 models differ in {d_targets} of {M * N}; 25 vs 24 bits at k {blk90}: {d_width}; "
              f"sm_90 model vs fp32 sums: {d_plain}")
        check(d_targets > 0, f"{fmt}: the sm_90 and sm_80 models differ on this data (the test can fail)")
        check(d_width > 0, f"{fmt}: the 25- and 24-bit models differ at the same block")
        check(differ(outs[("sm_90", fmt)], outs[("sm_80", fmt)]) > 0, f"{fmt}: precis's sm_90 and sm_80 rows differ")
    print(f"{len(failures)} failed checks")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
