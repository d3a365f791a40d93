"""SIGTERM and SIGINT during the model steps leave no temporary file (issue 40, DESIGN §20):

- `precis import --model` stopped while it writes: exit 143 / 130, nothing under the output name,
  no temporary file beside it;
- `python -m precis verify` stopped between batches (after its first progress line): exit 143 /
  130, no report file, no temporary file in -o DIR or under TMPDIR;
- precis.torch's Captured.save stopped inside its write: the process ends by the signal, and
  neither the file nor its temporary name is left;
- `python -m precis capture` streaming to disk, stopped between batches (after its second progress
  line): ended by the signal, nothing in the output's directory (no spill files, no output) or TMPDIR;
- precis.torch.capture(out=...) stopped while it makes the output from its spill files (inside the
  third array's write): the same.
(`precis run` and `precis gen`: tests/py/test_interrupt.py.)
"""
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "py"))
import scratch  # noqa: E402  (tests/py/scratch.py: scratch under the build tree, removed on a signal)
from cli_checks import FAILURES, PRECIS, check  # noqa: E402

try:
    import numpy as np
    import torch
    import transformers
except ImportError as e:
    print(f"SKIP: {e} (cmake/python-test-requirements.txt)", file=sys.stderr)
    sys.exit(1 if os.environ.get("CI") == "true" else 77)

BUILD = os.path.abspath(os.environ.get("PRECIS_BUILD_DIR", "build"))
STAGE = os.environ.get("PRECIS_PY_STAGE") or os.path.join(BUILD, "python")
sys.path.insert(0, STAGE)
import precis.torch as pt  # noqa: E402

STOP = {signal.SIGTERM: 143, signal.SIGINT: 130}


def listing(d):
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def stop_when(proc, marker_seen, sig, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None and not marker_seen():
        time.sleep(0.02)
    if proc.poll() is not None:
        return False
    proc.send_signal(sig)
    try:
        proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        check(False, f"did not stop within 120 s of {signal.Signals(sig).name}")
    return True


def import_model(tmp, sig):
    # 24 layers of [1536, 576]: each takes a visible time (reference dgemm of 256 tokens).
    ckpt = os.path.join(tmp, "big.safetensors")
    if not os.path.exists(ckpt):
        rng = np.random.default_rng(0)
        pt._write_safetensors(ckpt, {f"model.layers.{i}.mlp.up_proj.weight": rng.standard_normal((1536, 576), np.float32)
                                     for i in range(24)})
    out_dir = os.path.join(tmp, f"import-{sig}")
    os.makedirs(out_dir)
    out = os.path.join(out_dir, "model.h5")
    proc = subprocess.Popen([PRECIS, "import", "--model", ckpt, "--tokens", "256", "--batch", "4", "-o", out],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    started = stop_when(proc, lambda: listing(out_dir) != [], sig)
    err = proc.stderr.read()
    check(started, f"import {signal.Signals(sig).name}: ended before anything was written ({err[-300:]})")
    check(proc.returncode == STOP[sig], f"import {signal.Signals(sig).name}: exit {proc.returncode}, expected {STOP[sig]}")
    check(listing(out_dir) == [], f"import {signal.Signals(sig).name}: left {listing(out_dir)}")


def verify_cli(tmp, model_dir, ids_path, sig):
    out = os.path.join(tmp, f"verify-{sig}")
    tmpdir = os.path.join(tmp, f"tmpdir-{sig}")
    os.makedirs(tmpdir)
    env = dict(os.environ, TMPDIR=tmpdir, PYTHONPATH=STAGE + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-m", "precis", "verify", "--model", model_dir, "--plan",
                             os.path.join(tmp, "plan.json"), "--inputs", ids_path, "--batch-size", "1", "-o", out],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True)
    reader.start()
    started = stop_when(proc, lambda: any("batch 1/" in ln for ln in lines), sig)
    reader.join(timeout=10)
    name = signal.Signals(sig).name
    check(started, f"verify {name}: ended before its first batch was done: {''.join(lines)[-600:]}")
    check(proc.returncode == STOP[sig], f"verify {name}: exit {proc.returncode}, expected {STOP[sig]}: {''.join(lines)[-600:]}")
    check(listing(out) == [] and listing(tmpdir) == [], f"verify {name}: left {listing(out)} in -o, {listing(tmpdir)} in TMPDIR")
    check(any("batch 1/" in ln and "left" in ln for ln in lines), "verify prints its progress (batch, tokens, time left)")


CAPTURE_CHILD = r"""
import os, signal, sys
sys.path.insert(0, sys.argv[1])
import numpy as np, precis.torch as pt
real = np.savez
def savez(f, **arrays):  # the signal arrives in the middle of the write
    f.write(b"PK partial")
    f.flush()
    os.kill(os.getpid(), int(sys.argv[3]))
    real(f, **arrays)
pt.np.savez = savez
pt.write_arrays(sys.argv[2], {"layer": np.ones((4, 8, 16), np.float32)})
print("not reached")
"""


def capture_save(tmp, sig):
    d = os.path.join(tmp, f"capture-{sig}")
    os.makedirs(d)
    p = subprocess.run([sys.executable, "-c", CAPTURE_CHILD, STAGE, os.path.join(d, "acts.npz"), str(int(sig))],
                       capture_output=True, text=True)
    name = signal.Signals(sig).name
    check(p.returncode in (-sig, STOP[sig]), f"capture save {name}: exit {p.returncode}, expected death by the signal "
                                             f"({p.stderr[-400:]})")
    check("not reached" not in p.stdout, f"capture save {name}: the write went on after the signal")
    check(listing(d) == [], f"capture save {name}: left {listing(d)}")


def capture_stream_cli(tmp, model_dir, ids_path, sig):
    d = os.path.join(tmp, f"capture-stream-{sig}")
    tmpdir = os.path.join(tmp, f"capture-tmpdir-{sig}")
    os.makedirs(d)
    os.makedirs(tmpdir)
    env = dict(os.environ, TMPDIR=tmpdir, PYTHONPATH=STAGE + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-m", "precis", "capture", "--model", model_dir, "--inputs", ids_path,
                             "--batch-size", "1", "-o", os.path.join(d, "acts.npz"), "--gradients",
                             os.path.join(d, "grads.npz"), "--outputs", os.path.join(d, "out.npy")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True)
    reader.start()
    spilled = []

    def second_batch():
        if any("batch 2/" in ln for ln in lines):
            spilled.extend(listing(d))  # the spill directory, while capture runs
            return True
        return False
    started = stop_when(proc, second_batch, sig)
    reader.join(timeout=10)
    name = signal.Signals(sig).name
    check(started, f"capture {name}: ended before its second batch: {''.join(lines)[-600:]}")
    check(any(".spill-" in n for n in spilled), f"capture streams into a spill directory beside -o: {spilled}")
    check(proc.returncode in (-sig, STOP[sig]), f"capture {name}: exit {proc.returncode}, expected death by the "
                                                f"signal: {''.join(lines)[-600:]}")
    check(listing(d) == [] and listing(tmpdir) == [], f"capture {name}: left {listing(d)} beside -o, "
                                                       f"{listing(tmpdir)} in TMPDIR")


STREAM_CHILD = r"""
import os, signal, sys
sys.path.insert(0, sys.argv[1])
import numpy as np, torch, transformers, precis.torch as pt
model = transformers.AutoModelForCausalLM.from_pretrained(sys.argv[2], dtype="float32").eval()
ids = torch.from_numpy(np.load(sys.argv[3])[:6])
real, calls = pt._npy_header, []
def header(f, shape):  # the signal arrives while the output is made from the spill files
    calls.append(shape)
    if len(calls) == 3:
        os.kill(os.getpid(), int(sys.argv[5]))
    real(f, shape)
pt._npy_header = header
pt.capture(model, [ids[i:i + 2] for i in range(0, 6, 2)], out=sys.argv[4])
print("not reached")
"""


def capture_stream_assembly(tmp, model_dir, ids_path, sig):
    d = os.path.join(tmp, f"capture-assembly-{sig}")
    os.makedirs(d)
    p = subprocess.run([sys.executable, "-c", STREAM_CHILD, STAGE, model_dir, ids_path, os.path.join(d, "acts.npz"),
                        str(int(sig))], capture_output=True, text=True)
    name = signal.Signals(sig).name
    check(p.returncode in (-sig, STOP[sig]) and "not reached" not in p.stdout,
          f"capture(out=) {name} while writing: exit {p.returncode} ({p.stderr[-400:]})")
    check(listing(d) == [], f"capture(out=) {name} while writing: left {listing(d)}")


def main():
    tmp = scratch.mkdtemp(prefix="precis-interrupt-model-")
    try:
        torch.manual_seed(0)
        config = transformers.LlamaConfig(vocab_size=500, hidden_size=96, intermediate_size=160, num_hidden_layers=2,
                                          num_attention_heads=6, num_key_value_heads=2, max_position_embeddings=64,
                                          tie_word_embeddings=True, architectures=["LlamaForCausalLM"])
        model = transformers.LlamaForCausalLM(config).eval()
        model_dir = os.path.join(tmp, "model")
        model.save_pretrained(model_dir)
        ids_path = os.path.join(tmp, "ids.npy")
        np.save(ids_path, np.random.default_rng(1).integers(0, 500, (400, 32)).astype(np.int64))
        with open(os.path.join(tmp, "plan.json"), "w") as f:
            f.write('{"*": "bf16"}')
        for sig in (signal.SIGTERM, signal.SIGINT):
            capture_save(tmp, sig)
            capture_stream_cli(tmp, model_dir, ids_path, sig)
            capture_stream_assembly(tmp, model_dir, ids_path, sig)
            import_model(tmp, sig)
            verify_cli(tmp, model_dir, ids_path, sig)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
