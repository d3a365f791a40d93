"""The Python package (python/, DESIGN §15) against the CLI, run with the venv's interpreter and the
package staged in the build tree (BUILD_DIR/python, built when PRECIS_PYTHON_MODULE is on).

- every preset of `precis recipes` through precis.emulate equals `precis run --backend cpu
  --save-outputs` bit for bit, on a batched, odd-shaped dataset (a shared b and a batched b, with a
  calibration split for the static-scale recipes); a preset the cpu backend does not run is a row
  `unsupported` and an UnsupportedError;
- precis.quantize equals the C quantizer's driver (tests/quantize_driver.c) bit for bit;
- bad arguments (dtype, shape, non-contiguous, read-only output, empty, NaN, bad spec) raise
  precis's exceptions and never crash;
- read_report's rows are report.json's; a damaged report is refused naming the field;
- precis.run and `python -m precis` give the CLI's exit codes.
"""
import json
import os
import pathlib
import subprocess
import sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "py"))
import scratch  # noqa: E402  (tests/py/scratch.py: scratch under the build tree, removed on a signal)

import numpy as np
import pytest

BUILD = pathlib.Path(os.environ.get("PRECIS_BUILD_DIR", "build")).resolve()
PRECIS = os.environ.get("PRECIS", str(BUILD / "precis"))
# PRECIS_PY_STAGE: a folder holding an installed package (tests/wheel_check.sh: the wheel pip built).
STAGE = pathlib.Path(os.environ.get("PRECIS_PY_STAGE") or BUILD / "python")
sys.path.insert(0, str(STAGE))
import h5py  # noqa: E402
import ml_dtypes  # noqa: E402
import precis  # noqa: E402

SUITE = """seed: 29
workloads:
  - name: odd_shared
    m: 33
    n: 17
    k: 65
    batch: 3
    calib: 2
    a: outlier_channels
  - name: odd_batched_b
    m: 7
    n: 19
    k: 96
    batch: 2
    b_batched: true
    calib: 2
"""


def bits(x):
    x = np.ascontiguousarray(x)
    return x.view(np.uint32 if x.dtype == np.float32 else np.uint64)


@pytest.fixture(scope="module")
def work():
    tmp = pathlib.Path(scratch.mkdtemp(prefix="precis-python-"))
    (tmp / "suite.yaml").write_text(SUITE)
    data = tmp / "odd.h5"
    subprocess.run([PRECIS, "gen", str(tmp / "suite.yaml"), "-o", str(data)], check=True, capture_output=True)
    names = [r["name"] for r in precis.recipes()]
    saved = tmp / "outputs.h5"
    out = tmp / "report"
    r = subprocess.run([PRECIS, "run", str(data), "--backend", "cpu", "--recipes", ",".join(names), "--quiet",
                        "--save-outputs", str(saved), "-o", str(out), "--min-samples", "1", "--max-samples", "2",
                        "--max-time-ms", "1"], capture_output=True, text=True)
    # 1: a row that is unsupported on the cpu backend counts as not run (fp64-emu is cuda only).
    assert r.returncode in (0, 1), r.stderr
    return {"tmp": tmp, "data": data, "saved": saved, "report": out / "report.json", "names": names}


def test_recipes_match_the_cli_table(work):
    out = subprocess.run([PRECIS, "recipes", "--json"], check=True, capture_output=True, text=True).stdout
    cli = json.loads(out)
    cli_rows = cli["recipes"] if isinstance(cli, dict) else cli
    assert [r["name"] for r in cli_rows] == work["names"]
    for r, c in zip(precis.recipes(), cli_rows):
        assert r["spec"] == c["spec"], r["name"]


def test_every_preset_bit_for_bit(work):
    ds = precis.dataset(work["data"])
    rows = {(r["workload"], r["recipe"]): r for r in json.loads(work["report"].read_text())["rows"]}
    compared = 0
    with h5py.File(work["saved"], "r") as saved:
        for w in ds.workloads:
            arrays = ds.arrays(w["name"])
            for name in work["names"]:
                row = rows[(w["name"], name)]
                if row["status"] != "ok":
                    assert row["status"] == "unsupported", row
                    with pytest.raises(precis.UnsupportedError):
                        precis.emulate(arrays["a"], arrays["b"], name, calib=arrays.get("calib/a"))
                    continue
                c = precis.emulate(arrays["a"], arrays["b"], name, calib=arrays.get("calib/a"))
                ref = saved[f"workloads/{w['name']}/{name}/c"][...]
                assert c.dtype == ref.dtype and c.shape == ref.shape, (name, c.dtype, ref.dtype, c.shape, ref.shape)
                mismatch = np.flatnonzero(bits(c) != bits(ref))
                assert mismatch.size == 0, f"{w['name']} {name}: {mismatch.size} elements differ, first {mismatch[:5]}"
                # B handed over as Bᵀ (nn.Linear's W): the same bits.
                w_nk = np.ascontiguousarray(np.swapaxes(arrays["b"], -1, -2))
                c_t = precis.emulate(arrays["a"], w_nk, name, calib=arrays.get("calib/a"), b_transposed=True)
                mismatch = np.flatnonzero(bits(c_t) != bits(ref))
                assert mismatch.size == 0, f"{w['name']} {name} b_transposed: {mismatch.size} elements differ"
                compared += 1
    # Every preset but the cuda-only ones ran, on both workloads.
    cpu = [r["name"] for r in precis.recipes() if r["cpu"]]
    assert compared >= 2 * len(cpu) - 2, compared


def test_two_dimensional_a_is_one_sample(work):
    arrays = precis.dataset(work["data"]).arrays("odd_shared")
    a, b = arrays["a"], arrays["b"]
    c3 = precis.emulate(a, b, "bf16")
    c2 = precis.emulate(a[1], b, "bf16")
    assert c2.shape == (33, 17)
    assert np.array_equal(bits(c2), bits(c3[1]))


def test_emulating_loads_no_cublas():
    """Importing precis and emulating on the cpu backend leave cuBLAS and cuBLASLt out of the process
    (kernels/cublas_lazy.c loads them on their first call: 150 MiB of resident memory that a verify's
    peak counted); a fresh interpreter, so that nothing else has loaded them."""
    code = ("import numpy as np, precis\n"
            "a = np.ones((4, 8), np.float32); b = np.ones((8, 3), np.float32)\n"
            "for r in ('bf16', 'int8', 'fp8'): precis.emulate(a, b, r)\n"
            "print(sorted({l.split()[-1] for l in open('/proc/self/maps') if 'libcublas' in l}))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=str(STAGE)), check=True).stdout
    assert out.strip() == "[]", out


def test_transposed_weights_with_special_values():
    """W [n, k] with rows of zeros, infinities, NaN and huge values: its rows quantized in place give the
    codes and clipping of B's columns (int8), and every other path its transposed copy."""
    rng = np.random.default_rng(5)
    a = rng.standard_normal((3, 9, 70)).astype(np.float32)
    w = rng.standard_normal((23, 70)).astype(np.float32)
    w[2] = 0
    w[5, 3] = np.inf
    w[6, 0] = -np.inf
    w[7, 11] = np.nan
    w[8, 4] = 3e38
    w[9] *= 1e-40
    for recipe in ("int8", "bf16", "fp8", "fp32", "fp16"):
        for a_in in (a, a[0]):
            want = precis.emulate(a_in, np.ascontiguousarray(w.T), recipe)
            got = precis.emulate(a_in, w, recipe, b_transposed=True)
            assert np.array_equal(bits(got), bits(want)), recipe
    with pytest.raises(ValueError, match="transposed"):
        precis.emulate(a, w[:, :69].copy(), "int8", b_transposed=True)


def test_head_sized_weights_in_column_blocks():
    """A W [n, k] of 64 MiB or more (a head) is emulated a block of its rows at a time where each output
    column is its own (int8, the accumulator models): the bits and the clipped fraction of the whole, on
    odd n, with rows of W that saturate; the other recipes as before."""
    from precis import _precis

    rng = np.random.default_rng(7)
    # A real head's shape (SmolLM-135M's tied lm_head: hidden 576, vocabulary 49152): 113 MB of float32,
    # over the 64 MiB threshold; 7232 columns a block, so the last block is a partial one.
    k, n = 576, 49152
    a = rng.standard_normal((2, 5, k)).astype(np.float32)
    a[1, 2, 7] = 40.0  # a token's outlier
    a[0, 1, 5] = -np.inf  # saturates in int8: A's clipped inputs count once, not once per block
    w = rng.standard_normal((n, k)).astype(np.float32)
    w[n - 1, 3] = np.inf
    w[n // 2, 0] = np.nan
    b = np.ascontiguousarray(w.T)
    for recipe, target in (("int8", None), ("bf16", None), ("fp16", "sm_80"), ("fp16acc16", None), ("fp8", None)):
        got, want = np.empty((2, 5, n), np.float32), np.empty((2, 5, n), np.float32)
        info_t = _precis.emulate(recipe, a, w, got, 2, 5, n, k, False, None, 0, target, True)
        info = _precis.emulate(recipe, a, b, want, 2, 5, n, k, False, None, 0, target, False)
        mismatch = np.flatnonzero(bits(got) != bits(want))
        assert mismatch.size == 0, f"{recipe}: {mismatch.size} elements differ, first {mismatch[:5]}"
        same = {key: info_t[key] == info[key] or (info_t[key] != info_t[key] and info[key] != info[key]) for key in info}
        assert all(same.values()) and info_t.keys() == info.keys(), (recipe, info_t, info)
        if recipe == "int8":
            assert info["clipped_fraction"] > 0, info  # the inf (and the outlier's row) saturate
    # A float64 output is not written in place: the blocks' float32 output, widened.
    wide = precis.emulate(a[0], w, "int8", b_transposed=True, out_dtype=np.float64)
    assert wide.dtype == np.float64 and np.array_equal(wide, precis.emulate(a[0], b, "int8").astype(np.float64))


def test_layer_check_takes_the_weights_as_held():
    """precis_layer_check_add_weights (W [n, k]) gives precis_layer_check_add's rows (b = Wᵀ) exactly."""
    from precis import _precis

    rng = np.random.default_rng(6)
    a = rng.standard_normal((4, 5, 96)).astype(np.float32)
    w = rng.standard_normal((300, 96)).astype(np.float32)
    other = rng.standard_normal((4, 5, 300)).astype(np.float32)
    for recipe, logits in (("int8", False), ("bf16", False), ("int8", True)):
        rows = []
        for b, nk in ((np.ascontiguousarray(w.T), False), (w, True)):
            check = _precis.layer_check_open(recipe, "proj", 96, 300, logits, True)
            for s in (slice(0, 3), slice(3, 4)):
                _precis.layer_check_add(check, np.ascontiguousarray(a[s]), a[s].shape[0], 5, 96, 300, b,
                                        np.ascontiguousarray(other[s]), False, None, nk)
            rows.append(_precis.layer_check_rows(check))
        assert rows[0] == rows[1], recipe
        assert rows[0][0] and rows[0][1]


QUANT_CASES = [
    ("a=e4m3@row", "e4m3", "row", "sym", "a"),
    ("b=e4m3@col", "e4m3", "col", "sym", "b"),
    ("a=s8@tensor", "s8", "tensor", "sym", "a"),
    ("b=s8@col:sym-half", "s8", "col", "half", "b"),
    ("b=s4@k32", "s4", "k32", "sym", "b"),
    ("b=u4@k16:asym", "u4", "k16", "asym", "b"),
    ("a=e2m1@mx", "e2m1", "mx", "sym", "a"),
    ("b=e5m2@mx-rceil", "e5m2", "mx-rceil", "sym", "b"),
    ("b=e2m1@nv", "e2m1", "nv", "sym", "b"),
    ("b=e4m3@16x16", "e4m3", "16x16", "sym", "b"),
]


@pytest.mark.parametrize("operand,elem,gran,ints,side", QUANT_CASES)
def test_quantize_equals_the_c_quantizer(tmp_path, operand, elem, gran, ints, side):
    driver = os.environ["PRECIS_QUANT_DRIVER"]
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((48, 40)) * np.exp(rng.uniform(-3, 3, (48, 1)))).astype(np.float32)
    x[3, 5] = 1e9  # saturates most formats
    (tmp_path / "x.f32").write_bytes(x.tobytes())
    prefix = tmp_path / "q"
    subprocess.run([driver, "quantize", elem, gran, ints, side, "48", "40", str(tmp_path / "x.f32"), str(prefix)],
                   check=True, capture_output=True)
    q = precis.quantize(x, operand)
    assert q.side == side and q.scaled
    codes = np.fromfile(f"{prefix}.codes", dtype=np.uint8)
    assert np.array_equal(q.codes.view(np.uint8).ravel(), codes)
    assert np.array_equal(bits(q.scales.ravel()), bits(np.fromfile(f"{prefix}.scales", dtype=np.float32)))
    assert np.array_equal(bits(q.values.ravel()), bits(np.fromfile(f"{prefix}.deq", dtype=np.float32)))
    meta = pathlib.Path(f"{prefix}.meta").read_text().split()
    assert q.scales.shape[1:] == (int(meta[0]), int(meta[1]))
    assert q.clipped == int(meta[2])
    if q.zero_points is not None:
        assert np.array_equal(q.zero_points.ravel(), np.fromfile(f"{prefix}.zeros", dtype=np.uint8))
    codes_out, scales, values = q
    assert codes_out is q.codes and values is q.values


def test_quantize_unscaled_is_the_rounding():
    x = np.array([[1.0 + 2 ** -9, -3.14159265]], dtype=np.float32)
    q = precis.quantize(x, "b=bf16")
    assert not q.scaled and q.codes is None and q.scales is None
    assert q.values.tolist() == [[1.0, -3.140625]]


def test_quantize_batched_a_is_one_matrix_of_rows():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 5, 64)).astype(np.float32)
    q3 = precis.quantize(x, "a=e4m3@tensor")
    q2 = precis.quantize(x.reshape(10, 64), "a=e4m3@tensor")
    assert np.array_equal(bits(q3.values.reshape(10, 64)), bits(q2.values))


def test_quantize_static_amax_is_the_calibrated_scale():
    """amax= (issue 42, a KV cache's calibrated scale): scale = fp32(amax / 448), codes of x / scale,
    saturating beyond amax; amax 448 is the scale 1.0 (the plain saturating cast)."""
    x = np.array([[0.3, -1.7, 5.0, 900.0, -1e-3, np.nan]], dtype=np.float32)
    q = precis.quantize(x, "a=e4m3@tensor", amax=3.0)
    scale = np.float32(3.0) / np.float32(448.0)
    assert q.scales.ravel().tolist() == [scale]
    want = np.clip(x.astype(np.float32) / scale, -448, 448).astype(ml_dtypes.float8_e4m3fn).astype(np.float32) * scale
    assert np.array_equal(q.values[:, :5], want[:, :5]) and np.isnan(q.values[0, 5])
    assert q.clipped == 3  # 5.0 and 900 beyond amax, and the NaN
    unit = precis.quantize(x, "a=e4m3@tensor", amax=448.0)
    assert unit.scales.ravel().tolist() == [1.0]
    assert np.array_equal(unit.values[:, :5], np.clip(x[:, :5], -448, 448).astype(ml_dtypes.float8_e4m3fn).astype(np.float32))
    b = np.ascontiguousarray(np.stack([x[:, :5].T, 2 * x[:, :5].T]))  # a batched B @tensor: one static scale
    qb = precis.quantize(b, "b=e4m3@tensor", amax=3.0)
    assert qb.scales.ravel().tolist() == [scale]
    want_b = np.clip(b / scale, -448, 448).astype(ml_dtypes.float8_e4m3fn).astype(np.float32) * scale
    assert np.array_equal(qb.values, want_b)
    with pytest.raises(precis.UsageError, match="per-tensor"):
        precis.quantize(x, "a=e4m3@row", amax=3.0)
    with pytest.raises(precis.UsageError, match="not a plain cast"):
        precis.quantize(x, "a=bf16", amax=3.0)
    with pytest.raises(precis.UsageError, match="amax: -1"):
        precis.quantize(x, "a=e4m3@tensor", amax=-1.0)


# ---- bad arguments: exceptions, never a crash ----------------------------------------------------

def test_bad_dtype():
    a = np.ones((4, 8), dtype=np.float32)
    with pytest.raises(TypeError, match="a: dtype int32"):
        precis.emulate(np.ones((4, 8), dtype=np.int32), a.T, "bf16")
    with pytest.raises(TypeError, match="b: dtype float16"):
        precis.emulate(a, np.ones((8, 4), dtype=np.float16), "bf16")
    with pytest.raises(TypeError, match="x: dtype float64"):
        precis.quantize(np.ones((4, 8)), "a=e4m3")
    # The C layer checks the buffer's element type itself.
    out = np.empty((4, 4), dtype=np.float32)
    with pytest.raises(TypeError, match="element type"):
        precis._precis.emulate("bf16", np.ones((4, 8), dtype=np.int32), a.T.copy(), out, 1, 4, 4, 8, False)


def test_bad_shapes():
    a = np.ones((4, 8), dtype=np.float32)
    with pytest.raises(ValueError, match="k=8 differs"):
        precis.emulate(a, np.ones((7, 3), dtype=np.float32), "bf16")
    with pytest.raises(ValueError, match="expected"):
        precis.emulate(np.ones(8, dtype=np.float32), np.ones((8, 3), dtype=np.float32), "bf16")
    with pytest.raises(ValueError, match="batch"):
        precis.emulate(np.ones((2, 4, 8), dtype=np.float32), np.ones((3, 8, 3), dtype=np.float32), "bf16")
    # The C layer checks sizes against the dimensions it is given.
    out = np.empty((4, 3), dtype=np.float32)
    with pytest.raises(ValueError, match="b: 24 elements, expected 21"):
        precis._precis.emulate("bf16", np.ones((4, 7), dtype=np.float32), np.ones((8, 3), dtype=np.float32), out, 1, 4,
                               3, 7, False)


def test_empty_arrays():
    with pytest.raises(ValueError, match="at least 1"):
        precis.emulate(np.ones((0, 8), dtype=np.float32), np.ones((8, 3), dtype=np.float32), "bf16")
    with pytest.raises(ValueError, match="at least 1"):
        precis.emulate(np.ones((4, 0), dtype=np.float32), np.ones((0, 3), dtype=np.float32), "int8")
    with pytest.raises(ValueError, match="at least 1"):
        precis.quantize(np.ones((0, 8), dtype=np.float32), "a=e4m3")


def test_non_contiguous():
    base = np.arange(64, dtype=np.float32).reshape(8, 8)
    strided = base[:, ::2]  # [8, 4], not contiguous
    b = np.ones((4, 3), dtype=np.float32)
    # The Python layer makes a contiguous copy (same values, same result) ...
    assert np.array_equal(precis.emulate(strided, b, "fp32"), precis.emulate(strided.copy(), b, "fp32"))
    # ... and the C layer refuses a non-contiguous buffer outright.
    out = np.empty((8, 3), dtype=np.float32)
    with pytest.raises(BufferError, match="a: expected a C-contiguous"):
        precis._precis.emulate("fp32", strided, b, out, 1, 8, 3, 4, False)
    with pytest.raises(BufferError, match="out: expected a C-contiguous, writable"):
        precis._precis.emulate("fp32", strided.copy(), b, np.empty((3, 8), dtype=np.float32).T, 1, 8, 3, 4, False)
    readonly = np.empty((8, 3), dtype=np.float32)
    readonly.flags.writeable = False
    with pytest.raises(BufferError, match="writable"):
        precis._precis.emulate("fp32", strided.copy(), b, readonly, 1, 8, 3, 4, False)


def test_nan_and_inf_inputs():
    a = np.ones((4, 8), dtype=np.float32)
    a[1, 2] = np.nan
    a[2, 3] = np.inf
    b = np.ones((8, 3), dtype=np.float32)
    for recipe in ("fp32", "bf16", "int8", "fp8", "nvfp4"):
        c = precis.emulate(a, b, recipe)
        assert c.shape == (4, 3)
        assert np.all(np.isfinite(c[0])) or recipe in ("fp8", "nvfp4"), recipe
    assert np.isnan(precis.emulate(a, b, "fp32")[1]).all()
    q = precis.quantize(a, "a=s8@row")
    assert q.clipped >= 2


def test_bad_recipes_name_the_field():
    with pytest.raises(ValueError, match=r"a=s8@col: A's scales cannot be per column"):
        precis.spec("a=s8@col")
    with pytest.raises(precis.UsageError, match="unknown field \"bogus\""):
        precis.spec("a=bf16,bogus=1")
    with pytest.raises(ValueError, match="out=s8"):
        precis.emulate(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), "a=bf16,out=s8")
    with pytest.raises(ValueError, match="b=e4m3@row"):
        precis.quantize(np.ones((2, 2), np.float32), "b=e4m3@row")
    try:
        precis.spec("a=bf17")
    except precis.Error as e:
        assert e.status == "bad usage" and e.exit_code == 2 and "bf17" in str(e)
    with pytest.raises(TypeError):
        precis.spec(3)
    assert precis.spec("bf16") == "a=bf16,b=bf16,acc=fp32,out=bf16,scale=dynamic,smooth=none,split=none"


def test_unsupported_and_static_scales_need_calibration():
    a = np.ones((2, 4, 8), dtype=np.float32)
    b = np.ones((8, 3), dtype=np.float32)
    supported, why = precis._precis.cpu_support("fp64-emu")
    assert not supported and why
    with pytest.raises(precis.UnsupportedError, match="fp64-emu"):
        precis.emulate(a, b, "fp64-emu")
    with pytest.raises(ValueError, match="calib"):
        precis.emulate(a, b, "a=s8@tensor,b=s8@col,scale=absmax")
    c = precis.emulate(a, b, "a=s8@tensor,b=s8@col,scale=absmax", calib=2 * a)
    assert c.shape == (2, 4, 3)


def rss_bytes():
    return int(pathlib.Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_repeated_calls_do_not_leak():
    """Inputs of 1 MiB: a buffer kept per call (input copy, output, quantized arrays, a Py_buffer
    never released) would add over 100 MiB in 100 calls; the allowance is 24 MiB."""
    rng = np.random.default_rng(5)
    a = rng.standard_normal((512, 512)).astype(np.float32)
    b = rng.standard_normal((512, 64)).astype(np.float32)
    strided = np.ones((512, 1024), dtype=np.float32)[:, ::2]

    def calls():
        precis.emulate(a, b, "fp8")
        precis.emulate(a.astype(np.float64), b, "fp64")
        precis.quantize(a, "a=e2m1@nv")
        for bad in (lambda: precis.emulate(a, b, "a=s8@col"), lambda: precis.emulate(a, b, "fp64-emu"),
                    lambda: precis._precis.emulate("fp32", strided, b, np.empty((512, 64), np.float32), 1, 512, 64,
                                                   512, False),
                    lambda: precis.quantize(a, "b=e4m3@row")):
            with pytest.raises((precis.Error, BufferError)):
                bad()

    for _ in range(5):
        calls()
    before = rss_bytes()
    for _ in range(100):
        calls()
    grown = rss_bytes() - before
    assert grown < 24 << 20, f"RSS grew by {grown >> 20} MiB over 100 rounds of calls"


def test_the_gil_is_released_while_c_computes():
    """While a thread emulates a GEMM, the main thread keeps running: its longest pause is well under
    the call's length (holding the GIL, the pause would be the whole call)."""
    import threading
    import time
    rng = np.random.default_rng(9)
    b = rng.standard_normal((1024, 512)).astype(np.float32)
    # A call long enough to tell a pause from the whole call, on an idle machine as on a loaded one:
    # the batch doubles until one call takes 0.3 s.
    for batch in (4, 8, 16, 32, 64):
        a = rng.standard_normal((batch, 256, 1024)).astype(np.float32)
        t0 = time.perf_counter()
        precis.emulate(a, b, "fp16acc16")
        duration = time.perf_counter() - t0
        if duration > 0.3:
            break
    worker = threading.Thread(target=precis.emulate, args=(a, b, "fp16acc16"))
    longest, last = 0.0, time.perf_counter()
    worker.start()
    while worker.is_alive():
        time.sleep(0.002)
        now = time.perf_counter()
        longest, last = max(longest, now - last), now
    worker.join()
    assert duration > 0.2, f"the GEMM took {duration:.3f} s: too short to tell"
    assert longest < duration / 2, f"main thread paused {longest:.3f} s during a {duration:.3f} s call"


# ---- reports, runs and the command line ---------------------------------------------------------

def test_read_report_rows_are_report_json(work):
    report = precis.read_report(work["report"])
    assert report.rows == json.loads(work["report"].read_text())["rows"]
    assert report.complete and len(report) == len(report.rows) == 2 * len(work["names"])
    assert precis.read_report(work["report"].parent).rows == report.rows
    damaged = json.loads(work["report"].read_text())
    damaged["rows"][1]["time"]["median_ms"] = "fast"
    bad = work["tmp"] / "damaged.json"
    bad.write_text(json.dumps(damaged))
    with pytest.raises(precis.UsageError, match=r"rows\[1\]\.time\.median_ms"):
        precis.read_report(bad)
    with pytest.raises(precis.Error, match="no-such-report"):
        precis.read_report(work["tmp"] / "no-such-report.json")


def test_to_pandas(work):
    pandas = pytest.importorskip("pandas")
    frame = precis.read_report(work["report"]).to_pandas()
    assert isinstance(frame, pandas.DataFrame) and len(frame) == 2 * len(work["names"])
    assert "error.rel_fro.worst" in frame.columns


def test_run(work):
    report = precis.run(work["data"], recipes=["bf16", "int8"], backend="cpu", output=work["tmp"] / "run1",
                        args=["--max-time-ms", "1", "--min-samples", "1"])
    assert report.exit_code == 0 and [r["recipe"] for r in report.rows] == ["bf16", "int8"] * 2
    assert report.rows == json.loads((work["tmp"] / "run1" / "report.json").read_text())["rows"]
    strict = precis.run(work["data"], recipes="int8", require="rel_fro <= 1e-12", backend="cpu",
                        args=["--max-time-ms", "1", "--min-samples", "1"])
    assert strict.exit_code == 3 and all(r["verdict"] == "fail" for r in strict.rows)
    with pytest.raises(precis.Error) as info:
        precis.run(work["data"], recipes="int8", require="rel_fro <= 1e-12", backend="cpu", check=True,
                   args=["--max-time-ms", "1", "--min-samples", "1"])
    assert info.value.exit_code == 3
    with pytest.raises(precis.UsageError, match="criterion \"rel_fro <=\""):
        precis.run(work["data"], recipes="bf16", require="rel_fro <=", backend="cpu")
    with pytest.raises(precis.UsageError, match="no-such.h5"):
        precis.run(work["tmp"] / "no-such.h5", recipes="bf16", backend="cpu")


def test_python_m_precis_exit_codes(work):
    env = dict(os.environ, PYTHONPATH=str(STAGE))
    quick = ["--backend", "cpu", "--max-time-ms", "1", "--min-samples", "1", "--quiet"]
    cases = [
        (["--version"], 0),
        (["bogus"], 2),
        (["inspect", str(work["data"])], 0),
        (["inspect", str(work["tmp"] / "missing.h5")], 2),
        (["run", str(work["data"]), "--recipes", "int8", "--require", "rel_fro <= 1e-12", "-o",
          str(work["tmp"] / "m3"), *quick], 3),
        (["run", str(work["data"]), "--recipes", "nope"], 2),
    ]
    for args, expected in cases:
        py = subprocess.run([sys.executable, "-m", "precis", *args], env=env, capture_output=True, text=True)
        if args[0] == "run" and expected == 3:
            args = [*args[:-len(quick) - 2], "-o", str(work["tmp"] / "cli3"), *quick]
        cli = subprocess.run([PRECIS, *args], capture_output=True, text=True)
        assert py.returncode == cli.returncode == expected, (args, py.returncode, cli.returncode, py.stderr)
        if args[0] in ("--version", "bogus"):
            assert py.stdout == cli.stdout and py.stderr == cli.stderr
    # In-process: the interpreter lives on after a command, and Ctrl-C is Python's again (a run
    # installs precis's own SIGINT handler, which precis_main takes back off).
    assert precis.main(["inspect", str(work["data"])]) == 0
    assert precis.main(["run", str(work["data"]), "--recipes", "bf16", "-o", str(work["tmp"] / "inproc"), *quick]) == 0
    assert precis.main(["run", "--bogus-option"]) == 2
    import signal
    import time
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(2)

if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-p", "no:cacheprovider"]))
