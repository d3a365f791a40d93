"""verify's per-token quantities from libprecis (precis_logit_token_stats, one pass per token) equal
the NumPy definitions they replace (precis.endtoend._logit_rows_numpy, kld.token_extras): the
counts (argmax agreement, top-5 overlap, the label's ranks) exactly, the sums (KL both ways,
Jensen-Shannon) to the rounding of log-sum-exp (both sides carry an error of about ulp(lse) / KL
relative: 1e-12 for KL of 1e-3 nats on a 50k vocabulary), the cross-entropies and the reference's
confidence to a few ulps. Inputs as a real head gives them: a GPT-2-sized vocabulary (50257),
logits rounded to bf16 (ties in the top five, the label's rank among equal values), float32 and
float64 references, missing labels (-100), and tokens with NaN or inf logits (those go to NumPy's
arithmetic, whatever it gives).

    build/venv/bin/python tests/venv/test_python_token_stats.py
"""
import os
import sys

import ml_dtypes
import numpy as np

BUILD = os.path.abspath(os.environ.get("PRECIS_BUILD_DIR", "build"))
sys.path.insert(0, os.environ.get("PRECIS_PY_STAGE") or os.path.join(BUILD, "python"))
from precis import endtoend  # noqa: E402

VOCAB = 50257
TOKENS = 40


def logits(rng, shift):
    base = rng.standard_normal((TOKENS, VOCAB)) * 2.5
    base[:, 11] += 9.0  # a confident head on some tokens: exp(max lp) near 1
    x = base + shift * rng.standard_normal((TOKENS, VOCAB))
    # bf16 values, as a head computed in bf16 writes them: many exact ties, in the top five too.
    return x.astype(ml_dtypes.bfloat16).astype(np.float32)


def check(ref, q, labels, what):
    fast = endtoend._logit_rows(ref, q, labels)
    slow = endtoend._logit_rows_numpy(ref, q, labels)
    problems = []
    if list(fast) != list(slow):
        problems.append(f"{what}: keys {list(fast)} != {list(slow)}")
    for key in slow:
        a, b = fast[key], slow[key]
        if a.dtype != b.dtype or a.shape != b.shape:
            problems.append(f"{what}: {key}: {a.dtype}{a.shape} != {b.dtype}{b.shape}")
            continue
        if key in ("top1", "top5", "rank_ref", "rank_q"):
            ok = np.array_equal(a, b, equal_nan=True)
        else:
            tol = {"kl": 1e-9, "rkl": 1e-9, "jsd": 1e-9}.get(key, 1e-13)
            ok = np.allclose(a, b, rtol=tol, atol=1e-16, equal_nan=True)
        if not ok:
            bad = np.flatnonzero(~np.isclose(a, b, rtol=1e-9, atol=1e-16, equal_nan=True))[:3]
            problems.append(f"{what}: {key} differs at tokens {bad.tolist()}: {a[bad]} vs {b[bad]}")
    return problems, fast


def main():
    rng = np.random.default_rng(40)
    ref = logits(rng, 0.0)
    q = (ref + (rng.standard_normal(ref.shape) * 0.05)).astype(ml_dtypes.bfloat16).astype(np.float32)
    labels = rng.integers(0, VOCAB, TOKENS)
    labels[::7] = -100
    labels[1] = int(np.argmax(ref[1]))  # a label at the top
    # A label tied with other ids at its value: its rank counts the lower ids of the tie only.
    row = ref[2]
    tied = np.flatnonzero(row == row[row.argsort()[-200]])
    labels[2] = int(tied[-1])
    problems = []
    for what, r, c, lab in (("float32, labels", ref, q, labels), ("float32, no labels", ref, q, None),
                            ("float64 reference", ref.astype(np.float64), q, labels),
                            ("identical", ref, ref.copy(), labels)):
        p, fast = check(r, c, lab, what)
        problems += p
    if not np.all(fast["kl"] == 0) and not np.all(np.abs(fast["kl"]) < 1e-15):
        problems.append(f"identical logits: KL {fast['kl'][:4]} (expected 0 to rounding)")
    if len(tied) < 2:
        problems.append("the test's tie at the label did not arise (bf16 logits should tie)")
    # Non-finite logits: NumPy's arithmetic for those tokens, libprecis's for the others.
    r2, q2 = ref.copy(), q.copy()
    q2[3, 5] = np.nan
    r2[4, 9] = np.inf
    with np.errstate(invalid="ignore"):
        p, fast = check(r2, q2, labels, "non-finite")
    problems += p
    if not (np.isnan(fast["kl"][3]) and np.isnan(fast["kl"][4])):
        problems.append(f"non-finite: KL of tokens 3, 4 = {fast['kl'][3:5]}, expected NaN as NumPy gives")
    # A label past the vocabulary is refused, as NumPy's indexing refuses it.
    try:
        endtoend._logit_rows(ref, q, np.full(TOKENS, VOCAB))
        problems.append("a label equal to the vocabulary size was accepted")
    except (ValueError, IndexError) as e:
        if "label" not in str(e):
            problems.append(f"a label past the vocabulary: unclear error {e}")
    for p in problems:
        print("FAIL", p)
    print(f"token stats: {TOKENS} tokens x {VOCAB} logits, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
