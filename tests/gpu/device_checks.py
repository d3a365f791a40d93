#!/usr/bin/env python3
"""The checks of tests/gpu/device-check.sh (issue 27), one subcommand each; exit 0 when the check
passes, 1 when it fails, 2 on bad input. Plain Python 3 (no NumPy): the GPU machine's interpreter.

  rows REPORT.json --allow FILE          every row ok, or unsupported as the allow-list expects
  explain EXPLAIN.json --allow FILE      every unsupported case allowed; every plan states its
                                         reduction-scheme mask (0x2 when D is narrower than the
                                         compute type), term strides and l2_resident
  accept ACCEPT.json [--min-ratio R]     every point ok; 2-worker / 1-worker throughput per recipe
                                         and batch (at least R: GPU concurrency, not thread overlap)
  compare CUDA.json CPU.json --bounds FILE --workloads LIST [--allow FILE]
                                         rel_fro of each recipe on both backends within its bound
  bench LOG --floor RECIPE:SIZE:TFLOPS   gpu_bench_matmul's precis TFLOP/s at least the floor
  version INFO.json EXPLAIN.json         cuBLASLt at run time = the one explain planned for, and
                                         what the plan assumes of it
  int8rows EXPLAIN.json [REPORT.json]    the int8 case above 65,536 rows: split into calls of at
                                         most 65,536 rows below cuBLASLt 13.2, one call from 13.2
  archive TARBALL WORKDIR --max-mib M    the archive under M MiB holding every log and report
  limits FILE --budget S                 the step limits (name seconds) add to at most S
  selftest                               the checks above on made-up inputs that must pass or fail
"""
import fnmatch
import json
import os
import sys
import tarfile
import tempfile


def load(path):
    with open(path) as f:
        return json.load(f)


def get(d, *path):
    for p in path:
        d = d.get(p) if isinstance(d, dict) else None
    return d


def read_allow(path):
    """recipe | workload glob | reason substring | why it is expected; '#' starts a comment."""
    entries = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = [p.strip() for p in line.split("|")]
            if len(parts) != 4 or not all(parts):
                raise SystemExit(f"{path}:{number}: expected 'recipe | workload glob | reason substring | why', "
                                 f"each non-empty: {line!r}")
            entries.append(parts)
    return entries


def allowed(entries, recipe, workload, reason):
    for r, w, sub, why in entries:
        if fnmatch.fnmatchcase(recipe, r) and fnmatch.fnmatchcase(workload, w) and sub in (reason or ""):
            return why
    return None


def cmd_rows(args):
    report, allow = args[0], read_allow(args[args.index("--allow") + 1])
    doc = load(report)
    rows = doc.get("rows", [])
    counts, bad = {}, 0
    print(f"rows of {report} ({get(doc, 'backend') or get(doc, 'environment', 'backend') or '?'} backend):")
    for r in rows:
        st, det = r.get("status"), r.get("details") or {}
        counts[st] = counts.get(st, 0) + 1
        verdict = ""
        if st != "ok":
            why = allowed(allow, r.get("recipe", ""), r.get("workload", ""), r.get("reason")) if st == "unsupported" else None
            verdict = f" [expected: {why}]" if why else " [NOT EXPECTED]"
            bad += why is None
        print(f"  {r.get('workload')}/{r.get('recipe')}: {st}" + (f" ({r.get('reason')})" if st != "ok" else "")
              + f" | rel_fro {get(r, 'error', 'rel_fro', 'worst')} | median {get(r, 'time', 'median_ms')} ms"
              + f" | {r.get('tflops')} TF | {det.get('lt_op')} {det.get('lt_types')} | algo {det.get('algo_id')}"
              + f" splitk {det.get('algo_splitk')} reduction {det.get('algo_reduction')} mask "
              + f"{(det.get('lt_reduction_scheme_mask') or '-')[:3]} | l2_resident {det.get('l2_resident')}{verdict}")
    print(f"  rows by status: {counts}; not ok and not on the allow-list: {bad}")
    return 1 if bad or not rows else 0


NARROW_D = ("CUDA_R_16F", "CUDA_R_16BF", "CUDA_R_8F_E4M3", "CUDA_R_8F_E5M2", "CUDA_R_4F_E2M1")


def cmd_explain(args):
    path, allow = args[0], read_allow(args[args.index("--allow") + 1])
    doc = load(path)
    bad, narrow, resident, splits = 0, 0, [], 0
    for c in doc.get("cases", []):
        name = f"{c.get('workload')}/{c.get('recipe')}"
        if c.get("status") == "unsupported":
            why = allowed(allow, c.get("recipe", ""), c.get("workload", ""), c.get("reason"))
            if not why:
                print(f"  {name}: unsupported on sm_{doc.get('compute_capability')} and NOT on the allow-list: "
                      f"{c.get('reason')}")
                bad += 1
            continue
        plan = c.get("plan") or {}
        mask, types = plan.get("lt_reduction_scheme_mask"), plan.get("lt_types") or ""
        d_type = types.split("D ")[-1].split(",")[0] if "D " in types else ""
        wants_compute = plan.get("lt_compute_type") == "CUBLAS_COMPUTE_32F" and d_type.startswith(NARROW_D)
        if not mask or (wants_compute and not mask.startswith("0x2 ")):
            print(f"  {name}: reduction-scheme mask {mask!r} for D {d_type} under {plan.get('lt_compute_type')}")
            bad += 1
        narrow += bool(mask and mask.startswith("0x2 "))
        if plan.get("l2_resident") not in ("yes", "no", "unknown"):
            print(f"  {name}: no l2_resident")
            bad += 1
        if plan.get("l2_resident") == "yes":
            resident.append(f"{name} ({plan.get('operand_bytes')} B)")
        if "split_terms" in plan:
            splits += 1
            if "256 bytes" not in (plan.get("split_term_stride") or ""):
                print(f"  {name}: split terms not at 256-byte strides: {plan.get('split_term_stride')}")
                bad += 1
    print(f"  {len(doc.get('cases', []))} cases on sm_{doc.get('compute_capability')}: {narrow} with split-K "
          f"reductions held to the compute type (mask 0x2), {splits} split plans, l2_resident: "
          f"{len(resident)} cases" + (f" (e.g. {', '.join(resident[:4])})" if resident else "") + f"; problems: {bad}")
    return 1 if bad or not doc.get("cases") else 0


def cmd_accept(args):
    doc = load(args[0])
    min_ratio = float(args[args.index("--min-ratio") + 1]) if "--min-ratio" in args else 0.0
    bad = 0
    for r in doc.get("recipes", []):
        tf = {}
        for p in r.get("points", []):
            if p.get("status") != "ok":
                print(f"  {r.get('recipe')} batch {p.get('batch')} x {p.get('workers')}: {p.get('status')} "
                      f"({p.get('reason')})")
                bad += 1
            elif p.get("repeat", 0) == 0:
                tf[(p.get("batch"), p.get("workers"))] = p.get("throughput_tflops") or 0.0
        for (batch, workers), t2 in sorted(tf.items()):
            if workers != 2:
                continue
            t1 = tf.get((batch, 1))
            ratio = t2 / t1 if t1 else float("nan")
            ok = not min_ratio or ratio >= min_ratio
            bad += not ok
            print(f"  {r.get('recipe')} batch {batch}: 2 workers {t2:.4g} TF / 1 worker {t1} TF = {ratio:.3f}"
                  + ("" if ok else f"  [below {min_ratio}: the two workers' GEMMs did not run at once]"))
        if not any(w == 2 for (_, w) in tf):
            print(f"  {r.get('recipe')}: no 2-worker point")
            bad += 1
    return 1 if bad or not doc.get("recipes") else 0


def read_bounds(path):
    bounds = {}
    with open(path) as f:
        for number, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = [p.strip() for p in line.split("|")]
            if len(parts) != 3 or float(parts[1]) < 1:
                raise SystemExit(f"{path}:{number}: expected 'recipe | bound >= 1 | why': {line!r}")
            bounds[parts[0]] = (float(parts[1]), parts[2])
    return bounds


def cmd_compare(args):
    cuda, cpu = load(args[0]), load(args[1])
    bounds = read_bounds(args[args.index("--bounds") + 1])
    workloads = args[args.index("--workloads") + 1].split(",")
    allow = read_allow(args[args.index("--allow") + 1]) if "--allow" in args else []
    index = {(r.get("workload"), r.get("recipe")): r for r in cpu.get("rows", [])}
    bad, compared = 0, 0
    for g in cuda.get("rows", []):
        w, rec = g.get("workload"), g.get("recipe")
        if w not in workloads:
            continue
        c = index.get((w, rec))
        if g.get("status") != "ok":
            if not (g.get("status") == "unsupported" and allowed(allow, rec, w, g.get("reason"))):
                print(f"  {w}/{rec}: {g.get('status')} on the device ({g.get('reason')})")
                bad += 1
            continue
        if not c or c.get("status") != "ok":
            print(f"  {w}/{rec}: no ok cpu row to compare with")
            bad += 1
            continue
        if rec not in bounds:
            print(f"  {w}/{rec}: no bound stated for {rec} in the bounds file")
            bad += 1
            continue
        eg, ec = get(g, "error", "rel_fro", "worst"), get(c, "error", "rel_fro", "worst")
        bound, why = bounds[rec]
        if eg is None or ec is None:
            print(f"  {w}/{rec}: rel_fro missing (device {eg}, cpu {ec})")
            bad += 1
            continue
        ratio = 1.0 if eg == ec else (max(eg, ec) / min(eg, ec) if min(eg, ec) > 0 else float("inf"))
        ok = ratio <= bound
        bad += not ok
        compared += 1
        print(f"  {w}/{rec}: rel_fro device {eg:.4g} cpu {ec:.4g} ratio {ratio:.4f} (bound {bound}: {why})"
              + ("" if ok else "  [OUTSIDE THE BOUND]"))
    print(f"  {compared} rows compared, {bad} problems")
    return 1 if bad or not compared else 0


def cmd_bench(args):
    recipe, size, floor = args[args.index("--floor") + 1].split(":")
    found = None
    with open(args[0]) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 7 and parts[0] == size and parts[1] == recipe:
                try:
                    found = float(parts[5])
                except ValueError:
                    pass
    if found is None:
        print(f"  no {recipe} {size}^3 row with a precis TFLOP/s in {args[0]}")
        return 1
    ok = found >= float(floor)
    print(f"  {recipe} {size}^3: precis {found:.1f} TFLOP/s, floor {floor}: {'ok' if ok else 'BELOW THE FLOOR'}")
    return 0 if ok else 1


def version_text(v):
    return f"{v // 10000}.{v // 100 % 100}.{v % 100}"


def cmd_version(args):
    info, explain = load(args[0]), load(args[1])
    lt = get(info, "cuda", "cublaslt_version")
    planned = explain.get("cublaslt_version")
    if not isinstance(lt, int) or lt <= 0:
        print(f"  cublaslt_version at run time: {lt!r} (not recorded)")
        return 1
    bad = 0
    print(f"  cuBLASLt at run time {version_text(lt)} ({lt}), explain planned for {planned}")
    if planned != version_text(lt):
        print("  the plan was made for another cuBLASLt than the one that runs")
        bad += 1
    # What the plan assumes of it (src/eval/gemm_plan.h): the scale modes of fp8-rowwise/fp8-block
    # from 12.9, the block-scaled types from 12.8, the int8 limits below 13.2 worked around.
    if lt < 120900:
        print("  below 12.9: fp8-rowwise and fp8-block become unsupported (the plan refuses them)")
        bad += 1
    print("  int8 above 65,536 rows or with a batch: " +
          ("split into calls (< 13.2)" if lt < 130200 else "one call (>= 13.2)"))
    return 1 if bad else 0


def cmd_int8rows(args):
    explain = load(args[0])
    lt = explain.get("cublaslt_version", "0.0.0")
    major, minor, patch = (int(x) for x in lt.split(".")) if lt != "unknown" else (0, 0, 0)
    version = major * 10000 + minor * 100 + patch
    bad, seen = 0, 0
    for c in explain.get("cases", []):
        plan = c.get("plan") or {}
        if c.get("status") == "unsupported" or c.get("m", 0) * c.get("batch", 1) <= 65536:
            continue
        seen += 1
        want = 1 if version >= 130200 or version == 0 else -(-c["m"] * c.get("batch", 1) // 65536)
        calls = plan.get("lt_calls")
        ok = calls == want
        bad += not ok
        print(f"  {c.get('workload')}/{c.get('recipe')}: {c['m']} rows, cuBLASLt {lt}: lt_calls {calls}, expected "
              f"{want}" + ("" if ok else "  [WRONG]"))
    if len(args) > 1:
        for r in load(args[1]).get("rows", []):
            det = r.get("details") or {}
            print(f"  run: {r.get('workload')}/{r.get('recipe')}: {r.get('status')} rel_fro "
                  f"{get(r, 'error', 'rel_fro', 'worst')} lt_calls {det.get('lt_calls')} {det.get('lt_split') or ''}")
            bad += r.get("status") != "ok"
    return 1 if bad or not seen else 0


def cmd_archive(args):
    tarball, work = args[0], args[1]
    max_mib = float(args[args.index("--max-mib") + 1])
    size = os.path.getsize(tarball)
    with tarfile.open(tarball) as t:
        members = {os.path.normpath(m.name) for m in t.getmembers()}
    wanted = []
    for root, _, files in os.walk(work):
        for name in files:
            if name.endswith(".log") or name in ("report.json", "accept.json", "explain.json", "report.md"):
                wanted.append(os.path.normpath(os.path.relpath(os.path.join(root, name), work)))
    missing = [w for w in wanted if w not in members]
    bad = size >= max_mib * 1024 * 1024 or missing or not wanted
    print(f"  {tarball}: {size / 1048576:.2f} MiB (limit {max_mib} MiB), {len(members)} members, {len(wanted)} logs "
          f"and reports in the work folder, {len(missing)} missing{': ' + ', '.join(missing[:10]) if missing else ''}")
    return 1 if bad else 0


def cmd_limits(args):
    budget = float(args[args.index("--budget") + 1])
    total, steps = 0.0, []
    with open(args[0]) as f:
        for line in f:
            if line.strip():
                name, seconds = line.split()
                total += float(seconds)
                steps.append(f"{name} {seconds}")
    print(f"  step limits: {', '.join(steps)}; total {total:g} s, budget {budget:g} s")
    return 0 if steps and total <= budget else 1


def selftest():
    """The checks whose inputs only a device produces, on made-up inputs: each must pass the good
    input and fail the bad one, so that the dry run shows the logic itself works."""
    failures = 0
    with tempfile.TemporaryDirectory() as d:
        def write(name, text):
            path = os.path.join(d, name)
            with open(path, "w") as f:
                f.write(text if isinstance(text, str) else json.dumps(text))
            return path

        def expect(code, want, what):
            nonlocal failures
            if code != want:
                failures += 1
                print(f"selftest: {what}: exit {code}, expected {want}")

        bench = write("bench.log", "  4096 bf16       0.22000      0.22100  1.0045      624.7      621.9  algo\n"
                                   "  4096 fp32       2.60000      2.61000  1.0038       52.9       52.7  algo\n")
        expect(cmd_bench([bench, "--floor", "bf16:4096:300"]), 0, "bench floor met")
        expect(cmd_bench([bench, "--floor", "fp32:4096:300"]), 1, "bench floor missed")
        expect(cmd_bench([bench, "--floor", "bf16:8192:300"]), 1, "bench row missing")

        def point(batch, workers, tf, status="ok"):
            return {"batch": batch, "workers": workers, "repeat": 0, "status": status, "throughput_tflops": tf}

        good = write("good.json", {"recipes": [{"recipe": "bf16", "points": [point(1, 1, 1.0), point(1, 2, 1.8)]}]})
        serial = write("serial.json", {"recipes": [{"recipe": "bf16", "points": [point(1, 1, 1.0), point(1, 2, 1.02)]}]})
        failed = write("failed.json", {"recipes": [{"recipe": "bf16", "points": [point(1, 1, 1.0),
                                                                                point(1, 2, 0, "failed")]}]})
        expect(cmd_accept([good, "--min-ratio", "1.2"]), 0, "2 workers run at once")
        expect(cmd_accept([serial, "--min-ratio", "1.2"]), 1, "2 workers serialized")
        expect(cmd_accept([failed]), 1, "a failed 2-worker point")
        allow = write("allow.txt", "int8-sq | * | SmoothQuant is not yet implemented | no smoothing kernel yet\n")
        rows = {"rows": [{"workload": "w", "recipe": "int8-sq", "status": "unsupported",
                          "reason": "smooth: SmoothQuant is not yet implemented on the cuda backend (issue 16)"},
                         {"workload": "w", "recipe": "bf16", "status": "ok"}]}
        expect(cmd_rows([write("rows.json", rows), "--allow", allow]), 0, "an allowed unsupported row")
        rows["rows"][0]["reason"] = "cuBLASLt has no algorithm"
        expect(cmd_rows([write("rows2.json", rows), "--allow", allow]), 1, "unsupported for another reason")
        rows["rows"][0].update(status="failed", reason="smooth: SmoothQuant is not yet implemented")
        expect(cmd_rows([write("rows3.json", rows), "--allow", allow]), 1, "a failed row is never allowed")
        bounds = write("bounds.txt", "bf16 | 1.05 | output rounding dominates\n")
        dev = {"rows": [{"workload": "w", "recipe": "bf16", "status": "ok", "error": {"rel_fro": {"worst": 1.0e-3}}}]}
        cpu = {"rows": [{"workload": "w", "recipe": "bf16", "status": "ok", "error": {"rel_fro": {"worst": 1.02e-3}}}]}
        far = {"rows": [{"workload": "w", "recipe": "bf16", "status": "ok", "error": {"rel_fro": {"worst": 2.0e-3}}}]}
        expect(cmd_compare([write("d.json", dev), write("c.json", cpu), "--bounds", bounds, "--workloads", "w"]), 0,
               "rel_fro within the bound")
        expect(cmd_compare([write("d.json", dev), write("f.json", far), "--bounds", bounds, "--workloads", "w"]), 1,
               "rel_fro outside the bound")
    print(f"selftest: {'ok' if not failures else str(failures) + ' FAILED'}")
    return 1 if failures else 0


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    commands = {"rows": cmd_rows, "explain": cmd_explain, "accept": cmd_accept, "compare": cmd_compare,
                "bench": cmd_bench, "version": cmd_version, "int8rows": cmd_int8rows, "archive": cmd_archive,
                "limits": cmd_limits}
    if sys.argv[1] == "selftest":
        return selftest()
    if sys.argv[1] not in commands or len(sys.argv) < 3:
        print(__doc__)
        return 2
    try:
        return commands[sys.argv[1]](sys.argv[2:])
    except (OSError, ValueError, KeyError) as e:
        print(f"  {sys.argv[1]}: {e}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
