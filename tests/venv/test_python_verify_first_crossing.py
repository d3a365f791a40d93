"""precis.verify's first crossing is judged on the worst over samples, as documented (docs/verify.md,
verify(layer_threshold=...): "the cumulative rel_fro (worst over samples) whose first crossing is
reported"), not on the mean: a layer whose worst sample is over the threshold while the mean is
under it is the first crossing when no earlier layer is over.

On a seeded Llama-like causal LM (hidden 96, grouped KV heads, tied embeddings), fp8 on every
linear layer, 6 samples: a first verify() gives each layer's cumulative rel_fro; the first layer's
per-sample values are recomputed here (precis.emulate of the reference input against a.W in
float64, one sample at a time), so that its worst and mean are known independently of verify; the
threshold is then set halfway between that mean and that worst, and a second verify() must name the
first layer as the first crossing, at its worst value. Judged on the mean, the crossing would be a
later layer or none.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "py"))
from cli_checks import FAILURES, check  # noqa: E402

try:
    import numpy as np
    import torch
    import transformers
except ImportError as e:
    print(f"SKIP: {e} (cmake/python-test-requirements.txt)", file=sys.stderr)
    sys.exit(1 if os.environ.get("CI") == "true" else 77)

BUILD = os.path.abspath(os.environ.get("PRECIS_BUILD_DIR", "build"))
sys.path.insert(0, os.environ.get("PRECIS_PY_STAGE") or os.path.join(BUILD, "python"))
import precis  # noqa: E402
from precis import verify  # noqa: E402


def small_llama():
    torch.manual_seed(38)
    config = transformers.LlamaConfig(vocab_size=200, hidden_size=96, intermediate_size=160, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                      tie_word_embeddings=True)
    return transformers.LlamaForCausalLM(config).eval()


def main():
    model = small_llama()
    ids = np.random.default_rng(38).integers(0, 200, (6, 16))
    plan = {"model.layers.*": "fp8"}
    first = verify.verify(model, plan, ids, isolated=False, layer_threshold=1e30)
    layers = [e["layer"] for e in first.per_layer]
    check(first.report["verify"]["first_crossing"] is None, "nothing crosses 1e30")
    name = layers[0]

    # The first layer, independently: its input is the reference model's (a forward pre-hook of this
    # test's own on a plain forward); per sample, the relative Frobenius norm of the emulated GEMM
    # against a.W in float64.
    module = dict(model.named_modules())[name]
    seen = []
    hook = module.register_forward_pre_hook(lambda m, args: seen.append(args[0].detach().numpy().copy()))
    try:
        with torch.no_grad():
            model(torch.from_numpy(ids))
    finally:
        hook.remove()
    inputs = seen[0]
    w = dict(model.named_modules())[name].weight.detach().numpy()
    a = inputs.reshape(len(ids), -1, inputs.shape[-1])
    c_ref = a.astype(np.float64) @ w.T.astype(np.float64)
    c_q = np.asarray(precis.emulate(a.reshape(-1, a.shape[-1]), np.ascontiguousarray(w.T), "fp8"),
                     np.float64).reshape(c_ref.shape)
    rel = np.linalg.norm((c_q - c_ref).reshape(len(ids), -1), axis=1) / np.linalg.norm(c_ref.reshape(len(ids), -1), axis=1)
    got = first.per_layer[0]["cumulative"]["rel_fro"]
    check(abs(got["worst"] - rel.max()) <= 1e-9 * rel.max() and abs(got["mean"] - rel.mean()) <= 1e-9 * rel.mean(),
          f"{name}: verify's worst/mean {got}, recomputed {rel.max()} / {rel.mean()}")
    check(rel.max() > (1 + 1e-6) * rel.mean(), f"{name}: the samples differ (worst {rel.max()}, mean {rel.mean()})")

    threshold = (rel.max() + rel.mean()) / 2
    second = verify.verify(model, plan, ids, isolated=False, layer_threshold=threshold)
    fc = second.report["verify"]["first_crossing"]
    check(fc is not None and fc["layer"] == name and fc["depth"] == 0 and abs(fc["rel_fro"] - rel.max()) <= 1e-9 * rel.max(),
          f"threshold {threshold} between {name}'s mean {rel.mean()} and worst {rel.max()}: first crossing {fc}, "
          f"expected {name} (judged on the worst over samples)")
    if FAILURES:
        raise SystemExit(f"{len(FAILURES)} failures")
    print(f"ok: first crossing {fc['layer']} at {fc['rel_fro']:.4g} (threshold {threshold:.4g}, mean {rel.mean():.4g})")


if __name__ == "__main__":
    main()
