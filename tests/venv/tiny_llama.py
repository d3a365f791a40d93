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
