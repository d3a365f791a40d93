"""precis.release_memory (precis_release_memory, include/precis/status.h; issue 40): the memory
libprecis keeps between calls goes back to the system. The cpu backend keeps large freed blocks for
the next call of the same shapes (eval/host_memory.c, up to 1 GiB); an emulated GEMM as wide as a
135M model's tied head (576 x 49152, int8: its integer-valued float copy of B, the int32 accumulators)
left ~200 MB resident after it returned, through every later layer of a verify, which counts
against its peak: such an emulation (B of 64 MiB or more) now gives its blocks back itself, before
its output is copied out. Smaller ones keep theirs for the next call; after release_memory the
process's resident set is back near where it was before the call; the values of a later call are
unchanged. A head's layer check (include/precis/layer_check.h)
gives its emulation's blocks back by itself, before its float64 reference."""
import gc
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
import precis  # noqa: E402
from precis import _precis  # noqa: E402

MiB = 1 << 20


def main():
    if not os.path.exists("/proc/self/status"):
        print("SKIP: needs /proc/self/status (Linux)", file=sys.stderr)
        return 77
    rng = np.random.default_rng(0)
    b = rng.standard_normal((576, 49152)).astype(np.float32)
    a = rng.standard_normal((5, 64, 576)).astype(np.float32)
    # A head-sized emulation gives its blocks back itself, before its output is copied out (with the
    # caller's B and two copies of the output, they were a verify's peak).
    _precis.release_memory()
    before = resident()
    head = precis.emulate(a, b, "int8")
    with_head = resident() - before
    del head
    gc.collect()
    after_head = resident() - before
    print(f"head-sized emulate: {with_head / MiB:.0f} MiB over the start with its output, {after_head / MiB:.0f} "
          "MiB after it was freed")
    check(after_head < 40 * MiB, f"a head-sized emulation keeps no blocks: {after_head / MiB:.0f} MiB held")
    # Below that size the cpu backend keeps its freed blocks for the next call of the same shapes
    # (a decoder's layers repeat theirs), until release_memory.
    b = np.ascontiguousarray(b[:, :20480])  # 45 MiB as float32: under eval/host_memory.h's 64 MiB
    _precis.release_memory()
    before = resident()
    first = precis.emulate(a, b, "int8")
    kept = resident() - before  # the output (26 MB) and what libprecis kept
    del first
    gc.collect()
    held = resident() - before
    _precis.release_memory()
    after = resident() - before
    print(f"resident over the start: {kept / MiB:.0f} MiB with the output, {held / MiB:.0f} MiB after it was freed, "
          f"{after / MiB:.0f} MiB after release_memory")
    check(held > 40 * MiB, f"the cpu backend keeps its large blocks between calls ({held / MiB:.0f} MiB held)")
    check(after < 20 * MiB, f"release_memory returns them: {after / MiB:.0f} MiB still over the start")
    b = rng.standard_normal((576, 49152)).astype(np.float32)
    # A head's layer check gives its emulation's blocks back itself: they would sit beside its c_ref
    # and ab_abs (verify's peak), and no later layer has its shape.
    _precis.release_memory()
    start = resident()
    check_handle = _precis.layer_check_open("int8", "lm_head", 576, 49152, True, True)
    _precis.layer_check_add(check_handle, a, 5, 64, 576, 49152, b, None)
    after_check = resident() - start
    print(f"resident over the start after a head's layer check: {after_check / MiB:.0f} MiB")
    check(after_check < 60 * MiB, f"the head's check keeps no blocks: {after_check / MiB:.0f} MiB held")
    iso, _ = _precis.layer_check_rows(check_handle)
    check(iso is not None and '"rel_fro"' in iso, "the check still gives its row")
    again = precis.emulate(a, b, "int8")
    _precis.release_memory()
    check(np.array_equal(again, precis.emulate(a, b, "int8")), "the values do not depend on what was kept")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
