"""Real models at real size (issue 40, DESIGN §20): seeded Llama-architecture models of about 135M,
0.5B and 1B parameters, each step in its own process, side by side in one run: the plain fp32
forward against capture, import, run and verify (an int8 plan and a bf16 plan) on WINDOWS windows
of TOKENS tokens: time and peak RSS (the child's ru_maxrss, or its VmRSS sampled every 20 ms when
higher: precis run resets the high-water mark per case), with the targets as ratios. The forward's
and verify's times are their own, the model loaded before the clock starts (verify's from its
report, verify.seconds; their CPU seconds, all threads, beside: the machine may be shared); capture, import and
run are their processes' wall and CPU times. Targets:
verify int8 <= 5x the plain forward, bf16 <= 10x; peak RSS <= the fp32 weights + 1.5 GB.

    build/venv/bin/python tests/bench/bench_model_scale.py [--sizes 135m,0.5b,1b] [--steps ...]
        [--windows 24] [--tokens 64] [--keep DIR]

Sizes (hidden not a multiple of 128 for 135m and 0.5b; tied embeddings for 135m and 1b; GQA all):
  135m  hidden 576, 30 layers, intermediate 1536, 9 heads / 3 KV heads, vocab 49152, tied (SmolLM-135M's shape)
  0.5b  hidden 960, 40 layers, intermediate 2560, 15 heads / 5 KV heads, vocab 49152, untied
  1b    hidden 2048, 16 layers, intermediate 8192, 32 heads / 8 KV heads, vocab 128256, tied (Llama-3.2-1B's shape)
Steps: forward, capture, import, run, verify-int8, verify-bf16 (verify as a user runs it: the per-layer rows on
256 token rows, its default), verify-int8-all, verify-bf16-all (with --layer-rows all: every row), and capture-in-memory
(capture as it was before it streamed: every layer's inputs held, then written). The model is built
with seeded weights (torch.manual_seed(0), the default init) and saved with save_pretrained.
Not run by CTest (minutes per size). PRECIS: the precis executable (default build/precis).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
BUILD = os.environ.get("PRECIS_BUILD_DIR", os.path.join(ROOT, "build"))
PRECIS = os.environ.get("PRECIS", os.path.join(BUILD, "precis"))
STAGE = os.environ.get("PRECIS_PY_STAGE", os.path.join(BUILD, "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "py"))
from rss import PeakSampler  # noqa: E402  (the memory tests' sampler of a child's VmRSS, tests/py/rss.py)

SIZES = {
    "135m": dict(hidden_size=576, num_hidden_layers=30, intermediate_size=1536, num_attention_heads=9,
                 num_key_value_heads=3, vocab_size=49152, tie_word_embeddings=True),
    "0.5b": dict(hidden_size=960, num_hidden_layers=40, intermediate_size=2560, num_attention_heads=15,
                 num_key_value_heads=5, vocab_size=49152, tie_word_embeddings=False),
    "1b": dict(hidden_size=2048, num_hidden_layers=16, intermediate_size=8192, num_attention_heads=32,
               num_key_value_heads=8, vocab_size=128256, tie_word_embeddings=True),
}
STEPS = ("forward", "capture", "import", "run", "verify-int8", "verify-bf16", "verify-int8-all", "verify-bf16-all")
# Not run unless named: capture as it was before it streamed (every layer's inputs held, then written).
OPTIONAL_STEPS = ("capture-in-memory",)

CAPTURE_IN_MEMORY = r"""
import sys, numpy as np, torch, transformers
import precis.torch as pt
model = transformers.AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype="float32").eval()
ids = np.load(sys.argv[2])
with torch.no_grad():
    cap = pt.capture(model, [torch.from_numpy(ids[i:i + 4]) for i in range(0, len(ids), 4)], gradients=False,
                     outputs=False)
pt.write_arrays(sys.argv[3], {n: x for n, x in cap.arrays().items() if n != "@outputs"}, cap.meta)  # save() before
"""

BUILD_MODEL = r"""
import json, sys, torch, transformers
torch.manual_seed(0)
config = transformers.LlamaConfig(max_position_embeddings=2048, architectures=["LlamaForCausalLM"], **json.loads(sys.argv[1]))
model = transformers.LlamaForCausalLM(config)
model.save_pretrained(sys.argv[2])
print(sum(p.numel() for p in model.parameters()))
"""

FORWARD = r"""
import sys, time, numpy as np, torch, transformers
model = transformers.AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype="float32").eval()
ids = torch.from_numpy(np.load(sys.argv[2]))
with torch.no_grad():
    model(ids[:1])  # warm-up
    t, c = time.perf_counter(), time.process_time()
    model(ids)
    print(time.perf_counter() - t, time.process_time() - c)
"""

def run_child(argv, env=None):
    """Runs argv and returns (wall s, peak RSS bytes of that child, rc, stdout, stderr, CPU s: user +
    system, all its threads). The peak is
    the larger of the child's ru_maxrss and its VmRSS sampled every 20 ms: precis run resets the
    kernel's high-water mark (/proc/self/clear_refs) before each case it times, so its ru_maxrss is
    the peak after its last case only."""
    import threading

    t = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    out, err = [], []
    sampler = PeakSampler(proc.pid, interval=0.02)
    threads = [threading.Thread(target=lambda s, b: b.append(s.read()), args=(proc.stdout, out)),
               threading.Thread(target=lambda s, b: b.append(s.read()), args=(proc.stderr, err))]
    for th in threads:
        th.start()
    _, status, usage = os.wait4(proc.pid, 0)
    sampled = sampler.stop()
    proc.returncode = os.waitstatus_to_exitcode(status)
    for th in threads:
        th.join()
    wall = time.perf_counter() - t
    return (wall, max(usage.ru_maxrss * 1024, sampled), proc.returncode, out[0].decode(), err[0].decode(),
            usage.ru_utime + usage.ru_stime)


def fmt_gb(b):
    return f"{b / 1e9:.2f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="135m", help="comma-separated: 135m, 0.5b, 1b (default 135m)")
    ap.add_argument("--steps", default=",".join(STEPS), help="comma-separated among " + ", ".join(STEPS + OPTIONAL_STEPS))
    ap.add_argument("--windows", type=int, default=24)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--keep", default=None, help="work directory kept (default: a temporary one, removed)")
    args = ap.parse_args()
    steps = args.steps.split(",")
    env = dict(os.environ, PYTHONPATH=STAGE + os.pathsep + os.environ.get("PYTHONPATH", ""), PRECIS=PRECIS)
    py = sys.executable
    work = args.keep or tempfile.mkdtemp(prefix="precis-bench-scale-")
    os.makedirs(work, exist_ok=True)
    table, cpu = [], {}  # cpu: (size, step) -> CPU seconds of the forward / verify itself (all threads)
    try:
        for size in args.sizes.split(","):
            d = os.path.join(work, size)
            os.makedirs(d, exist_ok=True)
            model_dir = os.path.join(d, "model")
            if not os.path.isfile(os.path.join(model_dir, "config.json")):
                w, rss, rc, out, err, _ = run_child([py, "-c", BUILD_MODEL, json.dumps(SIZES[size]), model_dir], env)
                if rc:
                    sys.exit(f"building {size}: {err[-2000:]}")
            with open(os.path.join(model_dir, "config.json")) as f:
                cfg = json.load(f)
            h, L, inter, V = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["intermediate_size"], cfg["vocab_size"]
            kv = h // cfg["num_attention_heads"] * cfg["num_key_value_heads"]
            params = V * h * (1 if cfg.get("tie_word_embeddings") else 2) + L * (2 * h * h + 2 * h * kv + 3 * h * inter)
            weights = params * 4
            ids_path = os.path.join(d, "ids.npy")
            import numpy as np

            np.save(ids_path, np.random.default_rng(0).integers(0, V, (args.windows, args.tokens)).astype(np.int64))
            rows = {}

            def step(name, argv, child_env=env):
                w, rss, rc, out, err, cpu_s = run_child(argv, child_env)
                ok = rc in (0, 3)
                rows[name] = (w, rss, ok, out)
                cpu[(size, name)] = cpu_s  # the process's; forward and verify replace it with their own
                print(f"  {size} {name}: {w:.1f} s, peak RSS {fmt_gb(rss)} GB{'' if ok else ' FAILED: ' + err[-600:]}",
                      file=sys.stderr, flush=True)
                return out

            print(f"{size}: {params / 1e6:.0f}M parameters, fp32 weights {fmt_gb(weights)} GB", file=sys.stderr, flush=True)
            if "forward" in steps:
                # With the OpenMP wait policy python -m precis verify sets (precis/__main__.py): on a
                # shared machine torch's spinning threads would inflate the forward's CPU seconds.
                out = step("forward", [py, "-c", FORWARD, model_dir, ids_path],
                           dict(env, OMP_WAIT_POLICY=env.get("OMP_WAIT_POLICY", "PASSIVE")))
                if rows["forward"][2]:
                    # The forward itself, in its process (the model loaded before the clock starts).
                    wall_s, cpu_s = map(float, out.strip().splitlines()[-1].split())
                    rows["forward"] = (wall_s,) + rows["forward"][1:]
                    cpu[(size, "forward")] = cpu_s
                    print(f"  {size} forward itself: {wall_s:.2f} s, CPU {cpu_s:.2f} s", file=sys.stderr, flush=True)
            acts = os.path.join(d, "acts.npz")
            if "capture" in steps:
                # python -m precis capture: streamed to disk, batches by its estimate (no --max-memory).
                step("capture", [py, "-m", "precis", "capture", "--model", model_dir, "--inputs", ids_path, "-o", acts,
                                 "--force", "-q"])
            if "capture-in-memory" in steps:
                step("capture-in-memory", [py, "-c", CAPTURE_IN_MEMORY, model_dir, ids_path,
                                           os.path.join(d, "acts-in-memory.npz")])
            ds = os.path.join(d, "model.h5")
            if "import" in steps and os.path.exists(acts):
                step("import", [PRECIS, "import", "--model", model_dir, "--activations", acts, "-o", ds, "--force", "-q"])
                if os.path.exists(ds):
                    rows["import"] = rows["import"] + (os.path.getsize(ds),)
            if "run" in steps and os.path.exists(ds):
                step("run", [PRECIS, "run", ds, "--backend", "cpu", "--recipes", "int8", "-o", os.path.join(d, "run"),
                             "--force", "--quiet", "--min-samples", "1", "--max-samples", "1", "--max-time-ms", "1"])
            for recipe, rows_opt in (("int8", []), ("bf16", []), ("int8", ["--layer-rows", "all"]),
                                     ("bf16", ["--layer-rows", "all"])):
                name = f"verify-{recipe}" + ("-all" if rows_opt else "")
                if name not in steps:
                    continue
                plan = os.path.join(d, f"plan-{recipe}.json")
                with open(plan, "w") as f:
                    json.dump({"*": recipe}, f)
                step(name, [py, "-m", "precis", "verify", "--model", model_dir, "--plan", plan, "--inputs", ids_path,
                            "-o", os.path.join(d, name), "--force", "-q"] + rows_opt)
                report = os.path.join(d, name, "report.json")
                if rows[name][2] and os.path.exists(report):
                    # verify's own time (verify.seconds: the model loaded before it starts), as the forward's.
                    with open(report) as f:
                        v = json.load(f)["verify"]
                    seconds = v["seconds"]
                    rows[name] = (seconds,) + rows[name][1:]
                    cpu[(size, name)] = v.get("cpu_seconds")
                    print(f"  {size} {name} itself: {seconds:.1f} s, CPU {cpu[(size, name)]} s", file=sys.stderr, flush=True)
            table.append((size, params, weights, rows))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)

    print(f"\n{args.windows} windows x {args.tokens} tokens, {os.cpu_count()} CPUs; targets: verify int8 <= 5x forward, "
          f"bf16 <= 10x; peak RSS <= fp32 weights + 1.5 GB\n")
    print(f"load average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())} (the machine is shared: CPU "
          "seconds, all threads, beside wall)\n")
    print("| model | step | wall s | x forward | target | CPU s | CPU x forward | peak RSS GB | RSS - fp32 weights GB | RSS target |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for size, params, weights, rows in table:
        fwd = rows.get("forward", (None,))[0]
        for name in STEPS[:2] + OPTIONAL_STEPS + STEPS[2:]:
            if name not in rows:
                continue
            w, rss, ok, *extra = rows[name]
            ratio = w / fwd if fwd and ok else None
            target = {"verify-int8": 5.0, "verify-bf16": 10.0}.get(name)
            verdict = "" if target is None or ratio is None else (" ok" if ratio <= target else " over")
            over = (rss - weights) / 1e9
            label = name + ("" if ok else " (failed)")
            if name.endswith("-all"):
                label += " (--layer-rows all)"
            if name == "import" and len(extra) > 1:
                label += f" ({extra[1] / 1e9:.2f} GB dataset)"
            c, c_fwd = cpu.get((size, name)), cpu.get((size, "forward"))
            c_ratio = f"{c / c_fwd:.1f}" if c is not None and c_fwd else ""
            print(f"| {size} ({params / 1e6:.0f}M) | {label} | {w:.1f} | {'' if ratio is None else f'{ratio:.1f}'} | "
                  f"{'' if target is None else f'<= {target:.0f}x{verdict}'} | {'' if c is None else f'{c:.1f}'} | "
                  f"{c_ratio} | {fmt_gb(rss)} | {over:+.2f} | "
                  f"{'ok' if over <= 1.5 else 'over'} |")


if __name__ == "__main__":
    main()
