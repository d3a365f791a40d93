#!/usr/bin/python3
"""The high-precision recipes (issue 19) against an independent oracle, bit for bit.

The cpu backend's outputs (`precis run --save-outputs`) of 3xtf32, bf16x3, bf16x6, bf16x9 and
ozaki-int8-3..8 must equal, bit for bit, what this file computes from the dataset's a and b with
its own arithmetic: RNE to tf32/bf16 by integer bit manipulation and NumPy float32 sums in the
documented order for the float splits; Python integers and `fractions` for the Ozaki slices (every
slice value, every slice product exact) with the float64 combination written out. fp64 is checked
against the exact rational product (Fraction) within its rounding bound, since dgemm's summation
order is OpenBLAS's. Ozaki scheme II (ozaki2-int8-N, ozaki2-int8-fast-N): the shifts recomputed with
the documented formulas, the exact integer product A'B' in Python integers (with sum |A'||B'| < M/2
checked), rounded once, bit for bit.

Runs with Debian's python3 + python3-h5py + python3-numpy; env PRECIS (binary)."""
import math
import os
import subprocess
import sys
import scratch  # tests/py/scratch.py: scratch under the build tree, removed on a signal
from fractions import Fraction

try:
    import h5py
    import numpy as np
except ImportError as exc:  # pragma: no cover
    print(f"skipped: {exc}")
    sys.exit(77)

PRECIS = os.environ.get("PRECIS") or os.path.join(os.environ.get("PRECIS_BUILD_DIR", "build"), "precis")
FAST = ["--backend", "cpu", "--quiet", "--max-time-ms", "1", "--min-samples", "1", "--max-samples", "1"]
SLICE_BITS = 7

failures = []


def check(cond, what):
    print(f"{'ok  ' if cond else 'FAIL'} {what}")
    if not cond:
        failures.append(what)


def run(*args):
    proc = subprocess.run([PRECIS, *args], capture_output=True, text=True)
    if proc.returncode != 0:
        print(proc.stdout, proc.stderr)
    return proc


# ---- float splits ---------------------------------------------------------------------------

def round_f32_bits(x, dropped):
    """RNE of float32 values to (23 - dropped) fraction bits, by integer arithmetic on the bits."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    half = np.uint64((1 << (dropped - 1)) - 1)
    lsb = (bits >> np.uint64(dropped)) & np.uint64(1)
    bits = (bits + half + lsb) & ~np.uint64((1 << dropped) - 1)
    return bits.astype(np.uint32).view(np.float32)


SCHEMES = {  # name: (dropped bits of the term format, terms per operand, largest level i + j kept)
    "3xtf32": (13, 2, 1),
    "bf16x3": (16, 2, 1),
    "bf16x6": (16, 3, 2),
    "bf16x9": (16, 3, 4),
}


def split_terms(x, dropped, terms):
    out, rest = [], x.astype(np.float32)
    for _ in range(terms):
        t = round_f32_bits(rest, dropped)
        out.append(t)
        rest = (rest - t).astype(np.float32)
    return out


def float_split_gemm(a, b, scheme):
    """a [rows, k], b [k, n] float32: the terms' products summed into one float32 accumulator, k in
    order and within each k from the largest level i + j to 0."""
    dropped, terms, max_level = SCHEMES[scheme]
    at, bt = split_terms(a, dropped, terms), split_terms(b, dropped, terms)
    pairs = [(i, lv - i) for lv in range(max_level, -1, -1) for i in range(terms) if 0 <= lv - i < terms]
    acc = np.zeros((a.shape[0], b.shape[1]), dtype=np.float32)
    for p in range(a.shape[1]):
        for i, j in pairs:
            prod = at[i][:, p:p + 1].astype(np.float64) * bt[j][p:p + 1, :].astype(np.float64)
            prod32 = prod.astype(np.float32)
            assert np.array_equal(prod32.astype(np.float64), prod), "a product of two terms is exact in fp32"
            acc = (acc + prod32).astype(np.float32)
    return acc


# ---- Ozaki scheme I on int8 -------------------------------------------------------------------

def ozaki_exponent(amax):
    return math.frexp(amax)[1] if amax > 0 else 0


def ozaki_digits(value, exponent, slices):
    """Base-2^7 digits of value·2^-exponent by truncation toward zero, in exact rationals."""
    x = Fraction(value) / Fraction(2) ** exponent if exponent >= 0 else Fraction(value) * Fraction(2) ** -exponent
    assert abs(x) < 1
    digits = []
    for _ in range(slices):
        x *= 2 ** SLICE_BITS
        d = int(x)  # truncates toward zero
        digits.append(d)
        x -= d
    assert abs(x) < 1
    return digits, x


def ozaki_gemm(a, b, slices):
    """a [rows, k], b [k, n]: the Ozaki output, every integer exact, the float64 combination in the
    documented order. Also checks that the slices represent each value to 2^-7N of its row/column."""
    rows, k = a.shape
    n = b.shape[1]
    ea = [ozaki_exponent(float(np.max(np.abs(a[i])))) for i in range(rows)]
    eb = [ozaki_exponent(float(np.max(np.abs(b[:, j])))) for j in range(n)]
    da = [[None] * k for _ in range(rows)]
    db = [[None] * n for _ in range(k)]
    for i in range(rows):
        for p in range(k):
            digits, rest = ozaki_digits(float(a[i, p]), ea[i], slices)
            assert all(-127 <= d <= 127 for d in digits)
            assert abs(rest) < 1 and Fraction(float(a[i, p])) == Fraction(2) ** ea[i] * (
                sum(Fraction(d, 2 ** (SLICE_BITS * (t + 1))) for t, d in enumerate(digits)) +
                rest / 2 ** (SLICE_BITS * slices))
            da[i][p] = digits
    for p in range(k):
        for j in range(n):
            db[p][j] = ozaki_digits(float(b[p, j]), eb[j], slices)[0]
    c = np.zeros((rows, n))
    for i in range(rows):
        for j in range(n):
            level = {}
            for g in range(2, slices + 2):
                # Python integers: exact whatever their size; each int32 slice product fits 127^2 k.
                level[g] = sum(da[i][p][s - 1] * db[p][j][g - s - 1] for s in range(1, g) for p in range(k))
                assert abs(level[g]) <= (g - 1) * 127 * 127 * k
            total = 0.0
            for g in range(slices + 1, 1, -1):
                total += math.ldexp(float(level[g]), -SLICE_BITS * g)
            c[i, j] = math.ldexp(total, ea[i] + eb[j])
    return c


# ---- Ozaki scheme II (crt-int8x<N>[-fast]) ----------------------------------------------------
# The shifts with the documented float64 formulas (src/numerics/split.h), then the exact integer
# product A'B' in Python integers (which the CRT must rebuild, since sum |A'||B'| < M/2 is checked
# here too), rounded once: float(Fraction). Not the CRT itself: any exact reconstruction must agree.

MODULI = [256, 255, 253, 251, 247, 241, 239, 233, 229, 227, 223, 217, 211, 199, 197, 193, 191, 181, 179, 173]
HALF_UP = float.fromhex("0x1.0000060000000p-1")


def crt_log2p(n, fast):
    log2m, inv_m = 0.0, 1.0
    for m in MODULI[:n]:
        log2m += math.log2(m)
        inv_m /= m
    log2m += math.log1p(-inv_m) / math.log(2.0)
    return log2m / 2 - (1.5 if fast else 0.5) - 1e-9


def ilogb(x):
    return math.frexp(x)[1] - 1 if x != 0 else 0


def crt_fast_shift(x, n):
    amax = max(abs(float(v)) for v in x)
    e = ilogb(amax)
    L = crt_log2p(n, True)
    cap = math.floor(L - 1) - e
    if amax == 0:
        return cap
    ss = 0.0
    for v in x:
        t = math.ldexp(float(v), -e)
        ss += t * t
    return min(cap, math.floor(L - HALF_UP * (math.log2(ss) + 2.0 * e)) - max(e, 0))


def crt_hat(x):
    e = 5 - ilogb(max(abs(float(v)) for v in x))
    return e, [math.ceil(math.ldexp(abs(float(v)), e)) for v in x]


def crt_accurate_shift(e, cmax, n):
    return e if cmax <= 0 else e + math.floor(crt_log2p(n, False) - HALF_UP * math.log2(float(cmax)))


def crt_gemm(a, b, n, fast):
    """a [rows, k], b [k, n]: one GEMM group of Ozaki scheme II."""
    rows, k = a.shape
    cols = b.shape[1]
    if fast:
        sa = [crt_fast_shift(a[i], n) for i in range(rows)]
        sb = [crt_fast_shift(b[:, j], n) for j in range(cols)]
    else:
        ha = [crt_hat(a[i]) for i in range(rows)]
        hb = [crt_hat(b[:, j]) for j in range(cols)]
        chat = [[sum(ha[i][1][p] * hb[j][1][p] for p in range(k)) for j in range(cols)] for i in range(rows)]
        assert all(0 <= v <= 64 for h in ha + hb for v in h[1])
        sa = [crt_accurate_shift(ha[i][0], max(chat[i]), n) for i in range(rows)]
        sb = [crt_accurate_shift(hb[j][0], max(chat[i][j] for i in range(rows)), n) for j in range(cols)]
    ap = [[int(math.trunc(math.ldexp(float(a[i, p]), sa[i]))) for p in range(k)] for i in range(rows)]
    bp = [[int(math.trunc(math.ldexp(float(b[p, j]), sb[j]))) for j in range(cols)] for p in range(k)]
    big_m = math.prod(MODULI[:n])
    c = np.zeros((rows, cols))
    for i in range(rows):
        for j in range(cols):
            assert 2 * sum(abs(ap[i][p] * bp[p][j]) for p in range(k)) < big_m, "sum |A'||B'| < M/2"
            x = sum(ap[i][p] * bp[p][j] for p in range(k))
            shift = sa[i] + sb[j]
            c[i, j] = float(Fraction(x) / Fraction(2) ** shift if shift >= 0 else Fraction(x) * 2 ** -shift)
    return c


def crt_outputs(a, b, n, fast):
    """The whole workload: with a shared b the batch folds into the rows of one group."""
    if b.ndim == 3:
        return np.stack([crt_gemm(a[s], b[s], n, fast) for s in range(a.shape[0])])
    rows = crt_gemm(a.reshape(-1, a.shape[2]), b, n, fast)
    return rows.reshape(a.shape[0], a.shape[1], b.shape[1])


def exact_product(a, b):
    rows, k = a.shape
    n = b.shape[1]
    fa = [[Fraction(float(v)) for v in row] for row in a]
    fb = [[Fraction(float(v)) for v in row] for row in b]
    return [[sum(fa[i][p] * fb[p][j] for p in range(k)) for j in range(n)] for i in range(rows)]


SUITE = """seed: 19
workloads:
  - {name: plain, m: 5, n: 6, k: 9, a: {dist: normal}, b: {dist: normal}}
  - {name: shared-b, m: 3, n: 4, k: 7, batch: 2, a: {dist: uniform, lo: -3, hi: 5}, b: {dist: normal}}
  - {name: batched-b, m: 2, n: 3, k: 11, batch: 2, b_batched: true, a: {dist: normal}, b: {dist: normal}}
  - {name: spread, m: 4, n: 5, k: 8, a: {dist: log_uniform, lo: 1e-6, hi: 1e3}, b: {dist: uniform, lo: -0.001, hi: 0.001}}
"""


def main():
    recipes = ["fp64", "3xtf32", "bf16x3", "bf16x6", "bf16x9"] + [f"ozaki-int8-{n}" for n in range(3, 9)]
    with scratch.TemporaryDirectory() as tmp:
        suite, data, outputs = (os.path.join(tmp, f) for f in ("s.yaml", "d.h5", "o.h5"))
        with open(suite, "w") as f:
            f.write(SUITE)
        check(run("gen", suite, "-o", data, "-q").returncode == 0, "gen")
        proc = run("run", data, "--recipes", "high-precision", "-o", os.path.join(tmp, "r"), "--save-outputs",
                   outputs, *FAST)
        check(proc.returncode in (0, 1), f"run --recipes high-precision (exit {proc.returncode})")
        with h5py.File(data, "r") as d, h5py.File(outputs, "r") as o:
            for name in d["workloads"]:
                w = d["workloads"][name]
                a = w["a"][()]
                b = w["b"][()]
                batch = a.shape[0]
                for recipe in recipes:
                    c = o["workloads"][name][recipe]["c"][()]
                    wide = recipe == "fp64" or recipe.startswith("ozaki")
                    check(c.dtype == (np.float64 if wide else np.float32), f"{name} {recipe}: saved as {c.dtype}")
                    for s in range(batch):
                        bs = b[s] if b.ndim == 3 else b
                        if recipe == "fp64":
                            exact = exact_product(a[s], bs)
                            k = a.shape[2]
                            bound = k * 2.0 ** -53 / (1 - k * 2.0 ** -53)
                            worst = max(abs(Fraction(float(c[s, i, j])) - exact[i][j]) /
                                        max(sum(abs(Fraction(float(a[s, i, p]) * float(bs[p, j]))) for p in range(k)),
                                            Fraction(1, 10 ** 300))
                                        for i in range(a.shape[1]) for j in range(bs.shape[1]))
                            check(worst <= bound, f"{name}[{s}] fp64 within gamma_k of the exact product ({float(worst):.3g})")
                            continue
                        want = (ozaki_gemm(a[s], bs, int(recipe.rsplit("-", 1)[1])) if recipe.startswith("ozaki")
                                else float_split_gemm(a[s], bs, recipe))
                        same = np.array_equal(c[s].view(np.uint64 if wide else np.uint32),
                                              want.view(np.uint64 if wide else np.uint32))
                        if not same:
                            bad = np.argwhere(c[s] != want)[0]
                            print(f"  first mismatch at {tuple(bad)}: precis {c[s][tuple(bad)]!r} oracle "
                                  f"{want[tuple(bad)]!r}")
                        check(same, f"{name}[{s}] {recipe}: bit for bit with the oracle")
        # The slices curve on these inputs: more slices, never a worse result (a sanity check of
        # the sweep, not of the oracle).
        with h5py.File(data, "r") as d, h5py.File(outputs, "r") as o:
            for name in d["workloads"]:
                a, b = d["workloads"][name]["a"][()], d["workloads"][name]["b"][()]
                for n, fast in ((8, False), (8, True), (16, False), (14, True), (20, False), (20, True)):
                    recipe = f"ozaki2-int8-{'fast-' if fast else ''}{n}"
                    c = o["workloads"][name][recipe]["c"][()]
                    want = crt_outputs(a.astype(np.float64), b.astype(np.float64), n, fast)
                    same = c.dtype == np.float64 and np.array_equal(c.view(np.uint64), want.view(np.uint64))
                    if not same:
                        bad = np.argwhere(c != want)[0]
                        print(f"  first mismatch at {tuple(bad)}: precis {c[tuple(bad)]!r} oracle {want[tuple(bad)]!r}")
                    check(same, f"{name} {recipe}: bit for bit with the exact scaled product")
        with h5py.File(data, "r") as d, h5py.File(outputs, "r") as o:
            w = d["workloads"]["spread"]
            exact = np.array([[float(v) for v in row] for row in exact_product(w["a"][0], w["b"][()])])
            errs = [float(np.max(np.abs(o["workloads"]["spread"][f"ozaki-int8-{n}"]["c"][0] - exact)))
                    for n in range(3, 9)]
            check(all(errs[i + 1] <= errs[i] for i in range(len(errs) - 1)) and errs[0] > errs[-1],
                  f"ozaki: max error falls with slices {['%.2g' % e for e in errs]}")
    print(f"{len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
