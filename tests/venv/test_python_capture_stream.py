"""Capture streamed to disk (issue 40, DESIGN §20): `python -m precis capture` and
precis.torch.capture(out=...) append each batch's arrays to temporary files and make the output
files from them at the end. What they write must be what capture held in memory and wrote with
today's writers (np.savez, the safetensors writer, np.save): the same bytes.

A seeded Llama (hidden 96, intermediate 160, GQA 6/2, tied head, vocabulary 3000), 10 windows of
16 tokens:
- the CLI in batches of 3 (--gradients, --outputs; .npz, a directory) against
  precis.torch.capture in memory on the same batches written by write_arrays / np.save: every .npz
  member, every safetensors byte, every .npy file equal;
- precis.torch.capture(out=..., pack=True) (.safetensors) on padded batches with an attention mask (rows carried
  between batches) against the in-memory capture's save();
- a streamed Captured holds no array in memory (its arrays() refuses), and nothing but the outputs
  is left in their directory; without grads_out / outputs_out neither is computed;
- the estimate and a progress line per batch on stderr (batch i/N, tokens, time left), nothing under -q;
- --max-memory: the batch is the most sequences whose estimate fits; under one sequence's figure
  capture refuses naming it (exit 2, no file written).
"""
import filecmp
import os
import shutil
import subprocess
import sys
import zipfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "py"))
import scratch  # noqa: E402  (tests/py/scratch.py: scratch under the build tree, removed on a signal)
from cli_checks import FAILURES, check  # noqa: E402

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
from precis.capture import CaptureEstimate  # noqa: E402
from precis.verify import load_model  # noqa: E402

ENV = dict(os.environ, PYTHONPATH=STAGE + os.pathsep + os.environ.get("PYTHONPATH", ""))


def same_files(a, b):
    """Equal contents: .npz member by member (names, order, bytes), a directory file by file, else byte for byte."""
    if a.endswith(".npz"):
        za, zb = zipfile.ZipFile(a), zipfile.ZipFile(b)
        return za.namelist() == zb.namelist() and all(za.read(n) == zb.read(n) for n in za.namelist())
    if os.path.isdir(a):
        names = sorted(os.listdir(a))
        return names == sorted(os.listdir(b)) and all(filecmp.cmp(os.path.join(a, n), os.path.join(b, n), shallow=False)
                                                      for n in names)
    with open(a, "rb") as fa, open(b, "rb") as fb:
        return fa.read() == fb.read()


def capture_cli(args):
    return subprocess.run([sys.executable, "-m", "precis", "capture", *args], capture_output=True, text=True, env=ENV)


def main():
    tmp = scratch.mkdtemp(prefix="precis-capture-stream-")
    try:
        torch.manual_seed(0)
        config = transformers.LlamaConfig(vocab_size=3000, hidden_size=96, intermediate_size=160, num_hidden_layers=2,
                                          num_attention_heads=6, num_key_value_heads=2, max_position_embeddings=64,
                                          tie_word_embeddings=True, architectures=["LlamaForCausalLM"])
        model_dir = os.path.join(tmp, "model")
        transformers.LlamaForCausalLM(config).save_pretrained(model_dir)
        ids = np.random.default_rng(1).integers(0, 3000, (10, 16)).astype(np.int64)
        ids_path = os.path.join(tmp, "ids.npy")
        np.save(ids_path, ids)
        model, _ = load_model(model_dir)

        # Today's capture: in memory, written by write_arrays (np.savez / safetensors / np.save per layer).
        mem = pt.capture(model, [torch.from_numpy(ids[i:i + 3]) for i in range(0, 10, 3)], source=ids_path)
        ref = os.path.join(tmp, "ref")
        os.makedirs(ref)
        layers = {n: x for n, x in mem.arrays().items() if n != "@outputs"}
        check(len(layers) == 15 and layers["lm_head"].shape == (10, 16, 96), f"in-memory capture: {mem.summary()}")
        np.save(os.path.join(ref, "outputs.npy"), mem.output_array())
        for ext in (".npz", ".safetensors", ""):
            pt.write_arrays(os.path.join(ref, "acts" + ext), layers, mem.meta)
            pt.write_arrays(os.path.join(ref, "grads" + ext), mem.grad_arrays(),
                            dict(mem.meta, arrays="dL/dY at each layer's output"))

        # The CLI: .npz with its progress; a directory under -q (no estimate, no progress, no summary).
        for ext, quiet in ((".npz", False), ("", True)):
            out = os.path.join(tmp, "cli" + (ext or "-dir"))
            os.makedirs(out)
            p = capture_cli(["--model", model_dir, "--inputs", ids_path, "--batch-size", "3", "-o",
                             os.path.join(out, "acts" + ext), "--gradients", os.path.join(out, "grads" + ext),
                             "--outputs", os.path.join(out, "outputs.npy")] + (["-q"] if quiet else []))
            check(p.returncode == 0, f"capture {ext}: exit {p.returncode}: {p.stderr[-800:]}")
            for name in ("acts" + ext, "grads" + ext, "outputs.npy"):
                check(os.path.exists(os.path.join(out, name)) and
                      same_files(os.path.join(ref, name), os.path.join(out, name)),
                      f"capture {ext}: {name} differs from the in-memory capture written by today's writers")
            check(sorted(os.listdir(out)) == sorted(["acts" + ext, "grads" + ext, "outputs.npy"]),
                  f"capture {ext}: left {sorted(os.listdir(out))}")
            lines = [ln for ln in p.stderr.splitlines() if ln.startswith("precis capture:")]
            if quiet:
                check(not lines and not p.stdout, f"capture -q: stderr {lines}, stdout {p.stdout[-200:]!r}")
                continue
            check(any("in 4 batches of 3" in ln and "peak memory ≈" in ln for ln in lines),
                  f"capture prints its estimate before it starts: {lines}")
            for i, tokens in enumerate((48, 96, 144, 160)):
                check(any(f"batch {i + 1}/4: tokens {tokens}/160" in ln and "left" in ln for ln in lines),
                      f"capture prints batch {i + 1}/4's progress: {lines}")
            check("lm_head: [10, 16, 96]" in p.stdout, f"capture's summary: {p.stdout}")

        # --max-memory: the batch is the most sequences whose estimate fits; below one sequence, refused.
        estimate = CaptureEstimate(model, pt._chosen_layers(model, [], [], ""), 16, False, False)
        p = capture_cli(["--model", model_dir, "--inputs", ids_path, "-o", os.path.join(tmp, "limited.npz"),
                         "--max-memory", str(estimate.total(4) + estimate.total(5) >> 1)])
        check(p.returncode == 0 and "in 3 batches of 4" in p.stderr, f"--max-memory between 4 and 5 sequences' "
              f"estimates: exit {p.returncode}: {p.stderr[-600:]}")
        small = os.path.join(tmp, "small.npz")
        p = capture_cli(["--model", model_dir, "--inputs", ids_path, "-o", small, "--max-memory",
                         str(estimate.total(1) - 1)])
        check(p.returncode == 2 and "--max-memory" in p.stderr and "even one sequence per batch needs peak memory ≈"
              in p.stderr and not os.path.exists(small), f"--max-memory under one sequence: exit {p.returncode}: "
              f"{p.stderr[-600:]}")

        # The API: pack=True on padded batches (rows carried between batches), streamed vs in memory.
        mask = np.ones((10, 16), np.int64)
        mask[1, 11:] = 0
        mask[4, 5:] = 0
        batches = [{"input_ids": torch.from_numpy(ids[i:i + 4]), "attention_mask": torch.from_numpy(mask[i:i + 4])}
                   for i in range(0, 10, 4)]
        packed = pt.capture(model, batches, tokens=8, pack=True)
        packed_ref = os.path.join(tmp, "packed-ref.safetensors")
        packed.save(packed_ref, grads=os.path.join(tmp, "packed-ref-g.npz"), outputs=os.path.join(tmp, "packed-ref.npy"))
        api = os.path.join(tmp, "api")
        os.makedirs(api)
        streamed = pt.capture(model, batches, tokens=8, pack=True, out=os.path.join(api, "p.safetensors"),
                              grads_out=os.path.join(api, "g.npz"), outputs_out=os.path.join(api, "o.npy"))
        check(same_files(packed_ref, os.path.join(api, "p.safetensors")) and
              same_files(os.path.join(tmp, "packed-ref-g.npz"), os.path.join(api, "g.npz")) and
              same_files(os.path.join(tmp, "packed-ref.npy"), os.path.join(api, "o.npy")),
              "capture(out=, pack=True) differs from the in-memory capture's save()")
        check(packed.inputs.shape("lm_head")[0] == (160 - 5 - 11) // 8 and packed.dropped_rows == (160 - 16) % 8,
              f"pack=True: {packed.summary()}")
        check(streamed.summary() == packed.summary(), f"summaries differ: {streamed.summary()} / {packed.summary()}")
        check(sorted(os.listdir(api)) == ["g.npz", "o.npy", "p.safetensors"], f"capture(out=) left {os.listdir(api)}")
        check(not streamed.inputs.parts and not streamed.grads.parts, "a streamed capture held arrays in memory")
        # Streamed without grads_out / outputs_out: neither is computed nor spilled, the inputs are the same file.
        only = pt.capture(model, batches, tokens=8, pack=True, out=os.path.join(api, "only.safetensors"))
        inputs_only = os.path.join(tmp, "inputs-only.safetensors")
        pt.capture(model, batches, tokens=8, pack=True, gradients=False, outputs=False).save(inputs_only)
        check(not only.grads.names() and not only.inputs.samples("@outputs") and
              same_files(inputs_only, os.path.join(api, "only.safetensors")),
              f"capture(out=) alone: grads {only.grads.names()}, outputs {only.inputs.samples('@outputs')}")
        os.unlink(os.path.join(api, "only.safetensors"))
        try:
            streamed.arrays()
            check(False, "a streamed Captured's arrays() did not refuse")
        except pt.CaptureError as e:
            check("streamed to" in str(e), f"arrays() of a streamed capture: {e}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
