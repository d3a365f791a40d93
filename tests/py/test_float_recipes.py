"""Every cpu-backend recipe against an independent NumPy computation on non-integer data.

The dataset is written by h5py alone (DESIGN §4), so nothing of precis produces the inputs; the
outputs come from `precis run --save-outputs`. The rounding of each recipe is written here again,
from docs/formats.md, without calling precis:

- tf32 / bf16: round to nearest even by bit manipulation of the float32 pattern (13 / 16 low bits);
- fp16: NumPy's float16 conversion (IEEE RNE);
- fp8: e4m3 with a per-tensor scale s = fl32(amax / 448), x/s rounded to 3 fraction bits (RNE),
  subnormal quantum 2^-9, saturating at 448; output c = fl32(C * fl32(s_a * s_b)) rounded to bf16;
- int8: per-row A / per-column B scales (dynamic), or one static A scale from calib/a (absmax,
  percentile by nearest rank, mse over the 128-candidate grid), exact integer GEMM;
- fp16acc16: the sequential k loop with every partial sum rounded to fp16, reproduced exactly.

The bound for the FP32-accumulated recipes: with Z = A_r·B_r computed exactly (float64: products
of <= 24-bit significands are exact, and the float64 summation error, below k·2^-53·|A_r|·|B_r|,
is added to the allowance) and any summation order of float32 products and sums, the float32
result lies within gamma_k·(|A_r|·|B_r|), gamma_k = k·u/(1 - k·u), u = 2^-24 (Higham, Thm 3.4).
Rounding to the output format is monotonic, so the output must lie between the output-format
roundings of the interval's ends. Leaving an operand unrounded moves results by ~2^-9 (bf16),
~2^-11 (fp16, tf32) of |A|·|B|, far outside that interval; leaving the output unrounded breaks
its representability (bf16: low 16 bits zero; fp16: the value round-trips through float16).
"""
import json
import os
import subprocess
import sys
import scratch  # tests/py/scratch.py: scratch under the build tree, removed on a signal

import h5py
import numpy as np

PRECIS = os.environ["PRECIS"]
FAILURES = []
FAST = ["--min-samples", "2", "--max-samples", "2", "--max-time-ms", "2"]
F32 = np.float32


def check(cond, msg):
    if not cond:
        FAILURES.append(msg)
        print("FAIL:", msg, file=sys.stderr)


def run(args, expect=0):
    p = subprocess.run([PRECIS] + args, capture_output=True, text=True)
    if p.returncode != expect:
        print(p.stdout[-3000:], p.stderr[-3000:], file=sys.stderr)
        raise SystemExit(f"precis {' '.join(args)}: exit {p.returncode}, expected {expect}")
    return p


# ---- independent roundings ----

def round_mantissa_bits(x, drop):
    """RNE of float32 x to 23 - drop fraction bits, by integer arithmetic on the bit pattern
    (finite inputs only: the data here is finite and far from overflow)."""
    u = np.asarray(x, dtype=F32).view(np.uint32).astype(np.uint64)
    half = np.uint64((1 << (drop - 1)) - 1)
    lsb = (u >> np.uint64(drop)) & np.uint64(1)
    r = ((u + half + lsb) >> np.uint64(drop)) << np.uint64(drop)
    return r.astype(np.uint32).view(F32)


def to_bf16(x):
    return round_mantissa_bits(x, 16)


def to_tf32(x):
    return round_mantissa_bits(x, 13)


def to_f16(x):
    return np.asarray(x, dtype=F32).astype(np.float16).astype(F32)


def to_e4m3(v):
    """e4m3 satfinite of float32 values v, as float32: 3 fraction bits, quantum 2^-9 below 2^-6."""
    v = np.asarray(v, dtype=np.float64)
    a = np.abs(v)
    _, e = np.frexp(a)  # a = f * 2^e, 0.5 <= f < 1: the leading bit is 2^(e-1)
    quantum = np.where(a >= 2.0 ** -6, np.ldexp(1.0, e - 1 - 3), 2.0 ** -9)
    r = np.rint(a / quantum) * quantum  # np.rint: ties to even; a / quantum is exact (power of 2)
    r = np.minimum(r, 448.0)
    return (np.sign(v) * r).astype(F32)


def gamma(k):
    u = 2.0 ** -24
    return k * u / (1 - k * u)


def fp32_interval(a_r, b_r):
    """Exact product and the half-width of the interval any float32 summation lands in."""
    a64, b64 = a_r.astype(np.float64), b_r.astype(np.float64)
    z = np.matmul(a64, b64)
    zabs = np.matmul(np.abs(a64), np.abs(b64))
    k = a_r.shape[-1]
    return z, (gamma(k) + k * 2.0 ** -53) * zabs


def between(c, lo, hi):
    return bool(np.all((c >= lo) & (c <= hi)))


def worst_excess(c, lo, hi):
    c = c.astype(np.float64)
    return float(np.max(np.maximum(lo - c, c - hi)))


# ---- the dataset ----

def write_dataset(path, rng):
    shapes = {"shared": (2, 12, 40, 24, False), "batched": (2, 7, 33, 11, True)}
    with h5py.File(path, "w") as f:
        f.attrs.update(format="precis-dataset", format_version=1, generator="test_float_recipes (h5py)",
                       created_utc="2026-11-30T00:00:00Z", seed=0, suite="", dataset_id="float-recipes")
        for name, (batch, m, k, n, b_batched) in shapes.items():
            # Non-integer data of mixed magnitude, so every rounding step matters.
            a = (rng.standard_normal((batch, m, k)) * np.exp(rng.uniform(-1, 1, (batch, m, k)))).astype(F32)
            b = rng.uniform(-2, 2, (batch, k, n) if b_batched else (k, n)).astype(F32)
            # A calibration split whose absmax is below the evaluated data's: static scales clip.
            # U(-1, 1) and one outlier at 4: mse and percentile choose a clip below the absmax, which is
            # below the evaluated A's, so every method clips.
            calib = rng.uniform(-1, 1, (5, m, k))
            calib.flat[3] = 4.0
            calib = calib.astype(F32)
            a64, b64 = a.astype(np.float64), b.astype(np.float64)
            c_ref = np.matmul(a64, b64)
            ab_abs = np.matmul(np.abs(a64), np.abs(b64))
            g = f.create_group(f"workloads/{name}")
            g.attrs.update(kind="gemm", m=m, n=n, k=k, batch=batch, description="float recipes", a_dist="normal",
                           b_dist="uniform")
            if b_batched:
                g.attrs["b_batched"] = 1
            for dname, arr in (("a", a), ("b", b), ("c_ref", c_ref), ("ab_abs", ab_abs), ("calib/a", calib)):
                g.create_dataset(dname, data=arr)
    return list(shapes)


# ---- the recipes in NumPy ----

def b_of(b, i):
    return b[i] if b.ndim == 3 else b


def check_fp32_family(name, a, b, c, round_in, round_out):
    """Rounded inputs, float32 accumulation, output rounded by round_out (None: float32 output)."""
    a_r, b_r = round_in(a), round_in(b)
    for i in range(a.shape[0]):
        z, err = fp32_interval(a_r[i], b_of(b_r, i))
        lo, hi = z - err, z + err
        if round_out is not None:
            # Rounding to the output is monotonic; the float32 result itself lies in [lo, hi] after
            # its own rounding, so widen by one float32 step before the output rounding.
            lo = round_out(np.nextafter(lo.astype(F32), F32(-np.inf)))
            hi = round_out(np.nextafter(hi.astype(F32), F32(np.inf)))
        check(between(c[i].astype(np.float64), lo, hi),
              f"{name}[{i}]: output outside the independent interval by {worst_excess(c[i], lo, hi):.3g} "
              f"(max |c| {np.max(np.abs(c[i])):.3g})")


def check_fp16acc16(name, a, b, c):
    a_r, b_r = to_f16(a).astype(np.float64), to_f16(b).astype(np.float64)
    for i in range(a.shape[0]):
        ai, bi = a_r[i], b_of(b_r, i)
        acc = np.zeros((ai.shape[0], bi.shape[1]))
        for p in range(ai.shape[1]):
            # acc (fp16) + exact product of two fp16 values, in float64, then one rounding to fp16.
            acc = (acc + ai[:, p:p + 1] * bi[p:p + 1, :]).astype(np.float16).astype(np.float64)
        check(np.array_equal(acc.astype(F32).view(np.uint32), c[i].view(np.uint32)),
              f"{name}[{i}]: differs from the sequential fp16-accumulated sum "
              f"(max diff {np.max(np.abs(acc - c[i])):.3g})")


def fp8_scale(x):
    return F32(F32(np.max(np.abs(x))) / F32(448))


def check_fp8(name, a, b, c, details):
    sa, sb = fp8_scale(a), fp8_scale(b)
    check(details.get("fp8_scale_a") == float(sa) and details.get("fp8_scale_b") == float(sb),
          f"{name}: fp8 scales {details.get('fp8_scale_a')}, {details.get('fp8_scale_b')}, expected {sa}, {sb}")
    a_q = to_e4m3((a / sa).astype(F32))
    b_q = to_e4m3((b / sb).astype(F32))
    s = F32(sa * sb)
    u = 2.0 ** -24
    for i in range(a.shape[0]):
        z, err = fp32_interval(a_q[i], b_of(b_q, i))
        # then one float32 multiplication by s (relative error <= u), then bf16.
        s64 = float(s)
        lo = np.minimum((z - err) * s64, (z + err) * s64)
        hi = np.maximum((z - err) * s64, (z + err) * s64)
        lo, hi = lo - np.abs(lo) * u, hi + np.abs(hi) * u
        lo = to_bf16(np.nextafter(lo.astype(F32), F32(-np.inf)))
        hi = to_bf16(np.nextafter(hi.astype(F32), F32(np.inf)))
        check(between(c[i].astype(np.float64), lo, hi),
              f"{name}[{i}]: fp8 output outside the independent interval by {worst_excess(c[i], lo, hi):.3g}")


def int8_quantize(x, s):
    with np.errstate(divide="ignore", invalid="ignore"):
        v = np.where(s > 0, np.rint((x / np.where(s > 0, s, F32(1))).astype(F32)), F32(0))
    clipped = np.abs(v) > 127
    return np.clip(v, -127, 127).astype(np.int64), int(np.sum(clipped))


def calib_amax(calib, method, percentile):
    x = np.abs(calib.astype(F32).ravel())
    amax = F32(np.max(x))
    if method == "absmax":
        return amax
    if method == "percentile":
        n = x.size
        rank = int(np.ceil(percentile * n / 100 * (1 - 1e-12)))
        return F32(np.sort(x)[max(rank, 1) - 1])
    best, best_clip = np.inf, amax
    xs = calib.astype(F32).ravel()
    for kk in range(128, 0, -1):
        clip = F32(float(amax) * kk / 128)
        s = F32(clip / F32(127))
        q, _ = int8_quantize(xs, s)
        mse = float(np.mean((q.astype(np.float64) * float(s) - xs.astype(np.float64)) ** 2))
        if mse < best:
            best, best_clip = mse, clip
    return best_clip


def int8_expected(a, b, static_amax=None):
    """The int8 recipe: exact integer GEMM, c = fl32(fl32(s_a*s_b) * fl32(acc)); also the clipped count."""
    batch, m, k = a.shape
    rows = a.reshape(batch * m, k)
    if static_amax is None:
        sa = (np.max(np.abs(rows), axis=1) / F32(127)).astype(F32)
    else:
        sa = np.full(batch * m, F32(static_amax) / F32(127), dtype=F32)
    qa, clipped = int8_quantize(rows, sa[:, None])
    qa = qa.reshape(batch, m, k)
    sa = sa.reshape(batch, m)
    bs = b if b.ndim == 3 else b[None]
    sb = (np.max(np.abs(bs), axis=1) / F32(127)).astype(F32)
    qb, clipped_b = int8_quantize(bs, sb[:, None, :])
    out = []
    for i in range(batch):
        j = i if b.ndim == 3 else 0
        acc = qa[i] @ qb[j]
        out.append(((sa[i][:, None] * sb[j][None, :]).astype(F32) * acc.astype(F32)).astype(F32))
    return np.stack(out), clipped + clipped_b


def main():
    tmp = scratch.mkdtemp(prefix="precis-float-")
    ds = os.path.join(tmp, "d.h5")
    workloads = write_dataset(ds, np.random.default_rng(2026))
    saved = os.path.join(tmp, "out.h5")
    # The seven original presets (issue 16's are checked by tests/venv/test_quantized_oracle.py).
    run(["run", ds, "--backend", "cpu", "--recipes", "fp32,tf32,fp16,fp16acc16,bf16,int8,fp8", "-o", os.path.join(tmp, "rep"), "--save-outputs", saved,
         "--quiet"] + FAST)
    report = json.load(open(os.path.join(tmp, "rep", "report.json")))
    rows = {(r["workload"], r["recipe"]): r for r in report["rows"]}
    check(len(rows) == 2 * 7, f"expected 14 rows, got {len(rows)}")
    checked = 0
    with h5py.File(ds, "r") as d, h5py.File(saved, "r") as o:
        for wl in workloads:
            a = d[f"/workloads/{wl}/a"][()]
            b = d[f"/workloads/{wl}/b"][()]
            out = {r: o[f"/workloads/{wl}/{r}/c"][()] for r in ("fp32", "tf32", "fp16", "fp16acc16", "bf16", "int8",
                                                                  "fp8")}
            for r, c in out.items():
                check(c.dtype == F32 and c.shape[:1] == a.shape[:1], f"{wl}/{r}: saved output {c.dtype} {c.shape}")
                check(rows[(wl, r)]["status"] == "ok", f"{wl}/{r}: status {rows[(wl, r)]['status']}")
            # Representability in the output format.
            for r in ("bf16", "fp8"):
                check(not np.any(out[r].view(np.uint32) & 0xFFFF), f"{wl}/{r}: output not bf16 (low 16 bits set)")
            for r in ("fp16", "fp16acc16"):
                check(np.array_equal(to_f16(out[r]).view(np.uint32), out[r].view(np.uint32)),
                      f"{wl}/{r}: output not representable in fp16")
            check_fp32_family(f"{wl}/fp32", a, b, out["fp32"], lambda x: np.asarray(x, F32), None)
            check_fp32_family(f"{wl}/tf32", a, b, out["tf32"], to_tf32, None)
            check_fp32_family(f"{wl}/fp16", a, b, out["fp16"], to_f16, to_f16)
            check_fp32_family(f"{wl}/bf16", a, b, out["bf16"], to_bf16, to_bf16)
            check_fp16acc16(f"{wl}/fp16acc16", a, b, out["fp16acc16"])
            check_fp8(f"{wl}/fp8", a, b, out["fp8"], rows[(wl, "fp8")].get("details") or {})
            ref, _ = int8_expected(a, b)
            check(np.array_equal(ref.view(np.uint32), out["int8"].view(np.uint32)),
                  f"{wl}/int8 (dynamic): differs from the exact integer computation")
            checked += 7
    check(checked == 14, f"checked {checked} outputs, expected 14")

    # Static int8 activation scales from calib/a, and the clipped metric.
    for method in ("absmax", "percentile", "mse"):
        rep = os.path.join(tmp, f"int8-{method}")
        outp = os.path.join(tmp, f"int8-{method}.h5")
        # --percentile 99: the default 99.99 is the absmax on a split this small (rank 2400 of 2400).
        run(["run", ds, "--backend", "cpu", "--recipes", "int8", "--int8-act-scale", method, "--percentile", "99",
             "-o", rep, "--save-outputs", outp, "--quiet"] + FAST)
        mrows = {r["workload"]: r for r in json.load(open(os.path.join(rep, "report.json")))["rows"]}
        check(len(mrows) == len(workloads), f"{method}: {len(mrows)} rows")
        with h5py.File(ds, "r") as d, h5py.File(outp, "r") as o:
            for wl in workloads:
                a = d[f"/workloads/{wl}/a"][()]
                b = d[f"/workloads/{wl}/b"][()]
                amax = calib_amax(d[f"/workloads/{wl}/calib/a"][()], method, 99.0)
                check(method == "absmax" or amax < calib_amax(d[f"/workloads/{wl}/calib/a"][()], "absmax", 100.0),
                      f"{wl}/{method}: the calibrated amax should be below the absmax on this data")
                row = mrows[wl]
                details = row.get("details") or {}
                check(details.get("a_amax_static") == float(amax),
                      f"{wl}/{method}: a_amax_static {details.get('a_amax_static')}, expected {amax}")
                ref, clipped = int8_expected(a, b, amax)
                got = o[f"/workloads/{wl}/int8/c"][()]
                check(np.array_equal(ref.view(np.uint32), got.view(np.uint32)),
                      f"{wl}/{method}: int8 output differs (max diff {np.max(np.abs(ref - got)):.3g})")
                frac = clipped / (a.size + b.size)
                check(clipped > 0, f"{wl}/{method}: the calibration split was meant to make A clip")
                cl = row["error"].get("clipped")
                check(cl is not None and abs(cl["worst"] - frac) <= 1e-12 and abs(cl["mean"] - frac) <= 1e-12,
                      f"{wl}/{method}: clipped {cl}, expected {frac} ({clipped} of {a.size + b.size})")

    # int8 over a long k: the cpu backend sums the codes' products by sgemm in chunks of 1024 (exact
    # while every partial sum stays within 2^24) and adds the chunks in int32. Data near each
    # row's/column's absmax make the codes ~115..127, positive over the first half of k and negative
    # over the second: a running sum passes 2^24 (where float32 stops holding every integer) and
    # the total comes back small (where float32 shows every unit), so an unchunked float32 sum is
    # seen to be off (n = 64: at n = 5 OpenBLAS happened to sum exactly). k not a multiple of 1024
    # leaves a partial last chunk. Shared and batched B.
    long_ds = os.path.join(tmp, "long-k.h5")
    rng = np.random.default_rng(7)
    with h5py.File(long_ds, "w") as f:
        f.attrs.update(format="precis-dataset", format_version=1, generator="test_float_recipes (h5py)",
                       created_utc="2026-11-30T00:00:00Z", seed=0, suite="", dataset_id="int8-long-k")
        for name, (batch, m, k, n, b_batched) in {"long_shared": (2, 3, 3000, 64, False),
                                                   "long_batched": (2, 2, 2900, 48, True)}.items():
            a = rng.uniform(0.9, 1.0, (batch, m, k)).astype(F32)
            a[:, :, k // 2:] *= -1
            b = rng.uniform(0.9, 1.0, (batch, k, n) if b_batched else (k, n)).astype(F32)
            a64, b64 = a.astype(np.float64), b.astype(np.float64)
            g = f.create_group(f"workloads/{name}")
            g.attrs.update(kind="gemm", m=m, n=n, k=k, batch=batch, description="int8 long k", a_dist="uniform",
                           b_dist="uniform")
            if b_batched:
                g.attrs["b_batched"] = 1
            for dname, arr in (("a", a), ("b", b), ("c_ref", np.matmul(a64, b64)),
                               ("ab_abs", np.matmul(np.abs(a64), np.abs(b64)))):
                g.create_dataset(dname, data=arr)
    long_out = os.path.join(tmp, "long-k-out.h5")
    run(["run", long_ds, "--backend", "cpu", "--recipes", "int8", "-o", os.path.join(tmp, "long-rep"),
         "--save-outputs", long_out, "--quiet"] + FAST)
    with h5py.File(long_ds, "r") as d, h5py.File(long_out, "r") as o:
        for wl in ("long_shared", "long_batched"):
            a, b = d[f"/workloads/{wl}/a"][()], d[f"/workloads/{wl}/b"][()]
            ref, _ = int8_expected(a, b)
            got = o[f"/workloads/{wl}/int8/c"][()]
            check(np.array_equal(ref.view(np.uint32), got.view(np.uint32)),
                  f"{wl}/int8 (k={a.shape[2]}): differs from the exact integer computation "
                  f"(max diff {np.max(np.abs(ref.astype(np.float64) - got)):.3g})")

    passed = 1 if not FAILURES else 0
    print(f"{passed} passed, {1 - passed} failed ({len(FAILURES)} failed checks)")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
