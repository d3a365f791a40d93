"""precis.validate's rank correlation with ties (plan --validate's "spearman"): two plans of the sweep
often tie (the same predicted sum, or verify's measured value of two budgets that chose the same
layers), and Spearman's rho with ties is Pearson's r of the mean ranks (tied values share the mean
of the positions they occupy). Checked against an independent computation: the mean rank of v as
#(x < v) + (#(x == v) + 1) / 2 by NumPy broadcasting, and Pearson by np.corrcoef; plus a hand-worked
case. Ranking ties by position (i + 1) gives other ranks and another rho on every case here.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "py"))
from cli_checks import FAILURES, check  # noqa: E402

try:
    import numpy as np
except ImportError as e:
    print(f"SKIP: {e} (cmake/python-test-requirements.txt)", file=sys.stderr)
    sys.exit(1 if os.environ.get("CI") == "true" else 77)

BUILD = os.path.abspath(os.environ.get("PRECIS_BUILD_DIR", "build"))
sys.path.insert(0, os.environ.get("PRECIS_PY_STAGE") or os.path.join(BUILD, "python"))
from precis import validate  # noqa: E402


def mean_ranks(x):
    x = np.asarray(x, np.float64)
    less = (x[None, :] < x[:, None]).sum(1)
    equal = (x[None, :] == x[:, None]).sum(1)
    return less + (equal + 1) / 2


def independent_spearman(x, y):
    return float(np.corrcoef(mean_ranks(x), mean_ranks(y))[0, 1])


def main():
    # Hand-worked: x ranks 1, 2.5, 2.5, 4, 5; y ranks 2, 1, 4, 4, 4. Sums of squares about the mean
    # rank 3: x 9.5, y 8; products: (-2)(-1) + (-0.5)(-2) + (-0.5)(1) + (1)(1) + (2)(1) = 5.5;
    # rho = 5.5 / sqrt(9.5 * 8).
    x, y = [0.1, 0.3, 0.3, 0.7, 0.9], [2.0, 1.0, 5.0, 5.0, 5.0]
    check(list(validate.ranks(x)) == [1, 2.5, 2.5, 4, 5], f"ranks of {x}: {list(validate.ranks(x))}")
    check(list(validate.ranks(y)) == [2, 1, 4, 4, 4], f"ranks of {y}: {list(validate.ranks(y))}")
    rho = validate.spearman(x, y)
    check(rho is not None and abs(rho - 5.5 / np.sqrt(9.5 * 8)) < 1e-12, f"spearman {rho}, by hand {5.5 / np.sqrt(76)}")

    # Ties in unsorted order, all equal, and random draws with many ties, against NumPy.
    cases = [([3.0, 1.0, 3.0, 2.0, 1.0, 3.0], [0.5, 0.1, 0.4, 0.2, 0.3, 0.6]),
             ([5.0, 5.0, 5.0, 1.0], [1.0, 2.0, 3.0, 4.0])]
    rng = np.random.default_rng(38)
    for _ in range(20):
        n = int(rng.integers(4, 12))
        cases.append((rng.integers(0, 4, n).astype(float), rng.integers(0, 3, n).astype(float)))
    for x, y in cases:
        got = validate.ranks(x)
        check(np.array_equal(got, mean_ranks(x)), f"ranks of {list(x)}: {list(got)}, mean ranks {list(mean_ranks(x))}")
        if len(set(x)) > 1 and len(set(y)) > 1:
            rho, want = validate.spearman(x, y), independent_spearman(x, y)
            check(rho is not None and abs(rho - want) < 1e-12, f"spearman of {list(x)}, {list(y)}: {rho}, NumPy {want}")
    if FAILURES:
        raise SystemExit(f"{len(FAILURES)} failures")
    print("ok: ranks with ties are mean ranks; spearman agrees with NumPy")


if __name__ == "__main__":
    main()
