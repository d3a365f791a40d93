"""`precis run --shard I/N` and `precis merge` (docs/scale-out.md, DESIGN §13).

- Shards 1/3..3/3 of a run deal every case to exactly one shard, by the documented cost-greedy rule
  (checked against an independent Python implementation from the rows' shapes and tensor bytes),
  each shard writing a normal report directory with its part journal and rows that say where they ran.
- `precis merge` of the three equals the single run in every accuracy field, in dataset order, with
  the single run's settings; compare and recommend read it.
- merge refuses, with exit 2 and the field named: another dataset, other settings, a part missing or
  given twice, a part of another split, an incomplete part, a case missing or in two parts, a report
  that is not a shard; it warns when the parts ran on different hardware or software.
- A shard resumes only itself; --devices is refused on the cpu backend (exit 2).
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import scratch  # tests/py/scratch.py: scratch under the build tree, removed on a signal

PRECIS = os.environ["PRECIS"]
FAILURES = []
OPTIONS = ["--backend", "cpu", "--recipes", "fp32,bf16,int8,fp16", "--min-samples", "3", "--max-samples", "3",
           "--quiet"]
ACCURACY_KEYS = ("workload", "recipe", "spec", "m", "n", "k", "batch", "status", "reason", "verdict",
                 "verdict_detail", "criteria", "error")
FLOPS_PER_BYTE = 32  # PRECIS_DEAL_FLOPS_PER_BYTE in src/eval/deal.h


def check(condition, what):
    if not condition:
        FAILURES.append(what)
        print("FAIL: " + what)
    return condition


def load(path):
    with open(path) as fh:
        return json.load(fh)


def save(path, doc):
    with open(path, "w") as fh:
        json.dump(doc, fh, indent=1)


def accuracy(report):
    return [{k: r[k] for k in ACCURACY_KEYS} for r in report["rows"]]


def run(args, **kwargs):
    return subprocess.run([PRECIS] + args, capture_output=True, text=True, timeout=300, **kwargs)


def expected_deal(single, parts):
    """The cost-greedy deal of deal.h, computed independently from the single run's rows."""
    cases = []
    for index, r in enumerate(single["rows"]):
        cost = 2 * r["m"] * r["n"] * r["k"] * r["batch"] + FLOPS_PER_BYTE * r["memory"]["tensor_bytes"]
        cases.append((-cost, index))
    load_of = [0] * parts
    part = {}
    for neg_cost, index in sorted(cases):
        lightest = min(range(parts), key=lambda p: (load_of[p], p))
        load_of[lightest] += -neg_cost
        r = single["rows"][index]
        part[(r["workload"], r["recipe"])] = lightest + 1
    return part


def refused(args, needle, what):
    p = run(["merge"] + args + ["--quiet"])
    check(p.returncode == 2 and needle in p.stderr, "%s: exit %d, expected \"%s\" in: %s" % (what, p.returncode, needle,
                                                                                          p.stderr.strip()))
    return p


def main():
    with scratch.TemporaryDirectory(prefix="precis-shard-") as work:
        suite = os.path.join(work, "s.yaml")
        shapes = [(48, 40, 56, 2), (96, 40, 56, 1), (16, 16, 16, 1), (64, 64, 64, 1), (32, 8, 128, 3)]
        with open(suite, "w") as fh:
            fh.write("seed: 11\nworkloads:\n")
            for i, (m, n, k, b) in enumerate(shapes):
                fh.write("  - {name: w%d, m: %d, n: %d, k: %d, batch: %d}\n" % (i, m, n, k, b))
        dataset = os.path.join(work, "d.h5")
        subprocess.run([PRECIS, "gen", suite, "-o", dataset, "-q"], check=True, stdout=subprocess.DEVNULL)
        single_dir = os.path.join(work, "single")
        p = run(["run", dataset, "-o", single_dir] + OPTIONS)
        check(p.returncode == 0, "single run: exit %d: %s" % (p.returncode, p.stderr))
        single = load(os.path.join(single_dir, "report.json"))
        n_cases = len(shapes) * 4
        check(len(single["rows"]) == n_cases, "single run: %d rows" % len(single["rows"]))
        check(all(r["host"] == socket.gethostname() and r["part"] == 0 and r["rank"] is None and r["device"] is None
                  for r in single["rows"]), "single run: rows do not record host/part/rank/device as expected")

        deal = expected_deal(single, 3)
        shard_dirs = []
        for i in (1, 2, 3):
            out = os.path.join(work, "shard%d" % i)
            p = run(["run", dataset, "--shard", "%d/3" % i, "-o", out] + OPTIONS)
            check(p.returncode == 0, "shard %d/3: exit %d: %s" % (i, p.returncode, p.stderr))
            shard_dirs.append(out)
            check(sorted(os.listdir(out)) == ["journal.part-%04d-of-0003.jsonl" % i, "report.csv", "report.html",
                                              "report.json", "report.md"], "shard %d/3: files %r" % (i, os.listdir(out)))
            report = load(os.path.join(out, "report.json"))
            shard = report["settings"].get("shard")
            check(shard is not None and shard["index"] == i and shard["count"] == 3 and
                  shard["workloads"] == ["w%d" % j for j in range(len(shapes))] and shard["cases"] == len(report["rows"]),
                  "shard %d/3: settings.shard = %r" % (i, shard))
            got = sorted((r["workload"], r["recipe"]) for r in report["rows"])
            want = sorted(c for c, part in deal.items() if part == i)
            check(got == want, "shard %d/3: cases %r, the cost-greedy rule deals %r" % (i, got, want))
            check(all(r["part"] == i and r["host"] == socket.gethostname() for r in report["rows"]),
                  "shard %d/3: rows do not record their part and host" % i)
            order = [(r["workload"], r["recipe"]) for r in single["rows"]]
            mine = [(r["workload"], r["recipe"]) for r in report["rows"]]
            check(mine == [c for c in order if c in set(mine)], "shard %d/3: rows not in dataset order" % i)
            with open(os.path.join(out, "journal.part-%04d-of-0003.jsonl" % i)) as fh:
                header = json.loads(fh.readline())
            check(header["part"] == {"index": i, "count": 3}, "shard %d/3: journal header part %r" % (i, header["part"]))
        # The deal is spread: no shard empty on 20 cases, no shard with more than half of the cost.
        check(len(set(deal.values())) == 3, "the deal left a shard empty: %r" % deal)

        merged_dir = os.path.join(work, "merged")
        p = run(["merge"] + shard_dirs + ["-o", merged_dir, "--quiet"])
        check(p.returncode == 0, "merge: exit %d: %s" % (p.returncode, p.stderr))
        check("warning" not in p.stderr, "merge of parts from one machine warned: %s" % p.stderr)
        merged = load(os.path.join(merged_dir, "report.json"))
        check(accuracy(merged) == accuracy(single), "merged report differs from the single run in accuracy fields")
        check(merged["settings"] == single["settings"], "merged settings %r != single %r" %
              (merged["settings"], single["settings"]))
        check(merged["complete"] is True and merged["dataset"]["dataset_id"] == single["dataset"]["dataset_id"],
              "merged: complete/dataset_id")
        parts = merged["environment"].get("parts")
        check(isinstance(parts, list) and [e["part"] for e in parts] == [1, 2, 3] and
              all(e["hostname"] == socket.gethostname() for e in parts), "merged environment.parts: %r" % parts)
        check(sorted(r["part"] for r in merged["rows"]) == sorted(deal.values()), "merged rows lost their part")
        for name in ("report.csv", "report.md", "report.html"):
            check(os.path.exists(os.path.join(merged_dir, name)), "merged: no %s" % name)
        with open(os.path.join(merged_dir, "report.md")) as fh:
            md = fh.read()
        part_lines = [l for l in md.split("\n") if l.startswith("| ") and "/report.json |" in l]
        check("### Parts" in md and len(part_lines) == 3 and
              all(l.startswith("| %d | %d | %s |" % (sum(v == p for v in deal.values()), p, socket.gethostname()))
                  for p, l in zip((1, 2, 3), part_lines)),
              "merged report.md: the parts table is %r" % part_lines)
        # The order of the arguments does not matter.
        p = run(["merge", shard_dirs[2], shard_dirs[0], os.path.join(shard_dirs[1], "report.json"), "-o",
                 os.path.join(work, "merged2"), "--quiet"])
        check(p.returncode == 0 and accuracy(load(os.path.join(work, "merged2", "report.json"))) == accuracy(single),
              "merge in another order: exit %d: %s" % (p.returncode, p.stderr))
        # compare and recommend read the merged report.
        p = run(["compare", os.path.join(single_dir, "report.json"), os.path.join(merged_dir, "report.json")])
        check(p.returncode in (0, 3) and "Traceback" not in p.stderr and "error" not in p.stderr.lower(),
              "compare single merged: exit %d: %s" % (p.returncode, p.stderr))
        p = run(["recommend", os.path.join(merged_dir, "report.json")])
        q = run(["recommend", os.path.join(single_dir, "report.json")])
        check(p.returncode == q.returncode and p.stdout.split("\n")[0].split(";")[0] == q.stdout.split("\n")[0].split(";")[0],
              "recommend merged (exit %d: %s) vs single (exit %d: %s)" % (p.returncode, p.stdout[:200], q.returncode,
                                                                        q.stdout[:200]))
        # An existing merged directory is not overwritten without --force.
        refused(shard_dirs + ["-o", merged_dir], "already exists", "merge onto existing reports")

        # Refusals.
        refused(shard_dirs[:1] + shard_dirs[2:] + ["-o", os.path.join(work, "r1")], "missing part 2/3", "a part missing")
        refused(shard_dirs + shard_dirs[1:2] + ["-o", os.path.join(work, "r2")], "are both part 2 of 3",
                "a part given twice")
        refused([single_dir, "-o", os.path.join(work, "r3")], "settings.shard", "a report that is not a shard")
        other_suite = os.path.join(work, "other.yaml")
        with open(other_suite, "w") as fh:
            fh.write(open(suite).read().replace("seed: 11", "seed: 12"))
        other = os.path.join(work, "other.h5")
        subprocess.run([PRECIS, "gen", other_suite, "-o", other, "-q"], check=True, stdout=subprocess.DEVNULL)
        other_shard = os.path.join(work, "other2")
        check(run(["run", other, "--shard", "2/3", "-o", other_shard] + OPTIONS).returncode == 0, "other dataset shard")
        refused([shard_dirs[0], other_shard, shard_dirs[2], "-o", os.path.join(work, "r4")], "dataset.dataset_id",
                "parts of different datasets")
        slow_shard = os.path.join(work, "samples4")
        check(run(["run", dataset, "--shard", "3/3", "-o", slow_shard] + OPTIONS + ["--max-samples", "4"]).returncode == 0,
              "shard with other settings")
        refused(shard_dirs[:2] + [slow_shard, "-o", os.path.join(work, "r5")], "settings.max_samples",
                "parts with different settings")
        four = os.path.join(work, "four")
        check(run(["run", dataset, "--shard", "3/4", "-o", four] + OPTIONS).returncode == 0, "shard 3/4")
        refused(shard_dirs[:2] + [four, "-o", os.path.join(work, "r6")], "settings.shard.count",
                "parts of different splits")

        def edited(index, name, change):
            path = os.path.join(work, name)
            shutil.copytree(shard_dirs[index], path)
            doc = load(os.path.join(path, "report.json"))
            change(doc)
            save(os.path.join(path, "report.json"), doc)
            dirs = list(shard_dirs)
            dirs[index] = path
            return dirs
        dirs = edited(1, "incomplete", lambda d: d.__setitem__("complete", False))
        refused(dirs + ["-o", os.path.join(work, "r7")], "part 2 of 3 is incomplete", "an incomplete part")
        dropped = load(os.path.join(shard_dirs[1], "report.json"))["rows"][0]
        dirs = edited(1, "dropped", lambda d: d["rows"].pop(0))
        refused(dirs + ["-o", os.path.join(work, "r8")], "1 case of the run is in no part: %s/%s" %
                (dropped["workload"], dropped["recipe"]), "a case missing")
        stolen = load(os.path.join(shard_dirs[0], "report.json"))["rows"][0]
        dirs = edited(1, "doubled", lambda d: d["rows"].append(stolen))
        refused(dirs + ["-o", os.path.join(work, "r9")], "recipe \"%s\" is in" % stolen["recipe"], "a case in two parts")
        # Other hardware: merged, with a warning naming the field and the values.
        dirs = edited(2, "othercpu", lambda d: d["environment"].__setitem__("cpu", "Some Other CPU"))
        p = run(["merge"] + dirs + ["-o", os.path.join(work, "hetero"), "--quiet"])
        check(p.returncode == 0 and "warning: environment.cpu differs between the parts" in p.stderr and
              "part 3 Some Other CPU" in p.stderr, "different hardware: exit %d: %s" % (p.returncode, p.stderr))
        hetero = load(os.path.join(work, "hetero", "report.json"))
        check(hetero["environment"]["parts"][2]["cpu"] == "Some Other CPU", "the part's own environment is not kept")

        # A shard resumes only itself.
        p = run(["run", dataset, "--shard", "2/3", "--resume", shard_dirs[1]] + OPTIONS)
        check(p.returncode == 0 and "%d cases kept from the journal, 0 run now" % sum(v == 2 for v in deal.values())
              in p.stderr, "resume of shard 2/3: exit %d: %s" % (p.returncode, p.stderr))
        p = run(["run", dataset, "--shard", "1/3", "--resume", shard_dirs[1]] + OPTIONS)
        check(p.returncode == 2, "resume of shard 2/3's directory as 1/3: exit %d: %s" % (p.returncode, p.stderr))
        # --devices spreads a run over GPUs: the cpu backend has none, and says so.
        for backend in (["--backend", "cpu"], [] if os.environ.get("PRECIS_CUDA_BUILT", "0") == "0" else None):
            if backend is None:
                continue
            args = ["run", dataset, "--devices", "0,1", "-o", os.path.join(work, "devices")] + \
                [o for o in OPTIONS if o not in ("--backend", "cpu")] + backend
            p = run(args)
            check(p.returncode == 2 and "--devices 0,1" in p.stderr and "cpu backend" in p.stderr and
                  not os.path.exists(os.path.join(work, "devices")),
                  "--devices with %r: exit %d: %s" % (backend, p.returncode, p.stderr))
        p = run(["run", dataset, "--devices", "0,1", "--shard", "1/2", "-o", os.path.join(work, "devices")] + OPTIONS)
        check(p.returncode == 2, "--devices with --shard: exit %d" % p.returncode)
        if os.environ.get("PRECIS_MPI_BUILT") == "0":
            # Started as one of several MPI ranks without MPI built: refused, not run N times over.
            p = run(["run", dataset, "-o", os.path.join(work, "nompi")] + OPTIONS,
                    env=dict(os.environ, OMPI_COMM_WORLD_SIZE="3"))
            check(p.returncode == 2 and "built without MPI" in p.stderr and
                  not os.path.exists(os.path.join(work, "nompi")), "ranks without MPI: exit %d: %s" % (
                      p.returncode, p.stderr))
        for bad in ("0/3", "4/3", "1/0", "x", "1/3x", "2"):
            p = run(["run", dataset, "--shard", bad, "-o", os.path.join(work, "bad")] + OPTIONS)
            check(p.returncode == 2 and "--shard" in p.stderr, "--shard %s: exit %d: %s" % (bad, p.returncode, p.stderr))

    if FAILURES:
        print("%d failure(s)" % len(FAILURES))
        return 1
    print("shards 1/3..3/3 + merge = the single run; refusals and warnings as documented")
    return 0


if __name__ == "__main__":
    sys.exit(main())
