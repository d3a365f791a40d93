"""OCP MX FP6 element formats (issue 33: e2m3, e3m2) against ml_dtypes, bit for bit.

* fp32 bit patterns in chunks of 2^26 — by default the chunks whose first |x| lies in [2^-8, 2^6),
  where the formats make their rounding decisions, and the chunks at multiples of 97 * 2^20 (about
  20 s; every 2^32 pattern is checked against the generic rounding reference by exhaustive_fp6.c);
  all 2^32 with PRECIS_FP6_EXHAUSTIVE=1 (about an hour on the 2-core machine) — encoded by precis (quantize_driver range) and by
  ml_dtypes.float6_e2m3fn / float6_e3m2fn: the same 6-bit code, except for NaN, where precis gives
  +max (0x1f, CUDA's satfinite rule; the formats have no NaN) and ml_dtypes does not;
* the 64 codes of each decode to ml_dtypes' values;
* mxfp6 quantization (mx blocks of 32, E8M0 floor rule with emax_elem 2 / 4) through the quantizer
  against a NumPy + ml_dtypes recomputation (scales, scale codes, element codes, dequantized values).
Writes one chunk at a time (2^26 codes) to a temporary file."""
import os
import subprocess
import sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "py"))
import scratch  # noqa: E402  (tests/py/scratch.py: scratch under the build tree, removed on a signal)

import numpy as np

try:
    import ml_dtypes as md
except ImportError as exc:  # pragma: no cover
    print(f"SKIP: {exc} (cmake/python-test-requirements.txt)", file=sys.stderr)
    sys.exit(77)

BUILD = os.environ.get("PRECIS_BUILD_DIR", "build")
DRIVER = os.environ.get("PRECIS_QUANT_DRIVER") or os.path.join(BUILD, "tests", "quantize_driver")
SAMPLE = os.environ.get("PRECIS_FP6_EXHAUSTIVE") != "1"
F32 = np.float32
FORMATS = {"e2m3": (md.float6_e2m3fn, 7.5, 2), "e3m2": (md.float6_e3m2fn, 28.0, 4)}
CHUNK = 1 << 26
failures = []


def check(cond, what):
    print(f"{'ok  ' if cond else 'FAIL'} {what}")
    if not cond:
        failures.append(what)


def precis_codes(tmp, fmt, first, count):
    out = os.path.join(tmp, "codes.u8")
    r = subprocess.run([DRIVER, "range", fmt, str(first), str(count), out], capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"quantize_driver range {fmt}: {r.stderr}")
    return np.fromfile(out, np.uint8)


def ml_codes(fmt, bits):
    dtype, _, _ = FORMATS[fmt]
    x = bits.view(F32)
    with np.errstate(all="ignore"):
        return x.astype(dtype).view(np.uint8) & 0x3f


def check_encoding(tmp, fmt):
    starts = range(0, 1 << 32, CHUNK)
    checked = mismatches = 0
    for first in starts:
        count = CHUNK
        if SAMPLE:
            # chunks starting with |x| in [2^-8, 2^6) (both signs), where the decisions are made
            mag = first & 0x7fffffff
            if not (0x3b800000 <= mag < 0x42800000) and (first >> 20) % 97:
                continue
        bits = np.arange(first, first + count, dtype=np.uint64).astype(np.uint32)
        got = precis_codes(tmp, fmt, first, count)
        want = ml_codes(fmt, bits)
        nan = np.isnan(bits.view(F32))
        want = np.where(nan, np.uint8(0x1f), want)
        bad = np.flatnonzero(got != want)
        checked += count
        mismatches += bad.size
        if bad.size and mismatches == bad.size:
            i = bad[0]
            print(f"  first mismatch: fp32 0x{int(bits[i]):08x} ({bits.view(F32)[i]!r}): precis 0x{got[i]:02x}, "
                  f"ml_dtypes 0x{want[i]:02x}")
    check(mismatches == 0, f"{fmt}: {checked} fp32 patterns encoded as ml_dtypes does ({mismatches} differ)")


def check_decoding(fmt):
    dtype, _, _ = FORMATS[fmt]
    codes = np.arange(64, dtype=np.uint8)
    want = codes.view(dtype).astype(F32)
    # precis's decoding through its encoding of the exact values: every value must encode to its own
    # code (a signed zero included) and round_f32 must leave it unchanged.
    with scratch.TemporaryDirectory() as tmp:
        bits = want.view(np.uint32).astype(np.uint64)
        ok = True
        for c in range(64):
            got = precis_codes(tmp, fmt, int(bits[c]), 1)[0]
            ok = ok and got == c
        check(ok, f"{fmt}: all 64 ml_dtypes values encode to their own code")


def check_mx(tmp, fmt, rng):
    dtype, max_elem, emax = FORMATS[fmt]
    rows, cols = 8, 200
    x = (rng.standard_normal((rows, cols)) * np.exp(rng.uniform(-8, 8, (rows, 1)))).astype(F32)
    x[2] = 0
    path, prefix = os.path.join(tmp, "in.f32"), os.path.join(tmp, "out")
    x.tofile(path)
    r = subprocess.run([DRIVER, "quantize", fmt, "mx", "sym", "a", str(rows), str(cols), path, prefix],
                       capture_output=True, text=True)
    check(r.returncode == 0, f"{fmt}@mx quantize: {r.stderr.strip()}")
    if r.returncode:
        return
    codes = np.fromfile(prefix + ".codes", np.uint8).reshape(rows, cols)
    scode = np.fromfile(prefix + ".scale_codes", np.uint8).reshape(rows, -1)
    deq = np.fromfile(prefix + ".deq", F32).reshape(rows, cols)
    bad = 0
    for i in range(rows):
        for g in range(scode.shape[1]):
            blk = x[i, g * 32:(g + 1) * 32]
            amax = float(np.max(np.abs(blk)))
            # OCP MX v1.0 §6.3: X = 2^(floor(log2(amax)) - emax_elem); amax = 0 gives 2^0
            e = (np.frexp(amax)[1] - 1 - emax) if amax > 0 else 0
            want_code = e + 127
            scale = np.ldexp(1.0, e)
            q = np.clip(blk.astype(np.float64) / scale, -max_elem, max_elem).astype(F32).astype(dtype)
            want_codes = q.view(np.uint8) & 0x3f
            want_deq = (q.astype(F32) * F32(scale)).astype(F32)
            if scode[i, g] != want_code or not np.array_equal(codes[i, g * 32:(g + 1) * 32], want_codes) or \
                    not np.array_equal(deq[i, g * 32:(g + 1) * 32].view(np.uint32), want_deq.view(np.uint32)):
                bad += 1
    check(bad == 0, f"{fmt}@mx: E8M0 floor scales, element codes and dequantized values as NumPy + ml_dtypes "
          f"({bad} blocks differ)")


def main():
    rng = np.random.default_rng(6)
    with scratch.TemporaryDirectory() as tmp:
        for fmt in FORMATS:
            check_decoding(fmt)
            check_mx(tmp, fmt, rng)
            check_encoding(tmp, fmt)
    print(f"{'sample' if SAMPLE else 'exhaustive'}: {len(failures)} failed checks")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
