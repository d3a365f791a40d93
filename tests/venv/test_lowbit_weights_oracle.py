"""W2A16 / W3A16 / W4A16 weights (issue 39): precis's s2, s3 and s4 quantizers with the full code range
(sym-half) against compressed-tensors' own fake_quantize of its W2A16 / W3A16 / W4A16 schemes: equal codes and values.

The weight W [n, k] is precis's operand B = W^T, grouped along k. compressed-tensors computes each
group's scale with calculate_qparams (amax / ((2^b - 1) / 2), in float32) and fake_quantize rounds
x / scale half to even into -2^(b-1) .. 2^(b-1) - 1; precis's quantize_driver writes its codes,
scales and dequantized values. Widths 512 (groups of 128) and 576 (groups of 64: 576 = 4.5 x 128).
"""
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "py"))
import scratch  # noqa: E402  (tests/py/scratch.py: scratch under the build tree, removed on a signal)

try:
    import torch
    from compressed_tensors.quantization import QuantizationArgs, preset_name_to_scheme
    from compressed_tensors.quantization.lifecycle.forward import fake_quantize
    from compressed_tensors.quantization.utils import calculate_qparams
except ImportError as e:
    print(f"SKIP: {e}", file=sys.stderr)
    raise SystemExit(1 if os.environ.get("CI") == "true" else 77)

DRIVER = os.environ.get("PRECIS_QUANT_DRIVER", "")
FAILURES = []


def check(cond, what):
    print(f"{'ok  ' if cond else 'FAIL'} {what}")
    if not cond:
        FAILURES.append(what)


def precis_quantize(tmp, w, elem, group):
    b = np.ascontiguousarray(w.T, np.float32)  # B = W^T: k rows, n columns
    k, n = b.shape
    path, prefix = os.path.join(tmp, "in.f32"), os.path.join(tmp, "out")
    b.tofile(path)
    r = subprocess.run([DRIVER, "quantize", elem, f"k{group}", "half", "b", str(k), str(n), path, prefix],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"quantize_driver {elem}: {r.stderr}")
    deq = np.fromfile(prefix + ".deq", np.float32).reshape(k, n).T
    codes = np.fromfile(prefix + ".codes", np.int8).reshape(k, n).T
    return deq, codes


def ct_quantize(w, bits, group):
    preset = {2: "W2A16", 3: "W3A16", 4: "W4A16"}[bits]
    args = preset_name_to_scheme(preset, ["Linear"]).weights
    check(args.num_bits == bits and args.group_size == 128 and args.symmetric, f"{preset}: {args}")
    args = QuantizationArgs(**{**args.model_dump(), "group_size": group})
    x = torch.from_numpy(w)
    g = x.unflatten(-1, (-1, group))
    lo, hi = g.amin(-1), g.amax(-1)
    scale, zp = calculate_qparams(torch.minimum(lo, torch.zeros_like(lo)), torch.maximum(hi, torch.zeros_like(hi)), args)
    deq = fake_quantize(x, scale, zp, args).numpy()
    codes = torch.round(x.unflatten(-1, (-1, group)) / scale.unsqueeze(-1)).clamp(-2 ** (bits - 1), 2 ** (bits - 1) - 1)
    return deq, codes.flatten(-2).numpy().astype(np.int8)


def main():
    if not os.access(DRIVER, os.X_OK):
        raise SystemExit(f"PRECIS_QUANT_DRIVER={DRIVER!r} is not an executable (run through ctest)")
    rng = np.random.default_rng(39)
    with scratch.TemporaryDirectory() as tmp:
        for k, group in ((512, 128), (576, 64)):
            w = rng.standard_normal((96, k)).astype(np.float32)
            w[:, 5] *= 20  # an outlier input channel: groups with very different ranges
            w[3, :] *= 1e-3
            for elem, bits in (("s2", 2), ("s3", 3), ("s4", 4)):
                got, got_codes = precis_quantize(tmp, w, elem, group)
                want, want_codes = ct_quantize(w, bits, group)
                # Equal values (a zero's sign aside: torch keeps -0 for a negative x rounded to code 0).
                same = np.array_equal(got, want)
                check(same, f"{elem} k={k} group {group}: dequantized weights equal ({int(np.sum(got != want))} differ)")
                check(np.array_equal(got_codes, want_codes), f"{elem} k={k}: codes equal")
                lo, hi = int(got_codes.min()), int(got_codes.max())
                check(lo == -2 ** (bits - 1) and hi == 2 ** (bits - 1) - 1, f"{elem}: full code range used {lo}..{hi}")
    if FAILURES:
        raise SystemExit(f"{len(FAILURES)} failures")


if __name__ == "__main__":
    main()
