"""`precis run --resume DIR` on datasets a user wrote with h5py (docs/dataset-format.md, "Writing a
dataset with h5py"; issue 34): the identity of a run's dataset is the digest of its contents, on both
sides of the journal, and the writer's own `dataset_id` attribute is only a label recorded beside it.

For a dataset labelled by its writer ("hand-1", not a digest) and for one with no `dataset_id` at all:
- a run interrupted by SIGINT resumes, with FILE.h5 given and without it (the journal names the
  dataset; before, a resume without FILE.h5 compared the journal's label with the default dataset's
  digest and was refused), keeping the journaled cases and ending with a complete report;
- the journal header and report.json record dataset_id = the digest that `precis inspect` prints
  ("contents ..."), and dataset.label = the writer's label (null without one);
- a copy of the file under another name and another label resumes the same run (same contents);
- a file whose contents differ by one value is refused with exit 2, naming dataset_id."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import scratch  # tests/py/scratch.py: scratch under the build tree, removed on a signal
import time

import h5py
import numpy as np

PRECIS = os.environ["PRECIS"]
FAILURES = []
CASES = 12  # 4 workloads x 3 recipes
# Each case samples for >= 60 ms, so that a signal lands in the middle of the run.
SLOW = ["--backend", "cpu", "--recipes", "fp32,bf16,int8", "--min-samples", "3", "--max-samples", "1000000",
        "--max-time-ms", "60", "--target-spread", "0", "--quiet"]


def check(condition, what):
    if not condition:
        FAILURES.append(what)
        print("FAIL: " + what)
    return condition


def write_dataset(path, label, bump=False):
    """The docs' h5py recipe: float32 inputs, float64 references; `label` None writes no dataset_id."""
    rng = np.random.default_rng(34)
    with h5py.File(path, "w") as f:
        f.attrs["format"] = "precis-dataset"
        f.attrs["format_version"] = 1
        f.attrs["generator"] = "my-export-script 1.0"
        f.attrs["created_utc"] = "2024-06-01T12:00:00Z"
        f.attrs["seed"] = 0
        f.attrs["suite"] = ""
        if label is not None:
            f.attrs["dataset_id"] = label
        for i in range(4):
            m, n, k, batch = 48, 40, 56, 2
            a = rng.standard_normal((batch, m, k)).astype(np.float32)
            b = (0.05 * rng.standard_normal((k, n))).astype(np.float32)
            if bump and i == 3:
                a[0, 0, 0] += 1.0
            a64, b64 = a.astype(np.float64), b.astype(np.float64)
            w = f.create_group("workloads/layer%d" % i)
            w.attrs["kind"] = "gemm"
            w.attrs["m"], w.attrs["n"], w.attrs["k"], w.attrs["batch"] = m, n, k, batch
            w.attrs["description"] = "hand-written layer"
            w.attrs["a_dist"] = "recorded activations"
            w.attrs["b_dist"] = "trained weights"
            for name, data in [("a", a), ("b", b), ("c_ref", a64 @ b64), ("ab_abs", np.abs(a64) @ np.abs(b64))]:
                w.create_dataset(name, data=data, chunks=True, fletcher32=True)


def rows_journaled(out):
    path = os.path.join(out, "journal.jsonl")
    if not os.path.exists(path):
        return 0
    with open(path) as fh:
        return fh.read().count("\n") - 1


def interrupt(dataset, out):
    """Starts a run and stops it with SIGINT once 3 cases are journaled; returns the journal text."""
    proc = subprocess.Popen([PRECIS, "run", dataset, "-o", out] + SLOW, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while rows_journaled(out) < 3 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    check(proc.returncode == 130, "%s: the interrupted run exited %d: %s" % (out, proc.returncode, err))
    with open(os.path.join(out, "journal.jsonl")) as fh:
        text = fh.read()
    kept = text.count("\n") - 1
    check(3 <= kept < CASES, "%s: %d rows journaled before the resume" % (out, kept))
    return text


def content_digest(dataset):
    p = subprocess.run([PRECIS, "inspect", dataset], capture_output=True, text=True)
    m = re.search(r"(?:contents|dataset_id) +([0-9a-f]{64})", p.stdout)
    check(p.returncode == 0 and m is not None, "inspect %s: no digest in: %s %s" % (dataset, p.stdout, p.stderr))
    return m.group(1) if m else None


def resume(args, out, before, what, digest, label):
    p = subprocess.run([PRECIS, "run"] + args + ["--resume", out] + SLOW, capture_output=True, text=True, timeout=300)
    kept = before.count("\n") - 1
    check(p.returncode == 0, "%s: resume exited %d: %s" % (what, p.returncode, p.stderr))
    check("%d cases kept from the journal, %d run now" % (kept, CASES - kept) in p.stderr,
          "%s: kept cases not reported: %s" % (what, p.stderr))
    with open(os.path.join(out, "journal.jsonl")) as fh:
        after = fh.read()
    check(after.startswith(before), "%s: the journal before the resume is not a prefix of the one after it" % what)
    header = json.loads(after.split("\n")[0])
    check(header["dataset"]["dataset_id"] == digest and header["dataset"]["label"] == label,
          "%s: journal header dataset %r, expected dataset_id %s, label %r" % (what, header["dataset"], digest, label))
    with open(os.path.join(out, "report.json")) as fh:
        report = json.load(fh)
    check(report["complete"] is True and len(report["rows"]) == CASES, "%s: report incomplete" % what)
    check(report["dataset"]["dataset_id"] == digest and report["dataset"]["label"] == label,
          "%s: report dataset %r" % (what, report["dataset"]))
    print("%s: resumed, %d of %d cases kept" % (what, kept, CASES))


def main():
    with scratch.TemporaryDirectory(prefix="precis-resume-h5py-") as work:
        for label in ("hand-1", None):
            name = "labelled" if label else "unlabelled"
            dataset = os.path.join(work, name + ".h5")
            write_dataset(dataset, label)
            digest = content_digest(dataset)

            out = os.path.join(work, name + "-with-file")
            before = interrupt(dataset, out)
            resume([dataset], out, before, "%s, FILE.h5 given" % name, digest, label)

            out = os.path.join(work, name + "-without-file")
            before = interrupt(dataset, out)
            resume([], out, before, "%s, FILE.h5 left out (the journal names it)" % name, digest, label)

            # The same contents under another name and another label: the same run.
            out = os.path.join(work, name + "-copy")
            before = interrupt(dataset, out)
            copy = os.path.join(work, name + "-copy.h5")
            shutil.copy(dataset, copy)
            with h5py.File(copy, "a") as f:
                f.attrs["dataset_id"] = "relabelled"
            p = subprocess.run([PRECIS, "run", copy, "--resume", out] + SLOW, capture_output=True, text=True,
                               timeout=300)
            check(p.returncode == 0, "%s: resume on a relabelled copy exited %d: %s" % (name, p.returncode, p.stderr))

            # Other contents: refused, naming the dataset_id.
            out = os.path.join(work, name + "-other")
            before = interrupt(dataset, out)
            other = os.path.join(work, name + "-other.h5")
            write_dataset(other, label, bump=True)
            p = subprocess.run([PRECIS, "run", other, "--resume", out] + SLOW, capture_output=True, text=True,
                               timeout=300)
            check(p.returncode == 2 and "cannot resume a different run: dataset_id" in p.stderr,
                  "%s: resume on other contents: exit %d: %s" % (name, p.returncode, p.stderr))
            with open(os.path.join(out, "journal.jsonl")) as fh:
                check(fh.read() == before, "%s: a refused resume changed the journal" % name)
    if FAILURES:
        print("%d failure(s)" % len(FAILURES))
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
