"""The seeded tiny Llama the Python-package tests build (transformers' own config classes, no download):
grouped KV heads (4 query heads over 2), weights scaled up so that the logits are far from uniform."""
import torch
import transformers


def tiny_llama(layers=3, tied=False):
    """LlamaForCausalLM in eval mode, the same weights for the same arguments."""
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=layers,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                      tie_word_embeddings=tied)
    model = transformers.LlamaForCausalLM(config).eval()
    with torch.no_grad():  # larger than the default init, so that the logits are far from uniform
        for p in model.parameters():
            if p.dim() == 2:
                p.mul_(4.0)
    return model


def seeded_gqa_llama(layers=2, attn="eager"):
    """A LlamaForCausalLM shaped like a small real one: hidden 576 (not a multiple of 128), 9 query heads over
    3 KV heads of 64, tied embeddings, a vocabulary of 1000; Q, K and V projections scaled up so that a
    quantized KV cache rounds visibly (the model of test_python_kvcache_llama.py)."""
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=1000, hidden_size=576, intermediate_size=1536, num_hidden_layers=layers,
                                      num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=128,
                                      tie_word_embeddings=True, attn_implementation=attn)
    model = transformers.LlamaForCausalLM(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 2 and ("k_proj" in name or "v_proj" in name or "q_proj" in name):
                p.mul_(8.0)
    return model


def sampled_tokens(model, samples, tokens, seed):
    """Token ids [samples, tokens] (int64 NumPy) drawn from the model itself, one position at a time from its
    full softmax (no top-k, temperature 1), the first token uniform; the same ids for the same arguments. On
    the model's own text a plan's delta cross-entropy has the expectation a trained model's has on its own
    data, KL(reference || plan) >= 0; on uniformly random tokens it is a zero-mean quantity of either sign
    (docs/decisions.md, "The noise floor")."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, model.config.vocab_size, (samples, 1), generator=g)
    with torch.no_grad():
        for _ in range(tokens - 1):
            p = torch.softmax(model(input_ids=ids).logits[:, -1].double(), -1)
            ids = torch.cat([ids, torch.multinomial(p, 1, generator=g)], 1)
    return ids.numpy()
