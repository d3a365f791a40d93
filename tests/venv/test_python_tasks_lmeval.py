"""Task-level acceptance and the lm-evaluation-harness bridge (issue 41, DESIGN §22), on a seeded
Llama (GQA 9/3 heads, hidden 576, tied embeddings, 4096-token head) with a word-level tokenizer
built here (no download):

- precis.tasks: multiple-choice accuracy recomputed with PyTorch (summed log-probabilities of each
  choice given the context, one forward each); generation exact match on targets the reference
  itself produces; McNemar's exact p against SciPy's binomtest; an fp32 "plan" recovers every
  answer and passes recovery>=0.95, an impossible gate fails with exit 3 from the command line;
- precis.lmeval: a local lm-eval task (YAML + a JSONL dataset file, HF_DATASETS_OFFLINE=1) run
  through the bridge under an fp32 plan gives lm-eval's own accuracy of the plain model (HFLM and
  simple_evaluate called here directly), and the int4 plan's run differs from the reference's
  only through the model's answers.
"""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "py"))
import scratch  # noqa: E402  (tests/py/scratch.py: scratch under the build tree, removed on a signal)
from cli_checks import FAILURES, check  # noqa: E402

try:
    import numpy as np
    import scipy.stats
    import tokenizers
    import torch
    import transformers
except ImportError as e:
    print(f"SKIP: {e} (cmake/python-test-requirements.txt)", file=sys.stderr)
    sys.exit(1 if os.environ.get("CI") == "true" else 77)

BUILD = os.path.abspath(os.environ.get("PRECIS_BUILD_DIR", "build"))
STAGE = os.environ.get("PRECIS_PY_STAGE") or os.path.join(BUILD, "python")
sys.path.insert(0, STAGE)
from precis import tasks  # noqa: E402

WORDS = ("the a cat dog sat ran on under mat rug red blue green big small one two three four five is was and "
         "of to in it by with from apple pear plum tree river hill stone road house door").split()


def tokenizer():
    vocab = {w: i for i, w in enumerate(["[PAD]", "[UNK]", "[BOS]", "[EOS]"] + WORDS)}
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tok.decoder = tokenizers.decoders.WordPiece(prefix="##")  # joins words with spaces
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]",
                                                bos_token="[BOS]", eos_token="[EOS]")


def seeded_llama():
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=4096, hidden_size=576, intermediate_size=1536, num_hidden_layers=2,
                                      num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=128,
                                      tie_word_embeddings=True, bos_token_id=2, eos_token_id=3, pad_token_id=0)
    model = transformers.LlamaForCausalLM(config).eval()
    with torch.no_grad():  # logits far from uniform, over the tokenizer's words only
        model.model.embed_tokens.weight[len(WORDS) + 4:] = 0
        model.model.embed_tokens.weight[: len(WORDS) + 4] *= 30
    return model


def mc_items(rng, n=24):
    items = []
    for i in range(n):
        ctx = " ".join(rng.choice(WORDS, 5))
        choices = [" ".join(rng.choice(WORDS, 2)) for _ in range(4)]
        items.append({"id": f"mc{i}", "type": "multiple_choice", "context": ctx, "choices": choices,
                      "answer": int(rng.integers(0, 4))})
    return items


def independent_mc(model, tok, item):
    ctx = tok(item["context"])["input_ids"]
    best, pick = -np.inf, None
    for j, c in enumerate(item["choices"]):
        cont = tok(c, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            lp = torch.log_softmax(model(torch.tensor([ctx + cont])).logits[0].double(), -1)
        ll = sum(lp[len(ctx) - 1 + k, t].item() for k, t in enumerate(cont))
        if ll > best:
            best, pick = ll, j
    return pick == item["answer"]


def check_tasks(model, tok, tmp):
    rng = np.random.default_rng(0)
    items = mc_items(rng)
    # generation: targets the reference produces for half the prompts, another word for the rest
    for i in range(6):
        prompt = " ".join(rng.choice(WORDS, 4))
        ids = tok(prompt)["input_ids"]
        with torch.no_grad():
            new = model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                                 do_sample=False, max_new_tokens=2, pad_token_id=0)[0, len(ids):].tolist()
        target = tok.decode(new) if i % 2 == 0 else "house door"
        items.append({"id": f"g{i}", "type": "generate", "prompt": prompt, "target": target, "max_new_tokens": 2})
    items.append({"id": "gid", "type": "generate", "prompt_ids": [2, 5, 6, 7], "target_ids": [1], "max_new_tokens": 1})
    path = os.path.join(tmp, "tasks.jsonl")
    with open(path, "w") as f:
        f.write("# a comment line\n\n" + "\n".join(json.dumps(x) for x in items) + "\n")
    loaded = tasks.load(path)
    check(len(loaded) == len(items), f"loaded {len(loaded)} items")

    res = tasks.run(model, {"*": "fp32"}, loaded, tokenizer=tok, requires=["recovery>=0.95"])
    want_mc = [independent_mc(model, tok, x) for x in items if x["type"] == "multiple_choice"]
    ref = res["answers"]["reference"]
    check([a["correct"] for a in ref[:len(want_mc)]] == want_mc, "multiple choice: the reference's answers recomputed")
    gen = [a for a in ref if a["id"].startswith("g") and a["id"] != "gid"]
    check([a["correct"] for a in gen] == [True, False] * 3, f"generation exact match: {[a['generated'] for a in gen]}")
    check(res["flips"] == {"lost": [], "gained": []} and res["recovery"] == 1.0 and res["mcnemar_p"] == 1.0,
          f"fp32 plan: no flips, recovery 1: {res['flips']}, {res['recovery']}")
    check(res["gates"][0]["verdict"] == "pass", f"fp32 recovery>=0.95: {res['gates']}")
    check(0 < res["acc_ref"] < 1, f"the reference's accuracy {res['acc_ref']} is neither 0 nor 1")

    # int4: flips, McNemar against SciPy, the recovery interval around its value
    q = tasks.run(model, {"*": "w4a16"}, loaded, tokenizer=tok, requires=["recovery>=0.95", "lost<=100"])
    lost, gained = len(q["flips"]["lost"]), len(q["flips"]["gained"])
    r = np.array([a["correct"] for a in q["answers"]["reference"]])
    e = np.array([a["correct"] for a in q["answers"]["emulated"]])
    check(lost == int(np.sum(r & ~e)) and gained == int(np.sum(~r & e)) and
          abs(q["acc_q"] - e.mean()) < 1e-15, f"int4 flips {lost} lost, {gained} gained")
    if lost + gained:
        check(abs(q["mcnemar_p"] - scipy.stats.binomtest(lost, lost + gained, 0.5).pvalue) < 1e-12,
              f"McNemar p {q['mcnemar_p']} vs SciPy")
    ll_ref = [a["loglikelihoods"] for a in q["answers"]["reference"] if "loglikelihoods" in a]
    ll_q = [a["loglikelihoods"] for a in q["answers"]["emulated"] if "loglikelihoods" in a]
    check(ll_ref != ll_q, "the int4 plan is applied: its log-likelihoods differ from the reference's")
    lo, hi = q["recovery_interval"]
    check(lo <= q["recovery"] <= hi, f"recovery {q['recovery']} in [{lo}, {hi}]")
    check(q["gates"][1]["verdict"] == "pass", "lost<=100 passes")
    # flips bookkeeping on answers made up here: 5 lost, 2 gained of 20
    made_r = [{"id": f"x{i}", "correct": i < 12} for i in range(20)]
    made_q = [{"id": f"x{i}", "correct": (i < 12 and i >= 5) or i in (15, 16)} for i in range(20)]
    m = tasks.compare(made_r, made_q, ["recovery>=1.2", "recovery>=0.99", "recovery>=0.3"])
    check(m["flips"] == {"lost": [f"x{i}" for i in range(5)], "gained": ["x15", "x16"]} and
          abs(m["recovery"] - 9 / 12) < 1e-15 and abs(m["mcnemar_p"] - scipy.stats.binomtest(5, 7, 0.5).pvalue) < 1e-12
          and [g["verdict"] for g in m["gates"]] == ["fail", "undecided", "pass"], f"made-up flips: {m['flips']}, {m['recovery']}, {m['gates']}")
    for b, c in ((0, 0), (3, 0), (5, 2), (10, 11), (40, 25)):
        want = 1.0 if b + c == 0 else scipy.stats.binomtest(b, b + c, 0.5).pvalue
        check(abs(tasks.mcnemar_exact(b, c) - want) < 1e-12, f"McNemar ({b}, {c}): {tasks.mcnemar_exact(b, c)} vs {want}")
    print(f"tasks: acc ref {res['acc_ref']:.3f}; int4 acc {q['acc_q']:.3f}, lost {lost}, gained {gained}, "
          f"p {q['mcnemar_p']:.3g}, recovery {q['recovery']:.3f} [{lo:.3f}, {hi:.3f}]", file=sys.stderr)
    return path


def check_cli(model, tok, tmp, task_path):
    ckpt = os.path.join(tmp, "ckpt")
    model.save_pretrained(ckpt)
    tok.save_pretrained(ckpt)
    env = dict(os.environ, PYTHONPATH=STAGE + os.pathsep + os.environ.get("PYTHONPATH", ""))
    plan = os.path.join(tmp, "plan.json")
    with open(plan, "w") as f:
        json.dump({"*": "fp32"}, f)
    out = os.path.join(tmp, "tasks_out")
    p = subprocess.run([sys.executable, "-m", "precis", "tasks", "--model", ckpt, "--plan", plan, "--tasks", task_path,
                        "-o", out, "--require", "recovery>=2", "-q"], capture_output=True, text=True, env=env)
    check(p.returncode == 3 and os.path.isfile(os.path.join(out, "tasks.md")), f"recovery>=2 fails: exit {p.returncode} "
          f"{p.stderr[-600:]}")
    bad = os.path.join(tmp, "bad.jsonl")
    with open(bad, "w") as f:
        f.write('{"type": "multiple_choice", "context": "a", "choices": ["b", "c"], "answer": 5}\n')
    p = subprocess.run([sys.executable, "-m", "precis", "tasks", "--model", ckpt, "--plan", plan, "--tasks", bad,
                        "-o", out], capture_output=True, text=True, env=env)
    check(p.returncode == 2 and "bad.jsonl:1: answer" in p.stderr, f"a bad item is named: {p.stderr[-300:]}")


def check_lmeval(model, tok, tmp):
    os.environ["HF_DATASETS_OFFLINE"] = "1"
    os.environ["HF_HOME"] = os.path.join(tmp, "hf")
    import lm_eval
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    from precis import lmeval

    rng = np.random.default_rng(1)
    data = os.path.join(tmp, "local_mc.jsonl")
    with open(data, "w") as f:
        for _ in range(30):
            f.write(json.dumps({"question": " ".join(rng.choice(WORDS, 5)),
                                "choices": [" ".join(rng.choice(WORDS, 2)) for _ in range(4)],
                                "label": int(rng.integers(0, 4))}) + "\n")
    task_dir = os.path.join(tmp, "lm_tasks")
    os.makedirs(task_dir)
    with open(os.path.join(task_dir, "precis_local_mc.yaml"), "w") as f:
        f.write(f"""task: precis_local_mc
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{question}}}}"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: label
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
""")
    plain = lm_eval.simple_evaluate(model=HFLM(pretrained=model, tokenizer=tok, batch_size=1, device="cpu"),
                                    tasks=["precis_local_mc"], task_manager=TaskManager(include_path=task_dir),
                                    log_samples=True)
    acc_plain = plain["results"]["precis_local_mc"]["acc,none"]
    res = lmeval.compare(model, tok, ["precis_local_mc"], {"*": "fp32"}, include_path=task_dir)
    acc = res["tasks"]["precis_local_mc"]["acc"]
    check(acc["emulated"] == acc_plain and acc["reference"] == acc_plain,
          f"lm-eval under an fp32 plan {acc['emulated']} equals its own run of the plain model {acc_plain}")
    check(0 < acc_plain < 1, f"lm-eval accuracy {acc_plain} is neither 0 nor 1")
    q = lmeval.evaluate(model, tok, ["precis_local_mc"], plan={"*": "w4a16"}, include_path=task_dir, log_samples=True)
    resp = lambda res: [s["filtered_resps"] for s in res["samples"]["precis_local_mc"]]  # noqa: E731
    check(resp(q) != resp(plain), "lm-eval's log-likelihoods under the int4 plan differ: the plan is applied")
    print(f"lm-eval local task: plain {acc_plain:.3f}, fp32 plan {acc['emulated']:.3f}, w4a16 "
          f"{q['results']['precis_local_mc']['acc,none']:.3f}", file=sys.stderr)
    # the emulated run really ran the plan: the model is restored afterwards, and int4 changes some log-likelihood
    check(all("forward" not in m.__dict__ for m in model.modules()), "emulate restored every module")


def main():
    model, tok = seeded_llama(), tokenizer()
    tmp = scratch.mkdtemp(prefix="precis-tasks-")
    try:
        path = check_tasks(model, tok, tmp)
        check_cli(model, tok, tmp, path)
        check_lmeval(model, tok, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if FAILURES:
        print(f"FAIL: {len(FAILURES)} checks", file=sys.stderr)
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
