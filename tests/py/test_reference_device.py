"""`precis gen --reference-device cpu|cuda` (docs/scale-out.md), what each build and machine must do.

- `--reference-device cpu` is the default: the same file as without the option.
- A suite with a double-double reference and `--reference-device cuda`: exit 2 naming the workload
  and saying that double-double is CPU only, before any device is looked for; no file.
- float64 inputs (`--inputs float64`) with `--reference-device cuda`: exit 2, CPU only; no file.
- An unknown device: exit 2.
- `--reference-device cuda` on a build without CUDA: exit 2 saying so; on a machine without a
  device: exit 2 saying there is no CUDA device; no file either way. With a device: exit 0, each
  workload's `reference` names cublasDgemm, the device and cuBLAS, and c_ref and ab_abs are within
  2·reference_error_bound·ab_abs of a CPU gen's (tests/gpu/test_reference_dgemm.c checks more).
Needs Debian's python3-h5py and python3-numpy (skipped, 77, without them).
"""
import os
import subprocess
import sys
import scratch  # tests/py/scratch.py: scratch under the build tree, removed on a signal

try:
    import h5py
    import numpy as np
except ImportError as exc:  # pragma: no cover
    print("skipped: %s" % exc)
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cuda_expect import cuda_built, device_present  # noqa: E402

PRECIS = os.environ["PRECIS"]
FAILURES = []
SUITE = """seed: 4
workloads:
  - {name: sq, m: 300, n: 40, k: 200, batch: 2, a: cancellation, b: normal}
  - {name: bb, m: 30, n: 20, k: 64, batch: 2, b_batched: true}
"""
DD_SUITE = SUITE + "  - {name: hp, m: 8, n: 8, k: 16, reference: double-double}\n"


def check(condition, what):
    if not condition:
        FAILURES.append(what)
        print("FAIL: " + what)
    return condition


def gen(*args):
    return subprocess.run([PRECIS, "gen"] + list(args) + ["-q"], capture_output=True, text=True)


def main():
    with scratch.TemporaryDirectory(prefix="precis-refdev-") as work:
        suite, dd_suite = os.path.join(work, "s.yaml"), os.path.join(work, "dd.yaml")
        with open(suite, "w") as fh:
            fh.write(SUITE)
        with open(dd_suite, "w") as fh:
            fh.write(DD_SUITE)
        cpu, explicit = os.path.join(work, "cpu.h5"), os.path.join(work, "explicit.h5")
        check(gen(suite, "-o", cpu).returncode == 0, "gen on the cpu")
        p = gen(suite, "-o", explicit, "--reference-device", "cpu")
        check(p.returncode == 0, "--reference-device cpu: exit %d: %s" % (p.returncode, p.stderr))
        with h5py.File(cpu, "r") as x, h5py.File(explicit, "r") as y:
            for w in x["workloads"]:
                for key in ("c_ref", "ab_abs"):
                    check(x["workloads"][w][key][()].tobytes() == y["workloads"][w][key][()].tobytes(),
                          "--reference-device cpu: %s/%s differs from the default" % (w, key))
                check(x["workloads"][w].attrs["reference"] == y["workloads"][w].attrs["reference"],
                      "--reference-device cpu: reference attribute differs")

        out = os.path.join(work, "dd.h5")
        p = gen(dd_suite, "-o", out, "--reference-device", "cuda")
        check(p.returncode == 2 and "workload hp" in p.stderr and "double-double is computed on the CPU only" in p.stderr
              and "dd.yaml:5" in p.stderr, "double-double with cuda: exit %d: %s" % (p.returncode, p.stderr))
        check(not os.path.exists(out), "double-double with cuda: %s written" % out)

        p = gen(suite, "-o", out, "--reference-device", "cuda", "--inputs", "float64")
        check(p.returncode == 2 and "float64 references are computed on the CPU only" in p.stderr,
              "float64 inputs with cuda: exit %d: %s" % (p.returncode, p.stderr))
        check(not os.path.exists(out), "float64 inputs with cuda: %s written" % out)

        p = gen(suite, "-o", out, "--reference-device", "tpu")
        check(p.returncode == 2 and "expected cpu or cuda" in p.stderr, "unknown device: exit %d: %s" % (
            p.returncode, p.stderr))

        gpu = os.path.join(work, "gpu.h5")
        p = gen(suite, "-o", gpu, "--reference-device", "cuda")
        if not cuda_built(PRECIS):
            check(p.returncode == 2 and "built without the CUDA backend" in p.stderr,
                  "cuda, no CUDA build: exit %d: %s" % (p.returncode, p.stderr))
            check(not os.path.exists(gpu), "cuda, no CUDA build: %s written" % gpu)
        elif not device_present():
            check(p.returncode == 2 and "--reference-device cuda: no CUDA device" in p.stderr,
                  "cuda, no device: exit %d: %s" % (p.returncode, p.stderr))
            check(not os.path.exists(gpu), "cuda, no device: %s written" % gpu)
        elif check(p.returncode == 0, "cuda with a device: exit %d: %s" % (p.returncode, p.stderr)):
            with h5py.File(cpu, "r") as x, h5py.File(gpu, "r") as y:
                check(x.attrs["dataset_id"] == y.attrs["dataset_id"], "cuda: the inputs differ")
                for w in x["workloads"]:
                    g = y["workloads"][w]
                    text = g.attrs["reference"]
                    text = text.decode() if isinstance(text, bytes) else str(text)
                    check("cublasDgemm" in text and "cuBLAS" in text, "cuda: reference attribute %r" % text)
                    bound = 2 * g.attrs["reference_error_bound"] * x["workloads"][w]["ab_abs"][()]
                    for key in ("c_ref", "ab_abs"):
                        diff = np.abs(g[key][()] - x["workloads"][w][key][()])
                        check(np.all(diff <= bound), "cuda: %s/%s outside 2*bound of the cpu's" % (w, key))

    if FAILURES:
        print("%d failure(s)" % len(FAILURES))
        return 1
    print("--reference-device: cpu is the default; cuda refused for double-double, without CUDA or a device")
    return 0


if __name__ == "__main__":
    sys.exit(main())
