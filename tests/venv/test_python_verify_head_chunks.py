"""verify computes the logits layer apart from the model's forward, a chunk of sequences at a time
(issue 40, docs/decisions.md "the head in chunks"): a batch's body runs at once (every other layer's
work on its weights once per batch), the head's outputs of a large vocabulary a few sequences at a
time. The figures must be those of the whole model run batch by batch, bit for bit:

- a Llama shaped like a small real one (hidden 576, 9 query heads over 3 KV heads, tied embeddings,
  a 32000-word head) under a plan mixing int8 (row scales), fp8 (a tensor scale over the batch), bf16,
  its head in int8: the end-to-end metrics and per-sample figures, every per-layer row (isolated and
  cumulative, the head's measured once per batch on the rows of all its chunks) and both models'
  outputs equal those of the whole-model path (the probe made to say no), with chunks of 2 and of 1,
  with every row and with a subsample of rows over two batches, with the head left out of the plan,
  and for the same model in bf16 (verify's float32 copy runs: its layers are the ones checked);
- the same with --reference fp64 (also of a model that casts its logits to float32, as older
  transformers did: its float64 model runs whole per chunk), with a reference read from
  --save-reference's file, and with the noise floor's alternatives (target=sm_89, sum=fp64) and
  float64 reference;
- a model that transforms its logits after the head (soft-capping, as Gemma 2 does) is not chunked:
  the probe says so, report.json's verify.head_chunk is null, and its figures are its own; one that
  does so only past the probe's one sequence is refused, saying why (no wrong figure).
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_python_verify_isolated as iso  # noqa: E402  (the staged package, torch and transformers)
from cli_checks import FAILURES, check  # noqa: E402
import scratch  # noqa: E402

np, torch, transformers = iso.np, iso.torch, iso.transformers
verify, pt = iso.verify, iso.pt

PLAN = {"lm_head": "int8", "*.self_attn.q_proj": "fp8", "*.mlp.down_proj": "bf16", "*": "int8"}


def llama(vocab=32000):
    torch.manual_seed(5)
    config = transformers.LlamaConfig(vocab_size=vocab, hidden_size=576, intermediate_size=1536, num_hidden_layers=2,
                                      num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=128,
                                      tie_word_embeddings=True)
    model = transformers.LlamaForCausalLM(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.mul_(3.0)
    return model


class SoftCapped(transformers.LlamaForCausalLM):
    """Logits soft-capped after the head, as Gemma 2's final_logit_softcapping does."""

    def forward(self, *args, **kwargs):
        out = super().forward(*args, **kwargs)
        out.logits = 30.0 * torch.tanh(out.logits / 30.0)
        return out


class CastsToFloat(transformers.LlamaForCausalLM):
    """Logits cast to float32 after the head, as older transformers' Llama did: the same tensor for
    the float32 model, a new one for the float64 model of --reference fp64."""

    def forward(self, *args, **kwargs):
        out = super().forward(*args, **kwargs)
        out.logits = out.logits.float()
        return out


class CapsBatches(SoftCapped):
    """Soft-caps only a batch of more than one sequence: the probe's one sequence passes."""

    def forward(self, *args, **kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        return super().forward(*args, **kwargs) if ids.shape[0] > 1 else transformers.LlamaForCausalLM.forward(
            self, *args, **kwargs)


def run(model, ids, chunk, **kw):
    """verify with the head in chunks of `chunk` sequences (None: the probe made to say no, the model
    run whole batch by batch, as before the head was chunked)."""
    orig_probe, orig_choose = verify._head_in_chunks, verify.choose_batch

    def choose(estimate, *a, **k):
        b = orig_choose(estimate, *a, **k)
        if estimate.head is not None:
            estimate.max_chunk = chunk
        return b
    try:
        if chunk is None:
            verify._head_in_chunks = lambda *a: False
        verify.choose_batch = choose
        return verify.verify(model, kw.pop("plan", PLAN), ids, batch_size=kw.pop("batch_size", 6), keep_outputs=True, **kw)
    finally:
        verify._head_in_chunks, verify.choose_batch = orig_probe, orig_choose


def same(got, want, what):
    g, w = got.report, want.report
    check(g["verify"]["head_chunk"] is not None and w["verify"]["head_chunk"] is None,
          f"{what}: chunked ({g['verify']['head_chunk']}) against whole ({w['verify']['head_chunk']})")
    check(g["end_to_end"]["metrics"] == w["end_to_end"]["metrics"], f"{what}: the end-to-end metrics are equal")
    check(g["end_to_end"]["per_sample"] == w["end_to_end"]["per_sample"], f"{what}: the per-sample figures are equal")
    check(g["end_to_end"].get("noise_floor") == w["end_to_end"].get("noise_floor"), f"{what}: the noise floor is equal")
    rows_g = {r["layer"]: r for r in g["rows"]}
    rows_w = {r["layer"]: r for r in w["rows"]}
    check(sorted(rows_g) == sorted(rows_w), f"{what}: the same per-layer rows")
    equal = sum(iso.same_row(rows_g[n], rows_w[n], f"{what}, {n}") for n in rows_w if n in rows_g)
    check(equal == len(rows_w), f"{what}: {equal} of {len(rows_w)} isolated rows equal")
    check(g["per_layer"] == w["per_layer"], f"{what}: the per-layer sections (cumulative rows) are equal")
    check(np.array_equal(got.reference_outputs, want.reference_outputs)
          and np.array_equal(got.emulated_outputs, want.emulated_outputs), f"{what}: both models' outputs are equal")


def main():
    tmp = scratch.mkdtemp(prefix="precis-verify-head-chunks-")
    try:
        model = llama()
        ids = np.random.default_rng(7).integers(0, 32000, (6, 32)).astype(np.int64)
        modules = {n: (m, im) for n, m, im in pt.linear_layers(model)}
        check(verify._head_in_chunks(model, "lm_head", modules, ids), "the Llama's logits are its head's output: chunked")

        whole = run(model, ids, None)
        check(whole.report["verify"]["batch_size"] == 6, "one batch of 6")
        for chunk in (2, 1):
            got = run(model, ids, chunk)
            check(got.report["verify"]["head_chunk"] == chunk, f"the head {chunk} sequences at a time")
            same(got, whole, f"head chunks of {chunk}")
        same(run(model, ids, 4, layer_rows="all"), run(model, ids, None, layer_rows="all"), "every row, chunks of 4 of 6")
        # The per-layer rows on a subsample (4 tokens of each window), batches of 4 and 2, chunks of 3.
        sub = run(model, ids, 3, batch_size=4, layer_rows=24)
        check(sub.report["verify"]["layer_rows"]["positions"] != "all" and sub.report["verify"]["batch_size"] == 4,
              "a subsample of rows, two batches")
        same(sub, run(model, ids, None, batch_size=4, layer_rows=24), "--layer-rows 24, batches of 4, chunks of 3")
        # The head left out of the plan: computed by torch on both models' hidden states, apart all the same.
        no_head = {"lm_head": None, "*.self_attn.q_proj": "fp8", "*": "int8"}
        same(run(model, ids, 2, plan=no_head), run(model, ids, None, plan=no_head), "the head not planned")
        # A bf16 model: verify's float32 copy runs, and its layers are the ones checked.
        half = llama().to(torch.bfloat16)
        got, want = run(half, ids, 2), run(half, ids, None)
        check(len(got.report["rows"]) == len(pt.resolve_plan(half, PLAN)) and all(e.get("called") for e in got.per_layer),
              f"a bf16 model: a row per planned layer ({len(got.report['rows'])})")
        same(got, want, "a bf16 model")

        same(run(model, ids, 2, reference="fp64"), run(model, ids, None, reference="fp64"), "--reference fp64")
        # A float64 model whose forward casts its logits: its whole forward per chunk instead.
        casts = CastsToFloat(model.config).eval()
        casts.load_state_dict(model.state_dict())
        same(run(casts, ids, 2, reference="fp64"), run(casts, ids, None, reference="fp64"),
             "--reference fp64 of a model that casts its logits")
        saved = os.path.join(tmp, "reference.h5")
        run(model, ids, None, save_reference=saved)
        same(run(model, ids, 4, reference=saved), run(model, ids, None, reference=saved), "a saved reference")
        noise = ["target=sm_89", "sum=fp64", "reference=fp64"]
        # A bf16 head: its alternatives' sums differ from the plan's (an int8 head's are exact either way).
        plan = dict(PLAN, lm_head="bf16")
        same(run(model, ids, 2, plan=plan, noise=noise), run(model, ids, None, plan=plan, noise=noise),
             "the noise floor's alternatives")

        # The default: as many sequences per chunk as fit half of a batch's budget.
        default = verify.verify(model, PLAN, ids, batch_size=6)
        v = default.report["verify"]
        check(v["head_chunk"] is not None and 1 <= v["head_chunk"] <= v["batch_size"]
              and v["memory_estimate"]["head_chunk"] == v["head_chunk"], f"by default the head is chunked: {v['head_chunk']}")
        check(default.end_to_end["metrics"] == whole.end_to_end["metrics"] and default.report["per_layer"] == whole.report["per_layer"],
              "the default's figures are the whole path's")

        capped = SoftCapped(model.config).eval()
        capped.load_state_dict(model.state_dict())
        check(not verify._head_in_chunks(capped, "lm_head", {n: (m, im) for n, m, im in pt.linear_layers(capped)}, ids),
              "soft-capped logits are not the head's output: the probe says so")
        res = verify.verify(capped, PLAN, ids, batch_size=6)
        check(res.report["verify"]["head_chunk"] is None and res.report["verify"]["memory_estimate"]["head_chunk"] == 6,
              "a soft-capped model runs whole, batch by batch")
        check(res.end_to_end["metrics"] != whole.end_to_end["metrics"], "and its figures are its own (the cap changes them)")

        tricky = CapsBatches(model.config).eval()
        tricky.load_state_dict(model.state_dict())
        try:
            verify.verify(tricky, PLAN, ids, batch_size=6)
            check(False, "a model that changes its logits past the probe is refused")
        except verify.VerifyError as e:
            check("are not its head's output unchanged" in str(e) and "6 sequences" in str(e),
                  f"a model that changes its logits past the probe is refused, saying why: {e}")
    finally:
        scratch.remove()
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
