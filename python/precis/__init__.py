"""precis from Python: the same C core as the `precis` command line (DESIGN §15).

    import numpy as np, precis
    a = np.random.default_rng(0).standard_normal((4, 33, 65), dtype=np.float32)
    b = np.random.default_rng(1).standard_normal((65, 17), dtype=np.float32)
    c = precis.emulate(a, b, "fp8")          # bit for bit what `precis run --backend cpu` computes
    print(precis.spec("fp8"), np.abs(c - a @ b).max())

Nothing numeric happens in Python: every function calls libprecis (include/precis/*.h), which calls
the functions the CLI runs. NumPy only converts arrays.
"""
import json
import os
import tempfile

import numpy as np


def _passive_openblas():
    """OpenBLAS's idle threads sleep at once instead of spinning on sched_yield for 2^28 cycles
    (~0.1 s) after every call, unless the user set the timeout. libprecis's GEMMs run between
    torch's ops and beside other processes: on the shared 2-core machine the spinning was a quarter
    of an int8 verify's CPU time (and cost it wall time: the spinning threads took the cores the
    next op needed; docs/verify.md, "Cost"). OpenBLAS reads the variable once, when the library is
    loaded: before _precis is imported. Thread timing changes no result (OpenBLAS splits the work
    by thread count, not by time)."""
    if "OPENBLAS_THREAD_TIMEOUT" not in os.environ:
        os.environ["OPENBLAS_THREAD_TIMEOUT"] = "4"  # OpenBLAS's minimum: 2^4 cycles


_passive_openblas()

from . import _precis  # noqa: E402  (after _passive_openblas: OpenBLAS reads its environment on load)
from ._precis import Error, IOError, OutOfMemoryError, UnsupportedError, UsageError  # noqa: E402

__all__ = [
    "Error", "UsageError", "UnsupportedError", "OutOfMemoryError", "IOError",
    "spec", "recipes", "emulate", "emulate_operands", "quantize", "Quantized", "dataset", "Dataset", "run", "read_report", "Report",
    "main", "cuda_built", "__version__",
]

__version__, __commit__ = _precis.version()


def spec(text):
    """The canonical spec of a preset name or a spec ("bf16" -> "a=bf16,b=bf16,acc=fp32,...").

    Raises UsageError (a ValueError) naming the field that is wrong and what it allows."""
    if not isinstance(text, str):
        raise TypeError(f"spec: expected str, got {type(text).__name__}")
    return _precis.spec_canonical(text)


def recipes():
    """The presets of `precis recipes`, in its order: dicts with name, spec, description, in_all,
    high_precision, baseline, required and cpu (whether precis.emulate runs it)."""
    return _precis.recipes()


def _float_array(x, name, allow_f64=True):
    """x as a C-contiguous float32 (or float64) ndarray; other element types are refused, not cast,
    so that the bits emulate sees are the caller's."""
    arr = np.asarray(x)
    allowed = (np.float32, np.float64) if allow_f64 else (np.float32,)
    if arr.dtype.type not in allowed:
        names = "float32 or float64" if allow_f64 else "float32"
        raise TypeError(f"{name}: dtype {arr.dtype}: expected {names} (convert it first, e.g. {name}.astype(np.float32))")
    return np.ascontiguousarray(arr)


def cuda_built():
    """True when this package's libprecis has the CUDA backend (CUDA arrays go to it in place; a
    device may still be absent). False: CUDA arrays are refused, host arrays work as ever."""
    return _precis.cuda_built()


_DL_CUDA = 2


def _on_cuda(x):
    """Whether x is a DLPack array on a CUDA device (torch CUDA tensors, CuPy arrays, ...)."""
    if isinstance(x, np.ndarray) or not hasattr(x, "__dlpack__"):
        return False
    device = getattr(x, "__dlpack_device__", None)
    try:
        return device is not None and int(device()[0]) == _DL_CUDA
    except Exception:
        return False


def _cuda_stream(x):
    """The caller's current CUDA stream for x's device, as the integer DLPack exchanges: torch's and
    CuPy's current stream; 0 (the legacy default stream) for other libraries."""
    if type(x).__module__.startswith("torch"):
        import torch

        return int(torch.cuda.current_stream(x.device).cuda_stream)
    if type(x).__module__.startswith("cupy"):
        import cupy

        return int(cupy.cuda.get_current_stream().ptr)
    return 0


def _emulate_on_device(a, b, recipe, calib, out_dtype, target, out):
    """emulate's CUDA path (NOT YET RUN ON A GPU): libprecis's precis_emulate_device on the arrays in
    place through DLPack, the cuda backend's arithmetic, nothing copied to the host."""
    if calib is not None:
        raise UsageError("calib: CUDA arrays take no calibration inputs (static-scale recipes run on host arrays)")
    if out_dtype is not None and np.dtype(out_dtype) != np.float32:
        raise TypeError(f"out_dtype: {np.dtype(out_dtype)}: CUDA arrays give float32 outputs")
    if target is not None:
        raise UsageError(f"target={target}: an architecture's arithmetic is emulated by the cpu backend on host "
                         "arrays; CUDA arrays run on the device's own (move them to the host to emulate a target)")
    if out is None:
        if not type(a).__module__.startswith("torch"):
            raise UsageError("out: CUDA arrays that are not torch tensors need out=, a float32 CUDA array of the "
                             "output's shape on their device")
        import torch

        if a.ndim not in (2, 3) or getattr(b, "ndim", 0) not in (2, 3):
            raise ValueError(f"a {tuple(a.shape)}, b {tuple(getattr(b, 'shape', ()))}: expected [m, k] or [batch, m, k] "
                             "and [k, n] or [batch, k, n]")
        out = torch.empty(tuple(a.shape[:-1]) + (b.shape[-1],), dtype=torch.float32, device=a.device)
    _precis.emulate_dlpack(recipe, a, b, out, _cuda_stream(a), None)
    return out


def emulate(a, b, recipe, *, calib=None, out_dtype=None, target=None, out=None, b_transposed=False):
    """C = A·B exactly as `recipe` computes it on the cpu backend: the same code and the same bits as
    `precis run --backend cpu --save-outputs` on a dataset holding a and b.

    CUDA arrays (torch CUDA tensors, any DLPack array on kDLCUDA; float32, dense) go to the cuda
    backend instead, in place, without a copy through host memory, when this package is built with
    CUDA (cuda_built()); else they are refused. That path computes with the device's own arithmetic
    (cuBLASLt, as `precis run --backend cuda`), not the cpu backend's emulation, and it has NOT YET
    RUN ON A GPU (docs/verify.md, "Beyond one machine"). out: its float32 output array on the same
    device (allocated for torch tensors when None); returned.

    a: [m, k] or [s, m, k]; b: [k, n], or [s, k, n] (one B per batch element); float32, or float64
    as a dataset may store them (fp64 recipes read all 53 bits, others the float32 rounding).
    calib: [samples, m, k] float32 calibration inputs (a dataset's calib/a): recipes with static
    activation scales need them, SmoothQuant takes its scales from them (else from a itself, as
    for a workload without a calibration split); give the dataset's to reproduce its rows.
    target: the architecture whose arithmetic is emulated, as `precis run --target` (sm_80, sm_89,
    sm_90, sm_100, sm_120; None: sm_90, the cpu backend's default).
    b_transposed: b is given as Bᵀ, [n, k] or [s, n, k], as nn.Linear holds its weight W (C = A·Wᵀ):
    the same bits as emulate(a, b.T), without that transposed copy (host arrays only).
    Returns [m, n] or [s, m, n]: float32, or float64 for out=fp64 recipes (out_dtype overrides).
    Raises UsageError (bad recipe, shape), TypeError (dtype), UnsupportedError (the cpu backend does
    not run this recipe, and says why)."""
    if not isinstance(recipe, str):
        raise TypeError(f"recipe: expected str, got {type(recipe).__name__}")
    if _on_cuda(a) or _on_cuda(b) or (out is not None and _on_cuda(out)):
        if b_transposed:
            raise UsageError("b_transposed: host arrays only; on a CUDA device give B as [k, n]")
        return _emulate_on_device(a, b, recipe, calib, out_dtype, target, out)
    if out is not None:
        raise UsageError("out: host arrays get a new output; out= is for CUDA arrays")
    a = _float_array(a, "a")
    b = _float_array(b, "b")
    if a.ndim not in (2, 3):
        raise ValueError(f"a: shape {a.shape}: expected [m, k] or [batch, m, k]")
    if b.ndim not in (2, 3):
        raise ValueError(f"b: shape {b.shape}: expected [k, n] or [batch, k, n]")
    batch, m, k = (1,) + a.shape if a.ndim == 2 else a.shape
    b_batched = b.ndim == 3
    kb, n = b.shape[-2:][::-1] if b_transposed else b.shape[-2:]
    if kb != k:
        raise ValueError(f"a {a.shape} and b {b.shape}{' (transposed: [n, k])' if b_transposed else ''}: a's k={k} "
                         f"differs from b's k={kb}")
    if b_batched and b.shape[0] != batch:
        raise ValueError(f"b: shape {b.shape}: a batched b needs a's batch {batch} first")
    if b_batched and a.ndim == 2:
        raise ValueError(f"b: shape {b.shape}: a batched b needs a batched a [batch, m, k]")
    calib_samples = 0
    if calib is not None:
        calib = _float_array(calib, "calib", allow_f64=False)
        if calib.ndim == 2:
            calib = calib[np.newaxis]
        if calib.ndim != 3 or calib.shape[1:] != (m, k):
            raise ValueError(f"calib: shape {calib.shape}: expected [samples, {m}, {k}]")
        calib_samples = calib.shape[0]
    if out_dtype is None:
        out_dtype = _precis.out_dtype(recipe)
    out_dtype = np.dtype(out_dtype)
    if out_dtype.type not in (np.float32, np.float64):
        raise TypeError(f"out_dtype: {out_dtype}: expected float32 or float64")
    shape = (batch, m, n) if a.ndim == 3 else (m, n)
    out = np.empty(shape, dtype=out_dtype)
    _precis.emulate(recipe, a, b, out, batch, m, n, k, b_batched, calib, calib_samples, target, bool(b_transposed))
    return out


def emulate_operands(a, b, recipe):
    """The operands `recipe` multiplies on the cpu backend, for another implementation of the same
    GEMM: (a_values, b_values, alpha) with C = alpha * a_values @ b_values summed in any order (the
    noise floor of verify, precis.noise). Element formats and scales are applied (weight-only: the
    scaled operand dequantized and rounded to the other's format, as its GEMM reads it); float32
    arrays of a's and b's shapes. Only for fp32-accumulating recipes (acc=fp32, no split=) whose
    scales are one number per matrix; others raise UnsupportedError saying why."""
    if not isinstance(recipe, str):
        raise TypeError(f"recipe: expected str, got {type(recipe).__name__}")
    a = _float_array(a, "a")
    b = _float_array(b, "b")
    if a.ndim not in (2, 3) or b.ndim not in (2, 3):
        raise ValueError(f"a {a.shape}, b {b.shape}: expected [m, k] or [batch, m, k] and [k, n] or [batch, k, n]")
    batch, m, k = (1,) + a.shape if a.ndim == 2 else a.shape
    if b.shape[-2] != k:
        raise ValueError(f"a {a.shape} and b {b.shape}: a's k={k} differs from b's k={b.shape[-2]}")
    b_batched = b.ndim == 3
    if b_batched and (a.ndim != 3 or b.shape[0] != batch):
        raise ValueError(f"b: shape {b.shape}: a batched b needs a batched a with the same batch")
    a_out = np.empty(a.shape, np.float32)
    b_out = np.empty(b.shape, np.float32)
    alpha = _precis.emulate_operands(recipe, a, b, a_out, b_out, batch, m, b.shape[-1], k, b_batched)
    return a_out, b_out, alpha


class Quantized:
    """One operand quantized by its spec field: codes, scales and the values they stand for.

    codes: uint8 (fp8/fp4 bits, u4 in the low nibble) or int8 (s8, s4) with x's shape, None when the
    format is a plain cast; scales: float32 [mats, rows, cols] group scales (None when unscaled);
    scale_codes (mx: E8M0, nv: E4M3), zero_points (u4) and tensor_scales (nv) when the format has
    them; values: float32, x's shape, what every element stands for; clipped: inputs that
    saturated or were NaN."""

    def __init__(self, raw, shape):
        self.operand = raw["operand"]
        self.side = raw["side"]
        self.scaled = raw["scaled"]
        self.clipped = raw["clipped"]
        self.values = np.frombuffer(raw["values"], dtype=np.float32).reshape(shape).copy()
        self.codes = self.scales = self.scale_codes = self.zero_points = self.tensor_scales = None
        if self.scaled:
            signed = self.operand.startswith(("s8", "s4"))
            self.codes = np.frombuffer(raw["codes"], dtype=np.int8 if signed else np.uint8).reshape(shape).copy()
            grid = raw["scale_shape"]
            self.scales = np.frombuffer(raw["scales"], dtype=np.float32).reshape(grid).copy()
            if raw["scale_codes"] is not None:
                self.scale_codes = np.frombuffer(raw["scale_codes"], dtype=np.uint8).reshape(grid).copy()
            if raw["zero_points"] is not None:
                self.zero_points = np.frombuffer(raw["zero_points"], dtype=np.uint8).reshape(grid).copy()
            if raw["tensor_scales"] is not None:
                self.tensor_scales = np.frombuffer(raw["tensor_scales"], dtype=np.float32).copy()

    def __iter__(self):
        """codes, scales, values = precis.quantize(...)"""
        return iter((self.codes, self.scales, self.values))

    def __repr__(self):
        return f"Quantized({self.side}={self.operand}, shape={self.values.shape}, clipped={self.clipped})"


def quantize(x, operand, *, amax=None):
    """Quantizes x as the operand field `operand` of a spec does ("a=e4m3@row", "b=s4@k128:sym",
    "b=e2m1@nv"; a bare "e4m3@row" is operand A), with the cpu backend's quantizer and layout.

    amax: a static per-tensor scale's amax (from calibration) instead of x's own: the operand's rule
    applied to it (e4m3@tensor: scale amax/448, so amax=448 is the scale 1.0); per-tensor operands only.

    x: float32 [rows, cols] (A: [m, k], B: [k, n]) or [batch, rows, cols] (A: all rows together;
    B: matrix by matrix, or one tensor with @tensor). Returns a Quantized (codes, scales, values)."""
    if not isinstance(operand, str):
        raise TypeError(f"operand: expected str, got {type(operand).__name__}")
    x = _float_array(x, "x", allow_f64=False)
    if x.ndim not in (2, 3):
        raise ValueError(f"x: shape {x.shape}: expected [rows, cols] or [batch, rows, cols]")
    batch, rows, cols = (1,) + x.shape if x.ndim == 2 else x.shape
    if amax is None:
        return Quantized(_precis.quantize(operand, x, batch, rows, cols), x.shape)
    return Quantized(_precis.quantize(operand, x, batch, rows, cols, float(amax)), x.shape)


class Dataset:
    """A precis dataset (DESIGN §4), opened and validated by precis: id, generator, created_utc,
    suite, workloads (plain dicts), and arrays(workload) -> {name: ndarray}."""

    def __init__(self, path):
        info = _precis.dataset_info(os.fspath(path))
        self.path = info["path"]
        self.id = info["id"]
        self.generator = info["generator"]
        self.created_utc = info["created_utc"]
        self.suite = info["suite"]
        self.workloads = info["workloads"]

    def arrays(self, workload):
        """The workload's arrays (a, b, c_ref, ab_abs and, when present, calib/a, b_ref, c_ref_lo)."""
        raw = _precis.dataset_arrays(self.path, workload)
        return {name: np.frombuffer(data, dtype=dtype).reshape(shape).copy()
                for name, (data, dtype, shape) in raw.items()}

    def __repr__(self):
        return f"Dataset({self.path!r}, {len(self.workloads)} workloads)"


def dataset(path):
    """Opens a dataset: precis.dataset("data.h5").workloads, .arrays("name")."""
    return Dataset(path)


class Report:
    """A precis report (report.json, DESIGN §8) as precis's reader validated it. rows: a list of plain
    dicts, exactly report.json's; data: the whole document; complete: False when the run was
    interrupted. A report from precis.run also has exit_code (the command's), messages (what it
    printed on stderr) and path."""

    def __init__(self, text, path=None, exit_code=None, messages=""):
        self.data = json.loads(text)
        self.rows = self.data["rows"]
        self.complete = self.data["complete"]
        self.path = path
        self.exit_code = exit_code
        self.messages = messages

    def __len__(self):
        return len(self.rows)

    def __iter__(self):
        return iter(self.rows)

    def to_pandas(self):
        """The rows as a pandas DataFrame, nested fields flattened ("error.rel_fro.worst"). Needs pandas."""
        try:
            import pandas
        except ImportError as e:
            raise ImportError("Report.to_pandas needs pandas (pip install pandas)") from e
        return pandas.json_normalize(self.rows)

    def __repr__(self):
        return f"Report({self.path!r}, {len(self.rows)} rows, complete={self.complete})"


def read_report(path):
    """Reads report.json (or a report directory) through precis's reader, which validates every
    field; raises UsageError naming the file and the field otherwise."""
    path = os.fspath(path)
    if os.path.isdir(path):
        path = os.path.join(path, "report.json")
    return Report(_precis.results_read(path), path=path)


def run(dataset=None, recipes=None, require=None, backend=None, *, output=None, workloads=None, save_outputs=None,
        force=False, gate=False, check=False, args=()):
    """`precis run` itself (the command's code, files and exit codes), then its report read back.

    dataset: path (None: the built-in default dataset); recipes: "bf16,int8" or a list; require: one
    criterion or a list ("rel_fro <= 0.01"); backend: "auto", "cpu" or "cuda"; output: the report
    directory (None: a new temporary directory); args: further `precis run` options. Returns the Report,
    with exit_code 0, 1 (a row failed) or 3 (criteria not met); with check=True a non-zero exit code
    raises. Bad options or input raise UsageError; an interrupt raises KeyboardInterrupt."""
    if isinstance(recipes, (list, tuple)):
        recipes = ",".join(recipes)
    if isinstance(require, str):
        require = [require]
    if isinstance(workloads, (list, tuple)):
        workloads = ",".join(workloads)
    if output is None:
        output = tempfile.mkdtemp(prefix="precis-run-")
        force = True
    output = os.fspath(output)
    code, text, messages, message = _precis.run(
        None if dataset is None else os.fspath(dataset), output, recipes, [str(r) for r in (require or [])],
        backend, workloads, None if save_outputs is None else os.fspath(save_outputs), bool(force), bool(gate),
        [str(a) for a in args])
    if code in (130, 143):
        raise KeyboardInterrupt(message or "precis run was interrupted")
    if text is None:
        exc = UsageError if code == 2 else Error
        err = exc(message or messages.strip() or f"precis run exited with {code}")
        err.exit_code = code
        err.messages = messages
        raise err
    report = Report(text, path=os.path.join(output, "report.json"), exit_code=code, messages=messages)
    if check and code != 0:
        err = Error(message or f"precis run exited with {code}")
        err.exit_code = code
        err.report = report
        raise err
    return report


def main(argv=None):
    """The command line: main(["run", "data.h5", ...]) returns what `precis run data.h5 ...` exits with."""
    import sys
    argv = sys.argv[1:] if argv is None else list(argv)
    sys.stdout.flush()
    sys.stderr.flush()
    return _precis.main(["precis"] + [os.fspath(a) for a in argv])
