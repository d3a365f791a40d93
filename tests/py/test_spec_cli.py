#!/usr/bin/python3
"""Recipe specs on the command line (issue 13): `precis explain` plans int8, fp8 and bf16 on odd and
batched shapes as the cuda backend would (no GPU), `precis recipes` answers per backend, `--recipes`
takes presets and specs with the splitting rule, rows carry canonical specs in every report format,
and `compare` pairs a preset with the same spec written out.

Runs with Debian's python3 + python3-h5py + python3-numpy; env PRECIS (binary)."""
import csv
import json
import os
import shutil
import subprocess
import sys
import scratch  # tests/py/scratch.py: scratch under the build tree, removed on a signal

try:
    import h5py
    import numpy as np
except ImportError as exc:  # pragma: no cover
    print(f"skipped: {exc}")
    sys.exit(77)

PRECIS = os.environ.get("PRECIS") or os.path.join(os.environ.get("PRECIS_BUILD_DIR", "build"), "precis")
FAST = ["--backend", "cpu", "--quiet", "--max-time-ms", "1", "--min-samples", "1", "--max-samples", "1"]
BF16 = "a=bf16,b=bf16,acc=fp32,out=bf16,scale=dynamic,smooth=none,split=none"
FP8 = "a=e4m3@tensor,b=e4m3@tensor,acc=fp32,out=bf16,scale=dynamic,smooth=none,split=none"
FP8_FAST = "a=e4m3@tensor,b=e4m3@tensor,acc=fp32fast,out=bf16,scale=dynamic,smooth=none,split=none"

failures = []


def check(cond, what):
    print(f"{'ok  ' if cond else 'FAIL'} {what}")
    if not cond:
        failures.append(what)


def precis(*args):
    return subprocess.run([PRECIS, *args], capture_output=True, text=True)


def write_dataset(path):
    rng = np.random.default_rng(3)
    with h5py.File(path, "w") as f:
        f.attrs.update(format="precis-dataset", format_version=1, generator="t", created_utc="now", seed=0, suite="",
                       dataset_id="spec-cli")
        for name, m, n, k, batch, b_batched in (("odd", 3, 5, 7, 1, False), ("folded", 3, 5, 7, 2, False),
                                                 ("strided", 3, 5, 7, 3, True)):
            a = rng.standard_normal((batch, m, k)).astype(np.float32)
            b = rng.standard_normal((batch, k, n) if b_batched else (k, n)).astype(np.float32)
            w = f.create_group(f"workloads/{name}")
            w.attrs.update(kind="gemm", m=m, n=n, k=k, batch=batch, description="", a_dist="", b_dist="")
            w["a"], w["b"] = a, b
            w["c_ref"] = a.astype(np.float64) @ b.astype(np.float64)
            w["ab_abs"] = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))


def explain(dataset, *extra):
    proc = precis("explain", dataset, "--recipes", "int8,fp8,bf16", "--json", *extra)
    check(proc.returncode == 0, f"explain {' '.join(extra)}: exit 0 ({proc.stderr.strip()})")
    cases = json.loads(proc.stdout)["cases"] if proc.returncode == 0 else []
    return {(c["workload"], c["recipe"]): c for c in cases}


def test_explain(dataset):
    cases = explain(dataset)
    check(len(cases) == 9, "explain: 3 workloads x 3 recipes")
    # bf16 on 3x5x7: the row-major product as C^T = B^T A^T, NN, no padding.
    p = cases[("odd", "bf16")]["plan"]
    check(cases[("odd", "bf16")]["spec"] == BF16, "explain bf16: canonical spec")
    check((p["transa"], p["transb"], p["lt_op"]) == ("CUBLAS_OP_N", "CUBLAS_OP_N", "NN"), "bf16: NN")
    check((p["lt_m"], p["lt_n"], p["lt_k"]) == (5, 3, 7), "bf16: lt m,n,k = n,m,k")
    check((p["lda"], p["ldb"], p["ldc"], p["ldd"]) == (5, 7, 5, 5), "bf16: lda=n ldb=k ldc=ldd=n")
    check(p["lt_types"] == "A CUDA_R_16BF, B CUDA_R_16BF, C/D CUDA_R_16BF, scale CUDA_R_32F", "bf16: types")
    check(p["lt_compute_type"] == "CUBLAS_COMPUTE_32F", "bf16: compute 32F")
    check(p["padding"] == "rows 3->3, n 5->5, k 7->7 (zeros)", "bf16: no padding")
    check(p["a_scale_pointer"] == "none" and p["dequant"] == "none", "bf16: no scales, no dequant")
    check(p["batch_mode"] == "single" and p["lt_batch_count"] == 1, "bf16: a single GEMM")
    check(p["workspace_limit_bytes"] == 32 << 20, "bf16: the workspace the backend offers")
    # fp8: TN, every dimension padded to 16, per-tensor scale pointers swapped with the operands.
    p = cases[("odd", "fp8")]["plan"]
    check(cases[("odd", "fp8")]["spec"] == FP8, "explain fp8: canonical spec")
    check((p["transa"], p["transb"], p["lt_op"]) == ("CUBLAS_OP_T", "CUBLAS_OP_N", "TN"), "fp8: TN")
    check((p["lt_m"], p["lt_n"], p["lt_k"]) == (16, 16, 16), "fp8: padded to 16")
    check((p["lda"], p["ldb"], p["ldd"]) == (16, 16, 16), "fp8: leading dimensions 16")
    check(p["lt_types"] == "A CUDA_R_8F_E4M3, B CUDA_R_8F_E4M3, C/D CUDA_R_16BF, scale CUDA_R_32F", "fp8: types")
    check(p["padding"] == "rows 3->16, n 5->16, k 7->16 (zeros)", "fp8: padding")
    check((p["a_scale_pointer"], p["b_scale_pointer"]) == ("workload b", "workload a"), "fp8: scale pointers")
    check("written transposed" in p["write_b"] and "zeroed" in p["lt_a"], "fp8: B transposed into a zeroed buffer")
    check(p["widen"] != "none", "fp8: bf16 D widened for read-back")
    check(p["fast_accum"].startswith("0"), "fp8: no fast accumulation")
    # fp8-fast: fp8's plan with CUBLASLT_MATMUL_DESC_FAST_ACCUM set; f32fast spells the same spec.
    proc = precis("explain", dataset, "--recipes", "fp8-fast", "--workloads", "odd", "--json")
    fast = json.loads(proc.stdout)["cases"][0] if proc.returncode == 0 else {}
    check(fast.get("spec") == FP8_FAST and fast.get("status") == "native", "explain fp8-fast: acc=fp32fast, native")
    q = fast.get("plan", {})
    check(q.get("lt_route") == "fp8-fast" and "CUBLASLT_MATMUL_DESC_FAST_ACCUM = 1" in q.get("fast_accum", ""),
          "explain fp8-fast: the plan sets FAST_ACCUM")
    check(all(q.get(key) == p[key] for key in ("lt_types", "lt_op", "padding", "a_scale_pointer", "lt_compute_type")),
          "explain fp8-fast: otherwise fp8's plan")
    proc = precis("explain", dataset, "--recipes", "a=e4m3,acc=f32fast,out=bf16", "--workloads", "odd")
    check(proc.returncode == 0 and "CUBLASLT_MATMUL_DESC_FAST_ACCUM = 1" in proc.stdout and "acc=fp32fast" in proc.stdout,
          "explain: acc=f32fast with e4m3 operands is fp8-fast (text output)")
    # int8: the IMMA requirements (TN, multiples of 4), int32 accumulators and a dequantization.
    p = cases[("odd", "int8")]["plan"]
    check(p["transa"] == "CUBLAS_OP_T" and p["lt_op"] == "TN", "int8: TN")
    check(p["lt_m"] % 4 == 0 and p["lt_k"] % 4 == 0 and p["lt_m"] >= 5 and p["lt_k"] >= 7, "int8: m, k multiples of 4")
    check(p["lda"] % 4 == 0 and p["ldb"] % 4 == 0 and p["ldc"] % 4 == 0, "int8: lda, ldb, ldc multiples of 4")
    check(p["lt_types"] == "A CUDA_R_8I, B CUDA_R_8I, C/D CUDA_R_32I, scale CUDA_R_32I", "int8: types")
    check(p["lt_compute_type"] == "CUBLAS_COMPUTE_32I", "int8: compute 32I")
    check(p["dequant"] != "none" and p["row_scale_count"] == 3 and p["col_scale_count"] == 5, "int8: dequant, scales")
    # Batches: a shared b folds the batch into m; a b per element is a strided batched GEMM.
    p = cases[("folded", "bf16")]["plan"]
    check(p["batch_mode"].startswith("folded") and p["lt_n"] == 6 and p["lt_batch_count"] == 1, "folded: 6 rows, 1 GEMM")
    p = cases[("folded", "int8")]["plan"]
    check(p["batch_mode"].startswith("folded") and p["row_scale_count"] == 6, "int8 folded: one scale per row")
    p = cases[("strided", "fp8")]["plan"]
    check(p["batch_mode"].startswith("strided") and p["lt_batch_count"] == 3, "fp8 strided: batch_count 3")
    check("batch 3 (stride 256)" in p["lt_a"] and "batch 3 (stride 256)" in p["lt_d"], "fp8 strided: 16x16 strides")
    p = cases[("strided", "int8")]["plan"]
    check(p["batch_mode"].startswith("strided") and p["col_scale_count"] == 15, "int8 strided: 3x5 column scales")
    # Another device: the route's minimum compute capability, or a spec no route runs.
    cases = explain(dataset, "--cc", "8.0")
    check(cases[("odd", "fp8")]["status"] == "unsupported" and "sm_89" in cases[("odd", "fp8")]["reason"]
          and "sm_80" in cases[("odd", "fp8")]["reason"], "explain --cc 8.0: fp8 unsupported, says why")
    check(cases[("odd", "bf16")]["status"] == "native", "explain --cc 8.0: bf16 native")
    proc = precis("explain", dataset, "--recipes", "a=e2m1,b=e2m1", "--workloads", "odd")
    check(proc.returncode == 0 and "unsupported" in proc.stdout and "VEC32_UE8M0" in proc.stdout,
          "explain: e2m1 unsupported on cuda, naming the scale mode")
    proc = precis("explain", dataset, "--recipes", "w4a16", "--workloads", "odd")
    check(proc.returncode == 0 and "): emulated" in proc.stdout and "dequantized on the host" in proc.stdout
          and "CUDA_R_16BF" in proc.stdout, "explain: w4a16 emulated, planned as the bf16 GEMM")
    proc = precis("explain", dataset, "--recipes", "int8", "--workloads", "odd", "--cc", "sm_75")
    check(proc.returncode == 0 and "CUBLAS_COMPUTE_32I" in proc.stdout and "lda" in proc.stdout, "explain: text output")
    for args, what in ((["--cc", "nine"], "--cc"), (["--recipes", "fp9"], "fp9"), (["--workloads", "nope"], "nope"),
                       (["--recipes", "a=bf16@row"], "a=bf16@row"), (["--cublaslt-version", "13.x"], "--cublaslt-version"),
                       (["--cublaslt-version", "131"], "--cublaslt-version")):
        proc = precis("explain", dataset, *args)
        check(proc.returncode == 2 and what in proc.stderr, f"explain {' '.join(args)}: exit 2 naming it")
    # The cuBLASLt version the plan is made for (issue 14.5): below 13.2 an int8 strided batch is one
    # call per batch matrix; 13.2 keeps the batched call; the version is said in both outputs.
    for version, calls in (("13.1.0", 3), ("130100", 3), ("13.2.0", 1)):
        proc = precis("explain", dataset, "--recipes", "int8", "--workloads", "strided", "--cublaslt-version", version,
                      "--json")
        root = json.loads(proc.stdout) if proc.returncode == 0 else {}
        said = "%d.%d.%d" % (int(version) // 10000, int(version) // 100 % 100, int(version) % 100) \
            if "." not in version else version
        check(root.get("cublaslt_version") == said, f"explain --cublaslt-version {version}: recorded as {said}")
        plan = root["cases"][0]["plan"] if root.get("cases") else {}
        check(plan.get("lt_calls") == calls, f"explain --cublaslt-version {version}: int8 strided lt_calls {calls}")
        check(("lt_split" in plan) == (calls > 1), f"explain --cublaslt-version {version}: lt_split says why")
    proc = precis("explain", dataset, "--recipes", "int8", "--workloads", "strided", "--cublaslt-version", "13.1.0")
    check(proc.returncode == 0 and "with cuBLASLt 13.1.0" in proc.stdout, "explain text: names the cuBLASLt version")
    # Issue 19: the number of cuBLASLt calls of each high-precision recipe and their types.
    expect = {"fp64": (1, "CUBLAS_COMPUTE_64F"), "3xtf32": (3, "CUBLAS_COMPUTE_32F_FAST_TF32"),
              "bf16x6": (6, "CUDA_R_16BF"), "bf16x9": (9, "CUDA_R_16BF"), "ozaki-int8-4": (10, "CUDA_R_8I")}
    for version, per_product in (("13.2.0", 1), ("13.1.0", 3)):
        cases = explain(dataset, "--recipes", ",".join(expect), "--cublaslt-version", version)
        for name, (calls, types) in expect.items():
            c = cases.get(("strided", name), {})
            p = c.get("plan", {})
            if name == "fp64":
                ok = p.get("lt_calls") == 1 and p.get("lt_compute_type") == types and \
                    p.get("lt_types") == "A CUDA_R_64F, B CUDA_R_64F, C/D CUDA_R_64F, scale CUDA_R_64F"
            else:
                n = per_product if name.startswith("ozaki") else 1  # cuBLASLt 13.1 splits int8 batches
                ok = p.get("lt_calls_total") == calls * n and p.get("split_products") == calls and \
                    types in p.get("split_call_types", "") and p.get("lt_calls") == n
            check(c.get("status") == "native" and ok, f"explain {name} (cuBLASLt {version}): {calls} call(s) of {types}")
    p = explain(dataset, "--recipes", "3xtf32", "--workloads", "odd")[("odd", "3xtf32")]["plan"]
    check(p.get("split_order") == "a0*b1 a1*b0 a0*b0", "explain 3xtf32: the cpu backend's order, big*big last")
    # Ozaki scheme II: no cuda plan; explain says so and why, for both variants.
    cases = explain(dataset, "--recipes", "ozaki2-int8-16,ozaki2-int8-fast-14", "--workloads", "odd")
    for name, gemms in (("ozaki2-int8-16", 17), ("ozaki2-int8-fast-14", 14)):
        c = cases.get(("odd", name), {})
        check(c.get("status") == "unsupported" and "Ozaki scheme II is not built on the cuda backend" in c.get("reason", "")
              and f"{gemms} int8 GEMMs" in c.get("reason", ""), f"explain {name}: unsupported on cuda, with the reason")
    cases = explain(dataset, "--recipes", "fp64-emu", "--cc", "10.0")
    check(cases[("odd", "fp64-emu")]["plan"]["lt_compute_type"] == "CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT",
          "explain --cc 10.0: fp64-emu is one call with the emulated compute type")
    proc = precis("recipes", "--cublaslt-version", "13.1.0")
    check(proc.returncode == 2 and "--cublaslt-version" in proc.stderr, "recipes: --cublaslt-version is explain's alone")


def test_explain_fp8_scale_modes(path):
    """Issue 16: fp8-rowwise, fp8-block and the fp8 output planned on shapes that are not multiples of
    128 or 16: the scale modes, the scale tensor shapes and alignment, the padding, and the refusals."""
    rng = np.random.default_rng(5)
    with h5py.File(path, "w") as f:
        f.attrs.update(format="precis-dataset", format_version=1, generator="t", created_utc="now", seed=0, suite="",
                       dataset_id="fp8-scale-modes")
        for name, m, n, k, batch, b_batched in (("wide", 17, 200, 300, 1, False), ("strided", 3, 5, 7, 3, True)):
            a = rng.standard_normal((batch, m, k)).astype(np.float32)
            b = rng.standard_normal((batch, k, n) if b_batched else (k, n)).astype(np.float32)
            w = f.create_group(f"workloads/{name}")
            w.attrs.update(kind="gemm", m=m, n=n, k=k, batch=batch, description="", a_dist="", b_dist="")
            w["a"], w["b"] = a, b
            w["c_ref"] = a.astype(np.float64) @ b.astype(np.float64)
            w["ab_abs"] = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    recipes = "fp8-rowwise,fp8-block,a=e4m3@tensor,b=e4m3@tensor,out=e4m3"
    proc = precis("explain", path, "--recipes", recipes, "--json", "--cc", "90", "--cublaslt-version", "13.1.0")
    check(proc.returncode == 0, f"explain fp8 scale modes: exit 0 ({proc.stderr.strip()})")
    cases = {(c["workload"], c["recipe"]): c for c in json.loads(proc.stdout)["cases"]} if proc.returncode == 0 else {}
    out8 = "a=e4m3@tensor,b=e4m3@tensor,acc=fp32,out=e4m3,scale=dynamic,smooth=none,split=none"
    row, blk, e4 = cases.get(("wide", "fp8-rowwise"), {}), cases.get(("wide", "fp8-block"), {}), cases.get(("wide", out8), {})
    check(row.get("status") == "native" and blk.get("status") == "native" and e4.get("status") == "native",
          "explain: fp8-rowwise, fp8-block and out=e4m3 native on sm_90")
    p = row.get("plan", {})
    check(p.get("a_scale_mode", "").startswith("OUTER_VEC_32F: 208 fp32") and
          p.get("b_scale_mode", "").startswith("OUTER_VEC_32F: 32 fp32"), "explain fp8-rowwise: OUTER_VEC_32F vectors")
    check(p.get("padding") == "rows 17->32, n 200->208, k 300->304 (zeros)", "explain fp8-rowwise: padded to 16")
    p = blk.get("plan", {})
    check(p.get("a_scale_mode", "").startswith("BLK128x128_32F: 3x2 fp32 grid") and "t*1 + u*4" in p.get("a_scale_mode", "")
          and "16-byte aligned" in p.get("a_scale_mode", ""), "explain fp8-block: B's 128x128 scales, ld padded to 4")
    check(p.get("b_scale_mode", "").startswith("VEC128_32F: 3x32 fp32 grid") and "t*32 + u*1" in p.get("b_scale_mode", ""),
          "explain fp8-block: A's 1x128 scales, rows contiguous")
    data = 304 * 208 + 304 * 32 + 208 * 32 * 2 + 208 * 32 * 4
    check(p.get("device_bytes") == data + (8 + 96) * 4, "explain fp8-block: device bytes count the scale tensors")
    p = e4.get("plan", {})
    check("AMAX_D_POINTER" in p.get("d_scale", "") and "C CUDA_R_16BF, D CUDA_R_8F_E4M3" in p.get("lt_types", ""),
          "explain out=e4m3: scale_D/amax_D, C its own bf16 buffer")
    for recipe in ("fp8-rowwise", "fp8-block"):
        c = cases.get(("strided", recipe), {})
        check(c.get("status") == "unsupported" and "no batch stride" in c.get("reason", ""),
              f"explain {recipe}: a b per batch element refused with the reason")
    proc = precis("explain", path, "--recipes", recipes, "--json", "--cc", "8.9", "--workloads", "wide")
    cases = json.loads(proc.stdout)["cases"] if proc.returncode == 0 else []
    check([c["status"] for c in cases] == ["unsupported", "unsupported", "native"] and "sm_90" in cases[0]["reason"],
          "explain --cc 8.9: the scale modes need sm_90, the per-tensor fp8 output runs")
    proc = precis("explain", path, "--recipes", "fp8-block", "--json", "--workloads", "wide", "--cublaslt-version", "12.8.0")
    cases = json.loads(proc.stdout)["cases"] if proc.returncode == 0 else []
    check(len(cases) == 1 and cases[0]["status"] == "unsupported" and "12.9" in cases[0]["reason"],
          "explain --cublaslt-version 12.8.0: fp8-block needs cuBLASLt 12.9")
    # Blackwell's block-scaled routes: rows 17->32, n 200->224, k 300->384; one scale byte per k-block
    # (16 for nv, 32 for mx) per row of a / column of b, padded to 4 k-blocks x 128 in the tiled layout.
    proc = precis("explain", path, "--recipes", "nvfp4,mxfp4,mxfp8", "--json", "--cc", "10.0", "--workloads", "wide",
                  "--cublaslt-version", "13.1.0")
    cases = {c["recipe"]: c for c in json.loads(proc.stdout)["cases"]} if proc.returncode == 0 else {}
    check(all(cases.get(r, {}).get("status") == "native" for r in ("nvfp4", "mxfp4", "mxfp8")),
          "explain --cc 10.0: nvfp4, mxfp4, mxfp8 native")
    for recipe, block, mode, code_bytes in (("nvfp4", 16, "VEC16_UE4M3", 0.5), ("mxfp4", 32, "VEC32_UE8M0", 0.5),
                                            ("mxfp8", 32, "VEC32_UE8M0", 1)):
        p = cases.get(recipe, {}).get("plan", {})
        kb = 384 // block
        check(p.get("padding") == "rows 17->32, n 200->224, k 300->384 (zeros)", f"explain {recipe}: padding")
        check(p.get("a_scale_mode", "").startswith(f"{mode}: {kb} k-blocks of {block} x 224 columns of b")
              and f"padded to {kb}x256" in p["a_scale_mode"] and p["a_scale_mode"].endswith(f"{kb * 256} bytes"),
              f"explain {recipe}: b's block scales, {mode}, padded to 128 columns")
        check(p.get("b_scale_mode", "").endswith(f"{kb * 128} bytes"), f"explain {recipe}: a's block scales")
        data = int((384 * 224 + 384 * 32) * code_bytes) + 224 * 32 * 2 + 224 * 32 * 4
        check(p.get("device_bytes") == data + kb * 256 + kb * 128,
              f"explain {recipe}: device bytes count packed codes and padded scales ({p.get('device_bytes')})")
        check(p.get("transa") == "CUBLAS_OP_T" and p.get("transb") == "CUBLAS_OP_N", f"explain {recipe}: TN")
        check(("alpha" in p) == (recipe == "nvfp4"), f"explain {recipe}: tensor scales in alpha for nv only")
    check("CUDA_R_4F_E2M1" in cases.get("nvfp4", {}).get("plan", {}).get("lt_types", ""), "explain nvfp4: fp4 operands")
    proc = precis("explain", path, "--recipes", "nvfp4", "--json", "--cc", "9.0", "--workloads", "wide,strided")
    cases = json.loads(proc.stdout)["cases"] if proc.returncode == 0 else []
    check(len(cases) == 2 and cases[0]["status"] == "emulated" and cases[0]["plan"]["lt_route"] == "bf16"
          and "alpha = fp32(s_a * s_b)" in cases[0]["plan"]["emulation"], "explain --cc 9.0: nvfp4 emulated in bf16")
    proc = precis("explain", path, "--recipes", "nvfp4", "--json", "--cc", "10.0", "--workloads", "strided")
    cases = json.loads(proc.stdout)["cases"] if proc.returncode == 0 else []
    check(len(cases) == 1 and cases[0]["status"] == "unsupported" and "no batch stride" in cases[0]["reason"],
          "explain --cc 10.0: nvfp4 with a b per batch element refused")
    proc = precis("explain", path, "--recipes", "nvfp4", "--json", "--cc", "10.0", "--workloads", "wide",
                  "--cublaslt-version", "12.7.0")
    cases = json.loads(proc.stdout)["cases"] if proc.returncode == 0 else []
    check(len(cases) == 1 and cases[0]["status"] == "unsupported" and "12.8" in cases[0]["reason"],
          "explain --cublaslt-version 12.7.0: nvfp4 needs cuBLASLt 12.8")


def test_recipes():
    proc = precis("recipes", "--json")
    check(proc.returncode == 0, "recipes --json")
    listed = json.loads(proc.stdout)["recipes"]
    original = ["fp32", "tf32", "fp16", "fp16acc16", "bf16", "int8", "fp8"]
    issue16 = ["fp8-rowwise", "fp8-block", "w8a16", "w4a16", "w4a16-asym", "mxfp8", "mxfp4", "nvfp4", "int8-sq"]
    high = ["fp64", "3xtf32", "bf16x3", "bf16x6", "bf16x9"] + ["ozaki-int8-%d" % n for n in range(3, 9)]
    ozaki2 = [name for n in range(8, 21) for name in ("ozaki2-int8-%d" % n, "ozaki2-int8-fast-%d" % n)]
    check([r["name"] for r in listed] == original + issue16 + ["fp8-fast", "fp8-block-ue8m0", "mxfp6-e2m3", "mxfp6-e3m2", "w4a8", "w4afp8", "w3a16", "w2a16"] + high
          + ozaki2 + ["fp64-emu"],
          "recipes: presets in order")
    # Ozaki scheme II: cpu only; the cuda backend refuses it and says why.
    check(all(r["backends"]["cpu"]["status"] == "emulated" and r["backends"]["cuda"]["status"] == "unsupported"
              and "Ozaki scheme II is not built on the cuda backend" in r["backends"]["cuda"]["reason"]
              for r in listed if r["name"] in ozaki2), "recipes: ozaki2 emulated on cpu, refused on cuda with the reason")
    check(all(r["backends"]["cpu"]["status"] == "emulated" for r in listed if r["name"] != "fp64-emu"),
          "recipes: every preset but cuBLAS's emulation emulated on cpu")
    emu = [r for r in listed if r["name"] == "fp64-emu"][0]["backends"]
    check(emu["cpu"]["status"] == "unsupported" and "cuda backend only" in emu["cpu"]["reason"]
          and emu["cuda"]["status"] == "unsupported" and "sm_100" in emu["cuda"]["reason"],
          "recipes: fp64-emu is cuda only and needs Blackwell")
    native16 = ["fp8-rowwise", "fp8-block", "fp8-fast"]
    check(all(r["backends"]["cuda"]["status"] == "native" for r in listed if r["name"] in original + native16),
          "recipes: the original presets, fp8-rowwise, fp8-block and fp8-fast native on sm_90")
    fast = [r for r in listed if r["name"] == "fp8-fast"]
    check(len(fast) == 1 and fast[0]["spec"] == FP8_FAST and "route fp8-fast" in fast[0]["backends"]["cuda"]["how"],
          "recipes: fp8-fast listed with acc=fp32fast and its own cuBLASLt route")
    emulated = {"w8a16", "w4a16", "w4a16-asym", "mxfp8", "mxfp4", "nvfp4"}
    check(all(r["backends"]["cuda"]["status"] == "emulated" and "not a fused kernel's speed" in r["backends"]["cuda"]["how"]
              for r in listed if r["name"] in emulated),
          "recipes: weight-only, MX and NVFP4 emulated on cuda (sm_90) by dequantization")
    nv = [r for r in listed if r["name"] == "nvfp4"][0]["backends"]["cuda"]["how"]
    check("alpha" in nv, "recipes: nvfp4's emulation puts the tensor scales in alpha")
    proc = precis("recipes", "--json", "--cc", "10.0")
    blackwell = {r["name"]: r["backends"]["cuda"] for r in json.loads(proc.stdout)["recipes"]}
    check(all(blackwell[name]["status"] == "native" and "route %s (sm_100+)" % name in blackwell[name]["how"]
              for name in ("mxfp8", "mxfp4", "nvfp4")), "recipes --cc 10.0: mxfp8, mxfp4, nvfp4 native")
    check(all(r["backends"]["cuda"]["status"] == "unsupported" and "issue 16" in r["backends"]["cuda"]["reason"]
              for r in listed if r["name"] in set(issue16) - emulated - set(native16)),
          "recipes: the other issue 16 presets unsupported on cuda, with the plan")
    # Issue 19: fp64 one cuBLASLt call, the splits one GEMM per partial product.
    products = {"3xtf32": 3, "bf16x3": 3, "bf16x6": 6, "bf16x9": 9}
    products.update({"ozaki-int8-%d" % n: n * (n + 1) // 2 for n in range(3, 9)})
    check(all(r["backends"]["cuda"]["status"] == "native" and
              ("route fp64" in r["backends"]["cuda"]["how"] if r["name"] == "fp64" else
               "%d cuBLASLt GEMMs" % products[r["name"]] in r["backends"]["cuda"]["how"])
              for r in listed if r["name"] in high),
          "recipes: the high-precision presets native on cuda, with their number of GEMMs")
    proc = precis("recipes", "--json", "--cc", "100", "--recipes", "fp64-emu")
    check(json.loads(proc.stdout)["recipes"][0]["backends"]["cuda"]["status"] == "native",
          "recipes --cc 100: fp64-emu native (cuBLAS's emulation, still found at run time)")
    check([r["name"] for r in listed if r["baseline"]] == ["fp32"], "recipes: one baseline")
    proc = precis("recipes", "--json", "--cc", "75", "--recipes", "bf16,int8,a=e4m3@row,b=e4m3@col,acc=fp16")
    listed = json.loads(proc.stdout)["recipes"]
    check(listed[0]["backends"]["cuda"]["status"] == "unsupported" and "sm_75" in listed[0]["backends"]["cuda"]["reason"],
          "recipes --cc 75: bf16 unsupported with the device")
    check(listed[1]["backends"]["cuda"]["status"] == "native", "recipes --cc 75: int8 native")
    check(listed[2]["backends"]["cpu"]["status"] == "unsupported" and "acc=fp16" in listed[2]["backends"]["cpu"]["reason"],
          "recipes: fp8 rowwise with fp16 accumulation unsupported on cpu with a reason")
    proc = precis("recipes")
    check(proc.returncode == 0 and "a=s8@row:sym,b=s8@col:sym" in proc.stdout, "recipes: text lists specs")


def test_run_with_specs(tmp, dataset):
    out = os.path.join(tmp, "specs")
    loud = [arg for arg in FAST if arg != "--quiet"]  # the stdout table
    proc = precis("run", dataset, "--recipes", "fp8,a=bf16,b=bf16,out=f32,int8", "-o", out, *loud)
    check(proc.returncode in (0, 3), f"run with a spec between presets ({proc.stderr.strip()[-200:]})")
    spec = "a=bf16,b=bf16,acc=fp32,out=fp32,scale=dynamic,smooth=none,split=none"
    check(" spec1 " in proc.stdout and f"spec1 = {spec}" in proc.stdout, "stdout table: a long spec as spec1, with a legend")
    with open(os.path.join(out, "report.json"), encoding="utf-8") as fp:
        report = json.load(fp)
    spec = "a=bf16,b=bf16,acc=fp32,out=fp32,scale=dynamic,smooth=none,split=none"
    check([r["recipe"] for r in report["rows"][:3]] == ["fp8", spec, "int8"], "rows: preset names, then the spec's canonical form")
    check(all(r["spec"] for r in report["rows"]) and report["rows"][0]["spec"] == FP8, "every row carries its spec")
    with open(os.path.join(out, "report.csv"), newline="", encoding="utf-8") as fp:
        rows = list(csv.DictReader(fp))
    check(rows[1]["spec"] == spec, "report.csv: spec column")
    with open(os.path.join(out, "report.md"), encoding="utf-8") as fp:
        check(FP8 in fp.read(), "report.md: specs")
    # fp8-fast runs on the cpu backend as its own row, with its spec and the accumulation model said.
    proc = precis("run", dataset, "--recipes", "fp8,fp8-fast", "-o", os.path.join(tmp, "fast"), *FAST)
    with open(os.path.join(tmp, "fast", "report.json"), encoding="utf-8") as fp:
        rows = json.load(fp)["rows"]
    fast = [r for r in rows if r["recipe"] == "fp8-fast"]
    check(proc.returncode in (0, 3) and len(fast) == 3 and all(r["spec"] == FP8_FAST and r["status"] == "ok" for r in fast),
          "run fp8-fast: ok rows with acc=fp32fast")
    proc = precis("run", dataset, "--recipes", "bf16,a=bf16,out=bf16", "-o", os.path.join(tmp, "dup"), *FAST)
    check(proc.returncode == 2 and "same recipe" in proc.stderr, "run: the same spec twice is refused, exit 2")
    proc = precis("run", dataset, "--recipes", "a=e4m3@row,b=e4m3@col,acc=fp16", "-o", os.path.join(tmp, "unsup"), *FAST)
    with open(os.path.join(tmp, "unsup", "report.json"), encoding="utf-8") as fp:
        rows = json.load(fp)["rows"]
    check(all(r["status"] == "unsupported" and "acc=fp16" in r["reason"] for r in rows), "a valid spec the cpu lacks: unsupported rows")
    # compare pairs the preset bf16 with the same spec written out.
    base, new = os.path.join(tmp, "base"), os.path.join(tmp, "new")
    precis("run", dataset, "--recipes", "bf16", "-o", base, *FAST)
    precis("run", dataset, "--recipes", "out=bf16,b=bf16,a=bf16", "-o", new, *FAST)
    cmp_json = os.path.join(tmp, "cmp.json")
    proc = precis("compare", os.path.join(base, "report.json"), os.path.join(new, "report.json"), "--json", cmp_json)
    with open(cmp_json, encoding="utf-8") as fp:
        cmp = json.load(fp)
    check(cmp["pairs"] == 3 and not cmp["only_in_base"] and not cmp["only_in_new"], "compare pairs a preset with its spec")


def main():
    tmp = scratch.mkdtemp(prefix="precis-spec-cli-")
    try:
        dataset = os.path.join(tmp, "ds.h5")
        write_dataset(dataset)
        test_explain(dataset)
        test_explain_fp8_scale_modes(os.path.join(tmp, "fp8.h5"))
        test_recipes()
        test_run_with_specs(tmp, dataset)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
