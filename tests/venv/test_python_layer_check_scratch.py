"""A layer check's float64 copies of a and b (data/generate.c, precis_reference_compute) stay for the
next check while they are small (api_layer_check.c, KEEP_REFERENCE_BYTES: 32 MiB) and the layer is
not large: a model's consecutive layers have a few shapes, and a fresh copy cost a page fault per
page in each of verify's checks (2.5 % of an int8 verify's CPU time on the 135M model, issue 40).
Larger copies, and every copy at precis.release_memory, go back. The rows do not depend on it."""
import ctypes
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "py"))
from cli_checks import FAILURES, check  # noqa: E402
from rss import resident  # noqa: E402

try:
    import numpy as np
except ImportError as e:
    print(f"SKIP: {e} (cmake/python-test-requirements.txt)", file=sys.stderr)
    sys.exit(1 if os.environ.get("CI") == "true" else 77)

BUILD = os.path.abspath(os.environ.get("PRECIS_BUILD_DIR", "build"))
sys.path.insert(0, os.environ.get("PRECIS_PY_STAGE") or os.path.join(BUILD, "python"))
from precis import _precis  # noqa: E402

MiB = 1 << 20


def cumulative_row(k, n, a, b, other):
    """The cumulative row of one check (no emulation: only the float64 reference and the metrics)."""
    handle = _precis.layer_check_open("int8", "layer", k, n, False, False)
    _precis.layer_check_add(handle, a, a.shape[0], a.shape[1], k, n, b, other)
    return handle


def held_by(k, n, samples=2, m=64):
    rng = np.random.default_rng(k + n)
    a = rng.standard_normal((samples, m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    other = (a @ b).astype(np.float32)
    _precis.release_memory()
    start = resident()
    handle = cumulative_row(k, n, a, b, other)
    held = resident() - start
    _precis.release_memory()
    released = resident() - start
    _, row = _precis.layer_check_rows(handle)
    return held, released, row, (a, b, other)


def main():
    if not os.path.exists("/proc/self/status"):
        print("SKIP: needs /proc/self/status (Linux)", file=sys.stderr)
        return 77
    # Every block over 1 MiB mapped on its own and unmapped when freed (glibc's M_MMAP_THRESHOLD, -3;
    # its default threshold moves with the blocks freed), as verify's blocks often are: what stays
    # resident after a check is then what libprecis keeps, not what the allocator kept.
    if ctypes.CDLL(None).mallopt(-3, 1 << 20) != 1:
        print("SKIP: mallopt(M_MMAP_THRESHOLD) refused (not glibc)", file=sys.stderr)
        return 77
    # 8 * (256*1024 + 1024*3000) bytes = 26.7 MB of float64 copies: kept, until release_memory.
    held, released, row, (a, b, other) = held_by(1024, 3000)
    print(f"small layer (1024 x 3000): {held / MiB:.1f} MiB held after its check, {released / MiB:.1f} MiB after "
          "release_memory")
    check(held - released > 20 * MiB, f"a small layer's float64 copies stay for the next check ({held / MiB:.1f} MiB "
                                      f"held, {released / MiB:.1f} MiB after release_memory)")
    check(released < 8 * MiB, f"release_memory frees them ({released / MiB:.1f} MiB still held)")
    # The same check with the copies kept from the one before: the same row.
    first = cumulative_row(1024, 3000, a, b, other)
    again = cumulative_row(1024, 3000, a, b, other)
    _precis.release_memory()
    check(_precis.layer_check_rows(first)[1] == _precis.layer_check_rows(again)[1] == row,
          "the row is the same with the copies reused")
    # 8 * (256*2048 + 2048*4096) bytes = 71 MB: over 32 MiB, freed after the check.
    held, released, _, _ = held_by(2048, 4096, samples=1)
    print(f"larger layer (2048 x 4096): {held / MiB:.1f} MiB held after its check")
    check(held < 16 * MiB, f"copies over 32 MiB go back after each check ({held / MiB:.1f} MiB held)")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
