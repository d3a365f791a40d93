"""verify on a model under accelerate's device_map, part of it offloaded (issue 40, DESIGN §20): a
Llama built here (hidden 96, grouped KV heads, tied embeddings) saved, then loaded with
device_map = the embeddings, layer 0 and the norm on the CPU, layer 1 and the head offloaded to
disk (accelerate moves their weights in for each forward and out again).

- the plan is emulated where each layer lives: the offloaded layers too (their GEMM output inside
  the emulated model is precis.emulate of their input, bit for bit, as for the model in memory);
- verify's report (end to end, per layer: isolated rows and cumulative errors) equals the one of
  the same model loaded whole, in every metric;
- the offloaded weights stay offloaded (meta tensors) after verify.
The CUDA path (layers on GPUs, tensors passed by DLPack) has not run on a GPU: not tested here.
"""
import os
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "py"))
import scratch  # noqa: E402  (tests/py/scratch.py: scratch under the build tree, removed on a signal)
from cli_checks import FAILURES, check  # noqa: E402

try:
    import accelerate  # noqa: F401
    import numpy as np
    import torch
    import transformers
except ImportError as e:
    print(f"SKIP: {e} (cmake/python-test-requirements.txt)", file=sys.stderr)
    sys.exit(1 if os.environ.get("CI") == "true" else 77)

BUILD = os.path.abspath(os.environ.get("PRECIS_BUILD_DIR", "build"))
STAGE = os.environ.get("PRECIS_PY_STAGE") or os.path.join(BUILD, "python")
sys.path.insert(0, STAGE)
import precis  # noqa: E402
import precis.torch as pt  # noqa: E402
from precis import verify  # noqa: E402

PLAN = {"model.layers.1.self_attn.q_proj": "fp8", "*": "int8"}


def main():
    tmp = scratch.mkdtemp(prefix="precis-device-map-")
    try:
        torch.manual_seed(2)
        config = transformers.LlamaConfig(vocab_size=700, hidden_size=96, intermediate_size=160, num_hidden_layers=2,
                                          num_attention_heads=6, num_key_value_heads=2, max_position_embeddings=64,
                                          tie_word_embeddings=True)
        whole = transformers.LlamaForCausalLM(config).eval()
        with torch.no_grad():
            for p in whole.parameters():
                if p.dim() == 2:
                    p.mul_(3.0)
        model_dir = os.path.join(tmp, "model")
        whole.save_pretrained(model_dir)
        device_map = {"model.embed_tokens": "cpu", "model.layers.0": "cpu", "model.norm": "cpu", "model.rotary_emb": "cpu",
                      "model.layers.1": "disk", "lm_head": "cpu"}
        mapped = transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype="float32", device_map=device_map,
                                                                   offload_folder=os.path.join(tmp, "offload")).eval()
        q_weight = dict(mapped.named_modules())["model.layers.1.self_attn.q_proj"].weight
        check(q_weight.device.type == "meta", f"layer 1 is offloaded (its weight on {q_weight.device})")
        ids = np.random.default_rng(4).integers(0, 700, (6, 32)).astype(np.int64)

        # The offloaded layers are emulated where they live: their output is precis.emulate of their input.
        seen = {}
        hooks = [m.register_forward_hook(lambda mod, args, y, n=n: seen.__setitem__(n, (args[0].detach().clone(),
                                                                                        y.detach().clone())))
                 for n, m in mapped.named_modules() if n in ("model.layers.1.self_attn.q_proj", "model.layers.1.mlp.down_proj")]
        with torch.no_grad(), pt.emulate(mapped, PLAN):
            mapped(torch.from_numpy(ids))
        for h in hooks:
            h.remove()
        ref = dict(whole.named_modules())
        for name, (x, y) in seen.items():
            b = np.ascontiguousarray(ref[name].weight.detach().numpy().T)
            recipe = "fp8" if name.endswith("q_proj") else "int8"
            want = np.asarray(precis.emulate(x.reshape(-1, x.shape[-2], x.shape[-1]).numpy(), b, recipe), np.float32)
            check(np.array_equal(y.numpy().reshape(want.shape).view(np.uint32), want.view(np.uint32)),
                  f"{name} ({recipe}), offloaded: emulated output is precis.emulate of its input")
        check(len(seen) == 2, f"the offloaded layers ran: {sorted(seen)}")

        got = verify.verify(mapped, PLAN, ids, batch_size=6)
        want = verify.verify(whole, PLAN, ids, batch_size=6)
        check(got.end_to_end["metrics"] == want.end_to_end["metrics"],
              f"end to end: device_map {got.end_to_end['metrics']} vs whole {want.end_to_end['metrics']}")
        g = {r["layer"]: r for r in got.report["rows"]}
        w = {r["layer"]: r for r in want.report["rows"]}
        check(sorted(g) == sorted(w) and len(g) == 15, f"isolated rows: {len(g)} of 15 layers")
        for n in w:
            check(g.get(n, {}).get("error") == w[n]["error"], f"{n}: isolated row differs under device_map")
        cum_g = [e["cumulative"]["rel_fro"] for e in got.per_layer]
        cum_w = [e["cumulative"]["rel_fro"] for e in want.per_layer]
        check(cum_g == cum_w, "cumulative errors equal")
        check(q_weight.device.type == "meta", "layer 1 stays offloaded after verify")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
