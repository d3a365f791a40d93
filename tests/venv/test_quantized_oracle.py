"""Independent NumPy oracle for the cpu backend's quantized GEMMs (issue 16): every new preset (and
out=fp32 twins of the float ones) runs through `precis run --save-outputs` on a small dataset written
here, and each output is recomputed as quantize -> dequantize -> matmul in NumPy, with the quantizer
of tests/venv/test_formats_oracle.py (itself checked bit for bit against ml_dtypes).

* Integer pairs with acc=s32 (int8-sq, s8/s4 k-groups) are exact: the oracle sums the integer codes
  in int64 per k-segment and applies c += f32(s_a*s_b) * f32(acc) in float32, in k order, and
  compares bit for bit.
* Float recipes sum in fp32 in an order OpenBLAS chooses, so they are compared with a tolerance:
  |c - c_oracle| <= (k + 8) * 2^-24 * sum_k |a_q||b_q| (+ half an ulp of the output format), with
  c_oracle = dequantized A x dequantized B in float64. The bound covers fp32 summation in any order,
  the rounding of each dequantized value and of the scale products (docs/formats.md).
* Sharpness: each float spec is also compared with the oracle of a neighbouring spec (another
  granularity, or the other MX scale rule), which must fall outside the tolerance somewhere -- so the
  tolerance cannot hide a wrong quantizer.

Run by tests/venv_test.sh with BUILD_DIR/venv's interpreter (ml_dtypes, h5py); needs $PRECIS or
$PRECIS_BUILD_DIR."""
import json
import os
import subprocess
import sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "py"))
import scratch  # noqa: E402  (tests/py/scratch.py: scratch under the build tree, removed on a signal)

import numpy as np

try:
    import h5py
    import ml_dtypes  # noqa: F401  (the quantizer oracle below needs it)
except ImportError as exc:  # pragma: no cover
    print(f"SKIP: {exc} (cmake/python-test-requirements.txt)", file=sys.stderr)
    sys.exit(77)

BUILD = os.environ.get("PRECIS_BUILD_DIR", "build")
PRECIS = os.environ.get("PRECIS") or os.path.join(BUILD, "precis")
os.environ.setdefault("PRECIS_QUANT_DRIVER", os.path.join(BUILD, "tests", "quantize_driver"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_formats_oracle as fo  # noqa: E402  (the quantizer oracle: reference(), dec(), group_shape())

F32 = np.float32
FAST = ["--backend", "cpu", "--quiet", "--max-time-ms", "1", "--min-samples", "1", "--max-samples", "1"]
failures = []


def check(cond, what):
    print(f"{'ok  ' if cond else 'FAIL'} {what}")
    if not cond:
        failures.append(what)


# ---- specs ----
def parse_operand(text):
    fmt, _, rest = text.partition("@")
    gran, _, conv = rest.partition(":")
    return dict(fmt=fmt, gran=gran or None, conv={"sym-half": "half"}.get(conv, conv or "sym"))


def parse_spec(spec):
    fields = dict(item.split("=", 1) for item in spec.split(","))
    return dict(a=parse_operand(fields["a"]), b=parse_operand(fields["b"]), acc=fields["acc"], out=fields["out"],
                smooth=fields.get("smooth", "none"), scale=fields.get("scale", "dynamic"))


SCALED = {"e4m3", "e5m2", "e2m1", "s8", "s4", "u4"}
INTS = {"s8", "s4", "u4"}


def round_to(x, fmt):
    x = np.asarray(x, F32)
    if fmt == "bf16":
        return x.astype(ml_dtypes.bfloat16).astype(F32)
    if fmt == "fp16":
        return x.astype(np.float16).astype(F32)
    if fmt == "fp32":
        return x
    raise ValueError(fmt)


def quantize(x, op, side):
    """x: a 2-D float32 matrix. Returns (dequantized, units, factor grid, group shape) per docs/formats.md."""
    r = fo.reference(x, op["fmt"], op["gran"], op["conv"], side)
    gr, gc = fo.group_shape(op["gran"], side, *x.shape)
    codes = fo.dec(op["fmt"], r["codes"]).astype(np.float64)
    zeros = np.repeat(np.repeat(r["zeros"].astype(np.float64), gr, 0), gc, 1)[: x.shape[0], : x.shape[1]]
    return r["deq"], codes - zeros, r["scales"], (gr, gc)


def quantize_static(x, op, amax):
    """scale=absmax: one scale from the calibration amax, s = amax / max_elem; beyond it elements saturate."""
    elem = op["fmt"]
    max_elem = fo.FLOAT_MAX.get(elem) or fo.INT_QMAX[elem] + (0.5 if op["conv"] == "half" else 0.0)
    s = F32(amax) / F32(max_elem)
    scale, d = (s, s) if s > 0 else (F32(1), F32(0))
    with np.errstate(all="ignore"):
        v = (x / d).astype(F32)
    if elem in fo.FLOAT_MAX:
        codes, _ = {"e4m3": fo.enc_e4m3, "e5m2": fo.enc_e5m2, "e2m1": fo.enc_e2m1}[elem](v, x)
        vals = fo.dec(elem, codes).astype(np.float64)
    else:
        qmax = fo.INT_QMAX[elem]
        qmin = -qmax - 1 if op["conv"] == "half" else -qmax
        vals = np.where(np.isnan(v), 0, np.clip(np.rint(v), qmin, qmax)).astype(np.float64)
    if d == 0:
        vals = np.zeros_like(vals)
    return (vals.astype(F32) * scale).astype(F32), vals, np.array([[scale]], F32), x.shape


def smooth(a, b, alpha, calib):
    """SmoothQuant (Xiao et al. 2023, eq. 4), written from the paper: s_j = max|X_j|^a / max|W_j|^(1-a)."""
    xmax = np.max(np.abs(calib.reshape(-1, calib.shape[-1]).astype(np.float64)), axis=0)
    wmax = np.max(np.abs(b.astype(np.float64)), axis=1)
    with np.errstate(divide="ignore"):
        s = np.where((xmax > 0) & (wmax > 0), xmax ** alpha / wmax ** (1 - alpha), 1.0)
    s = np.clip(s.astype(F32), F32(1e-5), F32(1e5))
    return (a / s).astype(F32), (b * s[:, None]).astype(F32), s


def expected(spec, a, b, calib):
    """c for one workload: a [batch, m, k], b [k, n] or [batch, k, n]. Returns (c, exact, bound)."""
    batch, m, k = a.shape
    mats = b if b.ndim == 3 else b[None]
    s = np.ones(k, F32)
    if spec["smooth"] != "none":
        assert mats.shape[0] == 1, "the oracle smooths shared weights only"
        a2, b2, s = smooth(a.reshape(-1, k), mats[0], float(spec["smooth"]), calib)
        a, mats = a2.reshape(a.shape), b2[None]
    A = a.reshape(batch * m, k)
    oa, ob = spec["a"], spec["b"]
    if spec["scale"] == "absmax":
        amax = F32(np.max(np.abs((calib.reshape(-1, k) / s).astype(F32))))
        quantize_a = lambda x, op, side: quantize_static(x, op, amax)  # noqa: E731
    else:
        assert spec["scale"] == "dynamic", spec["scale"]
        quantize_a = quantize
    a_sc, b_sc = oa["fmt"] in SCALED, ob["fmt"] in SCALED
    if oa["fmt"] in INTS and ob["fmt"] in INTS and spec["acc"] == "s32":
        return expected_int(spec, A, mats, batch, m, quantize_a), True, None
    # Float recipes: dequantized operands (weight-only: rounded to the other operand's format).
    if a_sc:
        da = quantize_a(A, oa, "a")[0]
        if not b_sc:
            da = round_to(da, ob["fmt"])
    else:
        da = round_to(A, oa["fmt"])
    if ob["fmt"] in SCALED and ob["gran"] == "tensor":
        stacked = quantize(mats.reshape(-1, mats.shape[-1]), ob, "b")[0]
        dbs = list(stacked.reshape(mats.shape))
    elif b_sc:
        dbs = [quantize(mb, ob, "b")[0] for mb in mats]
    else:
        dbs = [round_to(mb, ob["fmt"]) for mb in mats]
    if b_sc and not a_sc:
        dbs = [round_to(db, oa["fmt"]) for db in dbs]
    out, bound = [], []
    for i in range(batch):
        db = dbs[i if len(dbs) > 1 else 0].astype(np.float64)
        ai = da[i * m:(i + 1) * m].astype(np.float64)
        out.append(ai @ db)
        bound.append((k + 8) * 2.0 ** -24 * (np.abs(ai) @ np.abs(db)))
    return np.stack(out), False, np.stack(bound)


def expected_int(spec, A, mats, batch, m, quantize_a):
    """Exact integer sums per k-segment, scaled and summed in float32 in k order."""
    oa, ob = spec["a"], spec["b"]
    k = A.shape[1]
    _, ua, fa, (gra, gca) = quantize_a(A, oa, "a")
    outs = []
    for i in range(batch):
        mb = mats[i if mats.shape[0] > 1 else 0]
        _, ub, fb, (grb, gcb) = quantize(mb, ob, "b")
        rows = slice(i * m, (i + 1) * m) if mats.shape[0] > 1 else slice(0, batch * m)
        la, lb = min(gca, k), min(grb, k)
        bounds = sorted(set(range(0, k, la)) | set(range(0, k, lb))) + [k]
        c = None
        for k0, k1 in zip(bounds[:-1], bounds[1:]):
            p = ua[rows, k0:k1].astype(np.int64) @ ub[k0:k1].astype(np.int64)
            fa_col = fa[np.arange(A.shape[0])[rows] // gra, k0 // gca].astype(F32)
            fb_row = fb[k0 // grb, np.arange(mb.shape[1]) // gcb].astype(F32)
            v = ((fa_col[:, None] * fb_row[None, :]).astype(F32) * p.astype(F32)).astype(F32)
            c = v if c is None else (c + v).astype(F32)
        outs.append(c)
        if mats.shape[0] == 1:
            return np.concatenate(outs).reshape(batch, m, -1)
    return np.stack(outs)


def out_round(c, fmt):
    return round_to(c, fmt) if fmt in ("bf16", "fp16") else np.asarray(c, F32)


ULP = {"fp32": 2.0 ** -24, "bf16": 2.0 ** -8, "fp16": 2.0 ** -11}


# ---- the dataset ----
def write_dataset(path, rng):
    """Outlier channels in A (as in LLM activations), shapes with k not a multiple of 32/128 and n below
    128 (edge groups), a shared and a per-batch B."""
    shapes = [("shared", 6, 40, 288, 2, False), ("batched", 5, 24, 200, 2, True)]
    with h5py.File(path, "w") as f:
        f.attrs.update(format="precis-dataset", format_version=1, generator="test_quantized_oracle.py",
                       created_utc="2026-01-01T00:00:00Z", seed=0, suite="", dataset_id="quantized-oracle")
        for name, m, n, k, batch, b_batched in shapes:
            def acts(samples):
                x = rng.standard_normal((samples, m, k)).astype(F32)
                x[:, :, ::37] *= F32(40)  # outlier channels
                return x
            a = acts(batch)
            b = (rng.standard_normal((batch, k, n) if b_batched else (k, n)) * 0.05).astype(F32)
            a64, b64 = a.astype(np.float64), b.astype(np.float64)
            w = f.create_group(f"workloads/{name}")
            w.attrs.update(kind="gemm", m=m, n=n, k=k, batch=batch, description="oracle", a_dist="normal+outliers",
                           b_dist="normal")
            w["a"], w["b"] = a, b
            w["c_ref"] = a64 @ b64
            w["ab_abs"] = np.abs(a64) @ np.abs(b64)
            w["calib/a"] = acts(3)
    return [s[0] for s in shapes]


def run_precis(tmp, dataset, recipes, label):
    rep, saved = os.path.join(tmp, label), os.path.join(tmp, label + ".h5")
    proc = subprocess.run([PRECIS, "run", dataset, "--recipes", recipes, "-o", rep, "--save-outputs", saved, *FAST],
                          capture_output=True, text=True)
    if proc.returncode not in (0, 3):
        raise SystemExit(f"precis run --recipes {recipes} -> {proc.returncode}\n{proc.stderr}")
    rows = {(r["workload"], r["recipe"]): r for r in json.load(open(os.path.join(rep, "report.json")))["rows"]}
    return rows, saved


def canonical(name):
    out = subprocess.run([PRECIS, "recipes", "--json", "--recipes", name], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)["recipes"][0]["spec"]


PRESETS = ["fp8-rowwise", "fp8-block", "w8a16", "w4a16", "w4a16-asym", "mxfp8", "mxfp4", "nvfp4", "int8-sq"]
# Twins with fp32 outputs (tight tolerances) and spellings the presets do not cover, each with a neighbour
# whose oracle must differ beyond the tolerance.
EXTRA = {
    "a=e4m3@row,b=e4m3@col,out=fp32": "a=e4m3@tensor,b=e4m3@tensor,out=fp32",
    "a=e4m3@k128,b=e4m3@128x128,out=fp32": "a=e4m3@row,b=e4m3@col,out=fp32",
    "a=e4m3@mx,b=e4m3@mx,out=fp32": "a=e4m3@mx-rceil,b=e4m3@mx-rceil,out=fp32",
    "a=e4m3@mx-rceil,b=e4m3@mx-rceil,out=fp32": "a=e4m3@mx,b=e4m3@mx,out=fp32",
    "a=e2m1@mx,b=e2m1@mx,out=fp32": "a=e2m1@mx-rceil,b=e2m1@mx-rceil,out=fp32",
    "a=e2m1@nv,b=e2m1@nv,out=fp32": "a=e2m1@mx,b=e2m1@mx,out=fp32",
    "a=e5m2@row,b=e4m3@32x8,out=fp32": "a=e5m2@row,b=e4m3@col,out=fp32",
    "a=bf16,b=s4@k128:sym-half,out=fp32": "a=bf16,b=s4@k128:sym,out=fp32",
    "a=bf16,b=u4@k32:asym,out=fp32": "a=bf16,b=u4@k128:asym,out=fp32",
    "a=fp16,b=s8@col:sym,out=fp32": "a=fp16,b=s8@col:sym-half,out=fp32",
    "a=s8@k64:sym,b=s4@k32:sym,acc=s32": None,
    "a=e4m3@tensor,b=e4m3@col,out=fp32,scale=absmax": "a=e4m3@tensor,b=e4m3@col,out=fp32",
    "a=s8@tensor,b=s8@col,acc=s32,smooth=0.5,scale=absmax": None,
    "a=s8@row:sym-half,b=s8@16x8:sym,acc=s32": None,
}


def main():
    tmp = scratch.mkdtemp(prefix="precis-qoracle-")
    ds = os.path.join(tmp, "d.h5")
    workloads = write_dataset(ds, np.random.default_rng(16))
    specs = {p: canonical(p) for p in PRESETS}
    specs.update({s: canonical(s) for s in EXTRA})
    with h5py.File(ds, "r") as d:
        data = {w: (d[f"workloads/{w}/a"][()], d[f"workloads/{w}/b"][()], d[f"workloads/{w}/calib/a"][()])
                for w in workloads}
    compared = skipped = 0
    for i, (name, spec_text) in enumerate(specs.items()):
        rows, saved = run_precis(tmp, ds, name, f"r{i}")
        spec = parse_spec(spec_text)
        neighbour = EXTRA.get(name)
        with h5py.File(saved, "r") as o:
            for w in workloads:
                a, b, calib = data[w]
                key = name if name in PRESETS else spec_text  # a spec's rows are named by its canonical text
                row = rows[(w, key)]
                if spec["smooth"] != "none" and b.ndim == 3:
                    # One s per weight matrix; a static scale cannot serve several smoothings.
                    want_status = "unsupported" if spec["scale"] != "dynamic" else "ok"
                    check(row["status"] == want_status, f"{name} on {w}: {want_status}")
                    skipped += 1
                    continue
                check(row["status"] == "ok", f"{name} on {w}: status {row['status']} {row.get('reason', '')}")
                if row["status"] != "ok":
                    continue
                got = o[f"workloads/{w}/{key}/c"][()]
                want, exact, bound = expected(spec, a, b, calib)
                if exact:
                    want = out_round(want, spec["out"])
                    same = np.array_equal(want.view(np.uint32), got.view(np.uint32))
                    check(same, f"{name} on {w}: bit for bit ({np.sum(want != got)} differ)")
                else:
                    tol = bound + ULP[spec["out"]] * np.abs(want)
                    err = np.abs(got.astype(np.float64) - want)
                    check(bool(np.all(err <= tol)), f"{name} on {w}: within the summation tolerance "
                          f"(worst error/tolerance {np.max(err / np.maximum(tol, 1e-300)):.3g})")
                    if neighbour:
                        other, _, _ = expected(parse_spec(canonical(neighbour)), a, b, calib)
                        check(bool(np.any(np.abs(got.astype(np.float64) - other) > tol)),
                              f"{name} on {w}: the tolerance tells it from {neighbour}")
                compared += 1
    check(compared + skipped == 2 * len(specs) and skipped == 2, f"compared {compared} outputs")
    print(f"{len(failures)} failed checks")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
