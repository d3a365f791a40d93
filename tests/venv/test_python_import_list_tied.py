"""precis import --model DIR --list lists what the import makes, on a causal LM with tied embeddings
(the checkpoint has no lm_head.weight: its output projection is model.embed_tokens.weight):

- with --activations (a precis.torch capture that holds lm_head's inputs), the list names exactly
  the layers, with their [out, in] shapes, that the import with the same capture writes as workloads,
  lm_head (vocab x hidden) among them;
- without --activations, the layers the list gives unmarked are exactly those an import without a
  capture writes (generated activations: no output projection), and lm_head is listed too, marked
  as tied and imported only with --activations (it was missing from the list while the import with a
  capture made it);
- --exclude lm_head and a --layers that does not name it leave it out of both.

The model is seeded and Llama-like: hidden 576, 9 heads over 3 KV heads, vocabulary 3001 (not a
multiple of 128), tie_word_embeddings, saved with transformers (safetensors).
"""
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "py"))
from cli_checks import FAILURES, PRECIS, check  # noqa: E402
import scratch  # noqa: E402  (tests/py/scratch.py: scratch under the build tree, removed on a signal)

try:
    import h5py
    import torch
    import transformers
    from safetensors import safe_open
except ImportError as e:
    print(f"SKIP: {e} (cmake/python-test-requirements.txt)", file=sys.stderr)
    sys.exit(1 if os.environ.get("CI") == "true" else 77)

BUILD = os.path.abspath(os.environ.get("PRECIS_BUILD_DIR", "build"))
sys.path.insert(0, os.environ.get("PRECIS_PY_STAGE") or os.path.join(BUILD, "python"))
import precis.torch as pt  # noqa: E402

VOCAB, HIDDEN = 3001, 576
MARK = "imported only with --activations"


def run(args, expect=0):
    p = subprocess.run([PRECIS] + args, capture_output=True, text=True)
    if p.returncode != expect:
        raise SystemExit(f"precis {' '.join(args)}: exit {p.returncode}, expected {expect}: {p.stderr[-2000:]}")
    return p


def listing(args):
    """{name: (shape text, marked)} of precis import --list."""
    out = {}
    for line in run(["import", *args, "--list"]).stdout.splitlines():
        fields = line.split("\t")
        out[fields[0]] = (fields[1], MARK in line)
    return out


def imported(path):
    """{workload: "OUTxIN"} of a dataset precis import wrote (b is [in, out])."""
    with h5py.File(path, "r") as f:
        return {name: "%dx%d" % (g["b"].shape[1], g["b"].shape[0]) for name, g in f["workloads"].items()}


def check_all(tmp):
    torch.manual_seed(38)
    config = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=1536, num_hidden_layers=2,
                                      num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=64,
                                      tie_word_embeddings=True)
    model = transformers.LlamaForCausalLM(config).eval()
    ckpt = os.path.join(tmp, "tied")
    model.save_pretrained(ckpt, safe_serialization=True)
    with safe_open(os.path.join(ckpt, "model.safetensors"), "pt") as f:
        check("lm_head.weight" not in f.keys() and "model.embed_tokens.weight" in f.keys(),
              f"a tied checkpoint: {sorted(f.keys())[:4]}...")
    ids = torch.randint(0, VOCAB, (2, 8), generator=torch.Generator().manual_seed(1))
    acts = os.path.join(tmp, "acts.npz")
    pt.capture(model, [ids], gradients=False).save(acts)

    with_acts = listing(["--model", ckpt, "--activations", acts])
    ds = os.path.join(tmp, "captured.h5")
    run(["import", "--model", ckpt, "--activations", acts, "-o", ds, "-q"])
    made = imported(ds)
    check({n: s for n, (s, _) in with_acts.items()} == made,
          f"--list --activations {sorted(with_acts)} is not what the import made {sorted(made)}")
    check(made.get("lm_head") == f"{VOCAB}x{HIDDEN}" and len(made) == 15, f"7 layers x 2 and lm_head: {made}")
    check(not any(marked for _, marked in with_acts.values()), f"nothing marked with --activations: {with_acts}")

    without = listing(["--model", ckpt])
    ds = os.path.join(tmp, "generated.h5")
    run(["import", "--model", ckpt, "--tokens", "4", "-o", ds, "-q"])
    made = imported(ds)
    check({n: s for n, (s, marked) in without.items() if not marked} == made,
          f"--list's unmarked layers {sorted(without)} are not what an import without a capture made {sorted(made)}")
    check(without.get("lm_head") == (f"{VOCAB}x{HIDDEN}", True) and "lm_head" not in made,
          f"--list without --activations shows the tied lm_head, marked: {without.get('lm_head')}")
    line = [x for x in run(["import", "--model", ckpt, "--list"]).stdout.splitlines() if x.startswith("lm_head\t")]
    check(line and "tied to model.embed_tokens.weight" in line[0], f"the tied head's line names its weight: {line}")

    for args in (["--exclude", "lm_head"], ["--layers", "model.layers.*"]):
        check("lm_head" not in listing(["--model", ckpt, *args]) and
              "lm_head" not in listing(["--model", ckpt, "--activations", acts, *args]), f"{args} leaves lm_head out")


def main():
    tmp = scratch.mkdtemp(prefix="precis-list-tied-")
    try:
        check_all(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if FAILURES:
        raise SystemExit(f"{len(FAILURES)} failures")
    print("ok: import --list lists the tied lm_head the import makes")


if __name__ == "__main__":
    main()
