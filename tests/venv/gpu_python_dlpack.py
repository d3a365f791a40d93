"""torch CUDA tensors through DLPack into the cuda backend (issue 40), on a GPU. WRITTEN ON A MACHINE
WITHOUT A GPU AND NOT YET RUN ON ONE: registered as venv_gpu_python_dlpack (label gpu) in a CUDA build
with the Python module; exits 77 where torch sees no CUDA device.

- precis.emulate on torch CUDA tensors equals `precis run --backend cuda --save-outputs` on a dataset
  holding the same arrays, bit for bit, for fp32, bf16 and int8 (shared and batched b, odd shapes);
- no host copy: under torch's profiler (CUPTI sees every CUDA call of the process, libprecis's too)
  the call makes no host<->device copy of an input's or the output's size (the scalars int8 reads
  back, its clipped counter, are a few bytes), and the output is the tensor it returned, on the
  inputs' device;
- a stream: inputs written on a side stream that is current are waited for;
- precis.torch.emulate of a CUDA model runs its layers there (backend None and "cuda"), close to
  the cpu emulation (another arithmetic: not the same bits), and `record` holds host copies.
"""
import json
import os
import pathlib
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "py"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scratch  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

if not torch.cuda.is_available():
    print("SKIP: torch sees no CUDA device")
    sys.exit(77)

import h5py  # noqa: E402
import pytest  # noqa: E402

BUILD = pathlib.Path(os.environ.get("PRECIS_BUILD_DIR", "build")).resolve()
PRECIS = os.environ.get("PRECIS", str(BUILD / "precis"))
sys.path.insert(0, str(pathlib.Path(os.environ.get("PRECIS_PY_STAGE") or BUILD / "python")))
import precis  # noqa: E402
import precis.torch as pt  # noqa: E402
from tiny_llama import tiny_llama  # noqa: E402

SUITE = """seed: 40
workloads:
  - name: shared
    m: 33
    n: 17
    k: 65
    batch: 3
  - name: batched
    m: 7
    n: 19
    k: 96
    batch: 2
    b_batched: true
"""
RECIPES = ["fp32", "bf16", "int8"]


def bits(x):
    return np.ascontiguousarray(x).view(np.uint32)


@pytest.fixture(scope="module")
def work():
    assert precis.cuda_built(), "this test is registered for CUDA builds only"
    tmp = pathlib.Path(scratch.mkdtemp(prefix="precis-gpu-dlpack-"))
    (tmp / "suite.yaml").write_text(SUITE)
    data, saved = tmp / "d.h5", tmp / "outputs.h5"
    subprocess.run([PRECIS, "gen", str(tmp / "suite.yaml"), "-o", str(data)], check=True, capture_output=True)
    r = subprocess.run([PRECIS, "run", str(data), "--backend", "cuda", "--recipes", ",".join(RECIPES), "--quiet",
                        "--save-outputs", str(saved), "-o", str(tmp / "report"), "--min-samples", "1",
                        "--max-samples", "2", "--max-time-ms", "1"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return {"tmp": tmp, "data": data, "saved": saved}


def test_device_path_equals_the_cuda_backend_from_host_arrays(work):
    ds = precis.dataset(work["data"])
    with h5py.File(work["saved"], "r") as saved:
        for w in ds.workloads:
            arrays = ds.arrays(w["name"])
            a = torch.from_numpy(np.asarray(arrays["a"], np.float32)).cuda()
            b = torch.from_numpy(np.asarray(arrays["b"], np.float32)).cuda()
            for recipe in RECIPES:
                c = precis.emulate(a, b, recipe)
                assert c.is_cuda and c.device == a.device and c.dtype == torch.float32
                ref = saved[f"workloads/{w['name']}/{recipe}/c"][...]
                got = c.cpu().numpy()
                assert got.shape == ref.shape, (recipe, got.shape, ref.shape)
                mismatch = np.flatnonzero(bits(got) != bits(ref))
                assert mismatch.size == 0, f"{w['name']} {recipe}: {mismatch.size} elements differ"


def test_no_host_copy(work):
    a = torch.randn(4, 64, 576, device="cuda")
    b = torch.randn(576, 960, device="cuda")
    smallest = min(a.numel(), b.numel(), 4 * 64 * 960) * 4
    for recipe in RECIPES:
        out = torch.empty(4, 64, 960, device="cuda")
        precis.emulate(a, b, recipe, out=out)  # warm: the backend context opens on first use
        torch.cuda.synchronize()
        trace = pathlib.Path(work["tmp"]) / f"trace-{recipe}.json"
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            ret = precis.emulate(a, b, recipe, out=out)
            torch.cuda.synchronize()
        prof.export_chrome_trace(str(trace))
        assert ret.data_ptr() == out.data_ptr()
        events = json.loads(trace.read_text())["traceEvents"]
        copies = [(e["name"], e.get("args", {}).get("bytes", 0)) for e in events
                  if "Memcpy" in e.get("name", "") and ("HtoD" in e["name"] or "DtoH" in e["name"])]
        large = [c for c in copies if c[1] >= min(smallest, 4096)]
        assert not large, f"{recipe}: host copies {large}"
        kernels = [e for e in events if e.get("cat") == "kernel"]
        assert kernels, f"{recipe}: the profiler saw no kernel: it does not see libprecis's work, the check proves nothing"


def test_stream_of_the_inputs_is_waited_for():
    side = torch.cuda.Stream()
    b = torch.ones(256, 128, device="cuda")
    torch.cuda.synchronize()  # b was written on the default stream; a is the one whose stream matters
    with torch.cuda.stream(side):
        a = torch.zeros(64, 256, device="cuda")
        torch.cuda._sleep(50_000_000)  # ~ tens of ms on the side stream before a is written
        a.fill_(1.0)
        c = precis.emulate(a, b, "bf16")
    torch.cuda.synchronize()
    assert torch.equal(c.cpu(), torch.full((64, 128), 256.0))


def test_torch_model_on_the_device():
    model = tiny_llama(layers=2).cuda()
    ids = torch.tensor([[1, 5, 9, 33, 2, 70, 11, 4]], device="cuda")
    plan = {"*": "bf16"}
    record = {}
    with torch.no_grad():
        with pt.emulate(model, plan, record=record):
            on_device = model(ids).logits
        with pt.emulate(model, plan, backend="cuda"):
            again = model(ids).logits
        with pt.emulate(model, plan, backend="cpu"):
            on_host = model(ids).logits
    assert on_device.is_cuda and torch.equal(on_device, again)
    rel = (on_device - on_host).norm() / on_host.norm()
    assert 0 <= rel < 2e-2, rel
    assert record and all(isinstance(v[0], np.ndarray) for v in record.values())


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-p", "no:cacheprovider"]))
