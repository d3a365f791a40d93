"""DLPack arrays into precis (issue 40, "Beyond one machine"): the capsule parser of the C extension
(python/_precis.c, _precis.emulate_dlpack) and the routing of CUDA tensors, on a machine without a
GPU. What needs a device is tests/gpu/test_device_gemm.c (ctest -L gpu); here:

- CPU DLPack arrays (torch tensors, NumPy arrays, a producer without DLPack 1.0's max_version) through
  the parser give precis.emulate's bits, shared and batched b;
- refusals name the array and what was expected: dtype, ndim, strides, read-only output, shapes,
  mixed devices, a capsule used twice, a device type precis does not read;
- ownership: each capsule is renamed used_dltensor(_versioned) and its deleter called exactly once,
  on success and on every refusal (NumPy's deleter drops a reference to the array: the reference
  counts come back); a fake kDLCUDA tensor built with ctypes reaches the device entry, which refuses
  with "not built" (PRECIS_CUDA_BUILT=0) or "no usable CUDA device" (a CUDA build here), its deleter
  called once;
- precis.torch.emulate routes by the input's device: CPU tensors as before; a CUDA input in place
  only when the package has CUDA and no target=/gemm= asks for the cpu backend's arithmetic, else on
  the host as before; backend='cuda' that cannot be honoured (a CPU input, target=, gemm=, no CUDA
  built) is refused with the way out.
"""
import ctypes
import os
import pathlib
import sys
import types
from unittest import mock

import numpy as np
import pytest
import torch

BUILD = pathlib.Path(os.environ.get("PRECIS_BUILD_DIR", "build")).resolve()
STAGE = pathlib.Path(os.environ.get("PRECIS_PY_STAGE") or BUILD / "python")
sys.path.insert(0, str(STAGE))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import precis  # noqa: E402
import precis.torch as pt  # noqa: E402
from precis import _precis  # noqa: E402
from tiny_llama import tiny_llama  # noqa: E402

STATIC_INT8 = "a=s8@tensor:sym,b=s8@col:sym,acc=s32,out=fp32,scale=absmax"
CUDA_BUILT = os.environ.get("PRECIS_CUDA_BUILT", "1" if precis.cuda_built() else "0") == "1"

_get_name = ctypes.pythonapi.PyCapsule_GetName
_get_name.restype = ctypes.c_char_p
_get_name.argtypes = [ctypes.py_object]


def capsule_name(capsule):
    return _get_name(capsule).decode()


def bits(x):
    return np.ascontiguousarray(x).view(np.uint32)


class Keeper:
    """A DLPack producer that keeps the capsule it hands out, so that the test can look at it after."""

    def __init__(self, array, legacy=False):
        self.array, self.legacy, self.capsules = array, legacy, []

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()

    def __dlpack__(self, stream=None, max_version=None):
        if self.legacy and max_version is not None:
            raise TypeError("__dlpack__() got an unexpected keyword argument 'max_version' (a pre-1.0 producer)")
        cap = self.array.__dlpack__(stream=stream, max_version=max_version) if max_version else \
            self.array.__dlpack__(stream=stream)
        self.capsules.append(cap)
        return cap


class Replayer:
    """A broken producer: hands out the same capsule on every call."""

    def __init__(self, capsule, device):
        self.capsule, self.device = capsule, device

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, stream=None, max_version=None):
        return self.capsule


@pytest.fixture(scope="module")
def operands():
    rng = np.random.default_rng(40)
    a = (rng.standard_normal((3, 9, 65)) * 3).astype(np.float32)  # odd k, batch 3
    b = rng.standard_normal((65, 17)).astype(np.float32)
    bb = rng.standard_normal((3, 65, 17)).astype(np.float32)
    return a, b, bb


@pytest.mark.parametrize("recipe", ["fp32", "bf16", "fp16", "int8", "fp8"])
def test_cpu_dlpack_gives_emulate_bits(operands, recipe):
    a, b, bb = operands
    for bmat in (b, bb):
        want = precis.emulate(a, bmat, recipe, out_dtype=np.float32)
        out = np.empty(want.shape, np.float32)
        info = _precis.emulate_dlpack(recipe, a, bmat, out)
        assert info["backend"] == "cpu" and info["spec"] == precis.spec(recipe)
        assert np.array_equal(bits(out), bits(want)), recipe
        tout = torch.empty(want.shape)
        _precis.emulate_dlpack(recipe, torch.from_numpy(a), torch.from_numpy(bmat), tout)
        assert np.array_equal(bits(tout.numpy()), bits(want)), recipe
    # 2-D a, and a producer that predates max_version (the unversioned "dltensor" capsule).
    want = precis.emulate(a[0], b, recipe, out_dtype=np.float32)
    out = torch.empty(want.shape)
    ka, kb, kc = Keeper(torch.from_numpy(a[0]), legacy=True), Keeper(torch.from_numpy(b)), Keeper(out, legacy=True)
    _precis.emulate_dlpack(recipe, ka, kb, kc)
    assert np.array_equal(bits(out.numpy()), bits(want))
    assert [capsule_name(c) for c in ka.capsules + kb.capsules + kc.capsules] == \
        ["used_dltensor", "used_dltensor_versioned", "used_dltensor"]


def refused(exc_type, fragment, *args):
    with pytest.raises(exc_type) as e:
        _precis.emulate_dlpack("bf16", *args)
    assert fragment in str(e.value), str(e.value)
    return str(e.value)


def test_refusals_name_the_array_and_what_was_expected(operands):
    a, b, bb = operands
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    out = torch.empty(3, 9, 17)
    refused(TypeError, "a: dtype float64 (DLPack code 2): expected float32", ta.double(), tb, out)
    refused(TypeError, "b: dtype bfloat16 (DLPack code 4): expected float32", ta, tb.bfloat16(), out)
    refused(TypeError, "out: dtype int8", ta, tb, out.to(torch.int8))
    refused(ValueError, "a: 1 dimensions: expected 2 or 3", ta[0, 0], tb, out)
    refused(ValueError, "a: 4 dimensions", ta[None], tb, out)
    # A transposed view is not dense row-major: refused with the strides it has and those expected.
    msg = refused(ValueError, "b: strides (1, 65) in elements: expected dense row-major (17, 1)",
                  ta, torch.from_numpy(np.ascontiguousarray(b.T)).t(), out)
    assert "contiguous" in msg
    refused(ValueError, "a: strides (585, 1, 9)", ta.transpose(1, 2).contiguous().transpose(1, 2), tb, out)
    refused(ValueError, "out: strides", ta, tb, torch.empty(3, 9, 34)[:, :, ::2])
    # A dimension of size 1 has no step: any stride is dense there.
    one = torch.as_strided(ta.clone().reshape(-1), (1, 9, 65), (7, 65, 1))
    out1 = torch.empty(1, 9, 17)
    _precis.emulate_dlpack("bf16", one, tb, out1)
    assert np.array_equal(bits(out1.numpy()), bits(precis.emulate(a[:1], b, "bf16")))
    refused(ValueError, "b: strides (2, 1) in elements: expected dense row-major (1, 1)", ta,
            torch.empty(65, 2)[:, :1], torch.empty(3, 9, 1))
    readonly = np.empty((3, 9, 17), np.float32)
    readonly.flags.writeable = False
    refused(ValueError, "out: a read-only DLPack array: expected a writable one", a, b, readonly)
    refused(ValueError, "a's k=65 differs from b's k=64", ta, torch.empty(64, 17), out)
    refused(ValueError, "a batched b needs a batched a", ta[0], torch.from_numpy(bb), torch.empty(9, 17))
    refused(ValueError, "out: expected shape [batch, 9, 17]", ta, tb, torch.empty(3, 9, 16))
    refused(TypeError, "a: <class 'list'> has no __dlpack__", [[1.0]], tb, out)
    # A device precis does not read (torch's meta tensors have no data: kDLExtDev).
    with pytest.raises((ValueError, BufferError, RuntimeError)):
        _precis.emulate_dlpack("bf16", torch.empty(3, 9, 65, device="meta"), tb, out)


def test_capsules_are_consumed_once_and_freed(operands):
    a, b, bb = operands
    out = np.empty((3, 9, 17), np.float32)
    base = [sys.getrefcount(x) for x in (a, b, out)]
    for _ in range(3):
        _precis.emulate_dlpack("int8", a, b, out)
    assert [sys.getrefcount(x) for x in (a, b, out)] == base, "a deleter was not called (NumPy holds a reference)"
    # Refusals after a and b were taken release them too.
    readonly = np.empty((3, 9, 17), np.float32)
    readonly.flags.writeable = False
    for bad in ((a, b, readonly), (a, b.astype(np.float64), out), (a, b, np.empty((3, 9, 16), np.float32))):
        with pytest.raises((ValueError, TypeError)):
            _precis.emulate_dlpack("int8", *bad)
    del bad
    assert [sys.getrefcount(x) for x in (a, b, out)] == base
    # A capsule handed over twice: the second use is refused, not read again.
    cap = a.__dlpack__()
    replay = Replayer(cap, a.__dlpack_device__())
    _precis.emulate_dlpack("bf16", replay, b, out)
    assert capsule_name(cap) == "used_dltensor"
    with pytest.raises(ValueError, match="already consumed"):
        _precis.emulate_dlpack("bf16", replay, b, out)
    del cap, replay
    assert [sys.getrefcount(x) for x in (a, b, out)] == base


# ---- a kDLCUDA tensor without a GPU: DLPack's structs built with ctypes -----------------------------

class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class DLManagedTensorVersioned(ctypes.Structure):
    pass


DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))
DLManagedTensorVersioned._fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32),
                                     ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER),
                                     ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]
_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
VERSIONED = b"dltensor_versioned"


class FakeCuda:
    """A float32 tensor that says it lives on CUDA device 0 (its data is host memory nobody may read:
    the device entry must refuse before). Counts its deleter's calls."""

    def __init__(self, shape, dtype_bits=32):
        self.shape = (ctypes.c_int64 * len(shape))(*shape)
        self.memory = (ctypes.c_float * int(np.prod(shape)))()
        self.deleted = 0

        def deleter(_):
            self.deleted += 1
        self.deleter = DELETER(deleter)
        self.managed = DLManagedTensorVersioned(1, 0, None, self.deleter, 0,
                                                DLTensor(ctypes.cast(self.memory, ctypes.c_void_p), DLDevice(2, 0),
                                                         len(shape), DLDataType(2, dtype_bits, 1), self.shape, None, 0))
        self.streams = []

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, stream=None, max_version=None):
        self.streams.append(stream)
        return _capsule_new(ctypes.addressof(self.managed), VERSIONED, None)


def test_cuda_tensor_reaches_the_device_entry_and_is_refused_here():
    a, b, out = FakeCuda((2, 9, 65)), FakeCuda((65, 17)), FakeCuda((2, 9, 17))
    with pytest.raises(precis.Error) as e:
        _precis.emulate_dlpack("bf16", a, b, out, 0x1234)
    msg = str(e.value)
    if not CUDA_BUILT:
        assert e.value.status == "not built" or "built without CUDA" in msg, msg
        assert "this libprecis was built without CUDA" in msg and "PRECIS_CUDA=OFF" in msg, msg
    elif torch.cuda.is_available():
        # A GPU machine: the pointer check refuses host memory posing as device memory.
        assert "expected device memory of CUDA device 0" in msg, msg
    else:
        assert "no usable CUDA device" in msg, msg
    assert (a.deleted, b.deleted, out.deleted) == (1, 1, 1)
    # The consumer's stream goes to the producer as DLPack says (0 would be ambiguous: 1 is the legacy
    # default stream).
    assert a.streams == b.streams == out.streams == [0x1234]
    _precis.emulate_dlpack.__doc__  # noqa: B018
    with pytest.raises(precis.Error):
        _precis.emulate_dlpack("bf16", a, b, out)
    assert a.streams[-1] == 1
    # Refused before the device: a wrong dtype (its deleter called too), mixed devices, a target.
    bad = FakeCuda((65, 17), dtype_bits=16)
    with pytest.raises(TypeError, match="b: dtype float16"):
        _precis.emulate_dlpack("bf16", a, bad, out)
    assert bad.deleted == 1
    with pytest.raises(ValueError, match="a is on CUDA device 0, b on the CPU"):
        _precis.emulate_dlpack("bf16", a, np.zeros((65, 17), np.float32), out)
    with pytest.raises(ValueError, match="target=sm_80: CUDA arrays run on the device's own arithmetic"):
        _precis.emulate_dlpack("bf16", a, b, out, 0, "sm_80")
    assert a.deleted == 5 and b.deleted == 3
    # precis.emulate routes kDLCUDA arrays there; without out= only torch tensors get one allocated.
    with pytest.raises(precis.UsageError, match="need out="):
        precis.emulate(a, b, "bf16")
    with pytest.raises(precis.Error, match="built without CUDA" if not CUDA_BUILT else "CUDA"):
        precis.emulate(a, b, "bf16", out=out)
    with pytest.raises(precis.UsageError, match="calib: CUDA arrays take no calibration inputs"):
        precis.emulate(a, b, STATIC_INT8, calib=np.zeros((1, 9, 65), np.float32), out=out)


def test_device_entry_refuses_static_scales_and_odd_strides_before_the_device():
    # precis_emulate_device's own checks run before anything CUDA (tests/test_api.c has the C side):
    # here through the parser, which refuses non-dense strides itself, so a static-scale recipe.
    a, b, out = FakeCuda((2, 9, 65)), FakeCuda((65, 17)), FakeCuda((2, 9, 17))
    with pytest.raises(precis.UsageError, match="scale=absmax takes A's scale from calibration inputs"):
        _precis.emulate_dlpack(STATIC_INT8, a, b, out)
    assert (a.deleted, b.deleted, out.deleted) == (1, 1, 1)


def test_torch_emulate_routes_by_device():
    model = tiny_llama(layers=1)
    ids = torch.tensor([[1, 5, 9, 33, 2, 70, 11]])
    plan = {"*": "int8"}
    with torch.no_grad():
        with pt.emulate(model, plan):
            auto = model(ids).logits
        with pt.emulate(model, plan, backend="cpu"):
            host = model(ids).logits
    assert torch.equal(auto, host)
    with pytest.raises(pt.PlanError, match="backend='cuda' takes CUDA tensors; its input is on cpu"):
        with torch.no_grad(), pt.emulate(model, plan, backend="cuda"):
            model(ids)
    with pytest.raises(pt.PlanError, match="backend='gpu': expected None"):
        with pt.emulate(model, plan, backend="gpu"):
            pass
    # A CUDA input (torch.device needs no GPU to be named): what _route decides for it. Left to
    # choose, it stays on the host whenever the device cannot give what was asked.
    x = types.SimpleNamespace(device=torch.device("cuda", 0))
    assert pt._route("l", x, "cpu", "sm_80", True) == "cpu"
    assert pt._route("l", x, None, None, False) == ("cuda" if CUDA_BUILT else "cpu")
    for built in (False, True):  # as either kind of package would decide
        with mock.patch.object(precis, "cuda_built", lambda: built):
            assert pt._route("l", x, None, "sm_80", False) == "cpu"
            assert pt._route("l", x, None, None, True) == "cpu"
            assert pt._route("l", x, None, None, False) == ("cuda" if built else "cpu")
    with pytest.raises(pt.PlanError, match="backend='cuda' with target=sm_80: the target is the cpu backend's"):
        pt._route("l", x, "cuda", "sm_80", False)
    with pytest.raises(pt.PlanError, match="backend='cuda' with gemm="):
        pt._route("l", x, "cuda", None, True)
    if CUDA_BUILT:
        assert pt._route("l", x, "cuda", None, False) == "cuda"
    else:
        with pytest.raises(pt.PlanError, match="built without CUDA .*leave backend out"):
            pt._route("l", x, "cuda", None, False)

if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-p", "no:cacheprovider"]))
