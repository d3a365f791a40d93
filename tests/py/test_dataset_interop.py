#!/usr/bin/python3
"""Dataset interop (issue 4): precis-written files read by h5py/NumPy, h5py-written files read by
precis, determinism, corruption detection, safetensors import, and refusal of malformed files.

Runs with Debian's python3 + python3-h5py + python3-numpy; env PRECIS (binary), PRECIS_SOURCE_DIR."""
import json
import os
import re
import shutil
import struct
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
SOURCE = os.environ.get("PRECIS_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))

failures = []


def check(cond, what):
    if cond:
        print(f"ok   {what}")
    else:
        print(f"FAIL {what}")
        failures.append(what)


def precis(*args, expect=None):
    proc = subprocess.run([PRECIS, *args], capture_output=True, text=True)
    if expect is not None and proc.returncode != expect:
        print(f"  precis {' '.join(args)} -> {proc.returncode}\n  stdout: {proc.stdout}\n  stderr: {proc.stderr}")
    return proc


SUITE = """# interop test suite
seed: 7
workloads:
  - name: small-normal
    m: 24
    n: 40
    k: 56
    batch: 3
    calib: 2
    a: {dist: outlier_channels, fraction: 0.1}
    b: {dist: normal, std: 0.5}
    description: "outliers with calibration"
  - name: batched.b
    m: 9
    n: 17
    k: 33
    batch: 2
    b_batched: true
    a: {dist: student_t, nu: 3}
    b: {dist: log_uniform, lo: 0.001, hi: 1000}
  - name: mix
    m: 16
    n: 16
    k: 64
    a: {dist: cancellation, eps: 0.0001}
    b: cancellation
  - name: more
    m: 5
    n: 7
    k: 300
    batch: 2
    a: spikes
    b: {dist: integers, lo: -3, hi: 3}
  - name: relu-uniform
    m: 8
    n: 8
    k: 8
    a: relu
    b: uniform
"""

ROOT_ATTRS = {"format", "format_version", "generator", "created_utc", "seed", "suite", "dataset_id"}
WORKLOAD_ATTRS = {"kind", "m", "n", "k", "batch", "description", "a_dist", "b_dist"}


def check_dataset_file(path, label, suite_text=None):
    """Every attribute, shape and type, and the references against NumPy float64 matmul."""
    with h5py.File(path, "r") as f:
        check(ROOT_ATTRS <= set(f.attrs.keys()), f"{label}: root attributes present")
        check(f.attrs["format"] == "precis-dataset", f"{label}: format")
        check(int(f.attrs["format_version"]) == 1, f"{label}: format_version")
        check(str(f.attrs["generator"]).startswith("precis "), f"{label}: generator")
        check(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", f.attrs["created_utc"]) is not None, f"{label}: created_utc")
        check(re.fullmatch(r"[0-9a-f]{64}", f.attrs["dataset_id"]) is not None, f"{label}: dataset_id is a SHA-256")
        if suite_text is not None:
            check(f.attrs["suite"] == suite_text, f"{label}: suite attribute is the YAML used")
        ok_refs = True
        for name, g in f["workloads"].items():
            check(WORKLOAD_ATTRS <= set(g.attrs.keys()), f"{label}/{name}: workload attributes")
            check(g.attrs["kind"] == "gemm", f"{label}/{name}: kind")
            m, n, k, batch = (int(g.attrs[x]) for x in ("m", "n", "k", "batch"))
            a, b, c, ab = g["a"], g["b"], g["c_ref"], g["ab_abs"]
            check(a.dtype == np.float32 and a.shape == (batch, m, k), f"{label}/{name}: a float32 [batch,m,k]")
            check(b.dtype == np.float32 and b.shape in ((k, n), (batch, k, n)), f"{label}/{name}: b float32")
            check(c.dtype == np.float64 and c.shape == (batch, m, n), f"{label}/{name}: c_ref float64")
            check(ab.dtype == np.float64 and ab.shape == (batch, m, n), f"{label}/{name}: ab_abs float64")
            for d in (a, b, c, ab):
                check(d.chunks is not None and d.fletcher32, f"{label}/{name}/{d.name.split('/')[-1]}: chunked + fletcher32")
            if "calib" in g:
                ca = g["calib/a"]
                check(ca.dtype == np.float32 and ca.shape[1:] == (m, k) and ca.shape[0] > 0, f"{label}/{name}: calib/a")
            a64 = a[...].astype(np.float64)
            b64 = b[...].astype(np.float64)
            ref = np.matmul(a64, b64)
            absref = np.matmul(np.abs(a64), np.abs(b64))
            cv, abv = c[...], ab[...]
            # relative 1e-12, measured against |a|.|b| (the scale of the accumulation error)
            err_c = np.max(np.abs(cv - ref) / np.maximum(absref, np.finfo(float).tiny))
            err_ab = np.max(np.abs(abv - absref) / np.maximum(absref, np.finfo(float).tiny))
            if not (err_c <= 1e-12 and err_ab <= 1e-12):
                ok_refs = False
                print(f"  {name}: c_ref err {err_c:.3g}, ab_abs err {err_ab:.3g}")
        check(ok_refs, f"{label}: c_ref and ab_abs match NumPy float64 matmul (rel 1e-12)")


def array_datasets(path):
    out = {}
    with h5py.File(path, "r") as f:
        def visit(name, obj):
            if isinstance(obj, h5py.Dataset):
                out[name] = obj[...].tobytes()
        f.visititems(visit)
        return out, f.attrs["dataset_id"]


def write_docs_example(path):
    """Runs the h5py snippet of docs/dataset-format.md, with its output path replaced."""
    text = open(os.path.join(SOURCE, "docs", "dataset-format.md"), encoding="utf-8").read()
    match = re.search(r"<!-- h5py-example -->\s*```python\n(.*?)```", text, re.S)
    check(match is not None, "docs/dataset-format.md holds the h5py example")
    code = match.group(1).replace('path = "my-dataset.h5"', f"path = {path!r}")
    exec(compile(code, "docs/dataset-format.md", "exec"), {})


def write_minimal(path, mutate=None):
    """A small valid dataset written with h5py, optionally broken by mutate(f)."""
    rng = np.random.default_rng(1)
    m, n, k, batch = 4, 6, 8, 1
    a = rng.standard_normal((batch, m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    with h5py.File(path, "w") as f:
        f.attrs.update(format="precis-dataset", format_version=1, generator="t", created_utc="now", seed=0, suite="",
                       dataset_id="x")
        w = f.create_group("workloads/x")
        w.attrs.update(kind="gemm", m=m, n=n, k=k, batch=batch, description="", a_dist="", b_dist="")
        w["a"] = a
        w["b"] = b
        w["c_ref"] = a.astype(np.float64) @ b.astype(np.float64)
        w["ab_abs"] = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
        if mutate:
            mutate(f)


def flip_byte_in_chunk(path, dataset):
    """Flips one byte in the middle of the first chunk of `dataset` (its file offset from h5py)."""
    with h5py.File(path, "r") as f:
        d = f[dataset]
        if d.chunks:
            info = d.id.get_chunk_info(0)
            offset, size = info.byte_offset, info.size
        else:
            offset, size = d.id.get_offset(), d.id.get_storage_size()
    with open(path, "r+b") as fp:
        fp.seek(offset + size // 2)
        byte = fp.read(1)
        fp.seek(offset + size // 2)
        fp.write(bytes([byte[0] ^ 0x5A]))


def safetensors_bytes(tensors, pad_header=True):
    """A safetensors file: {name: (dtype, shape, raw bytes)}."""
    header, blobs, offset = {}, [], 0
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header).encode()
    if pad_header:
        text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def main():
    tmp = scratch.mkdtemp(prefix="precis-dataset-interop-")
    try:
        run_all(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{len(failures)} failed")
    return 1 if failures else 0


def run_all(tmp):
    suite_path = os.path.join(tmp, "suite.yaml")
    with open(suite_path, "w") as fp:
        fp.write(SUITE)

    # 1. gen from a suite, twice: identical bytes in every dataset, same dataset_id.
    one, two = os.path.join(tmp, "one.h5"), os.path.join(tmp, "two.h5")
    check(precis("gen", suite_path, "-o", one, "-q", expect=0).returncode == 0, "gen suite")
    check(precis("gen", suite_path, "-o", two, "-q", expect=0).returncode == 0, "gen suite again")
    check_dataset_file(one, "suite", SUITE)
    d1, id1 = array_datasets(one)
    d2, id2 = array_datasets(two)
    check(len(d1) > 0 and d1.keys() == d2.keys(), "determinism: same datasets")
    check(all(d1[key] == d2[key] for key in d1), "determinism: identical bytes in every dataset")
    check(id1 == id2, "determinism: same dataset_id")
    with h5py.File(one, "r") as f:
        check(list(f["workloads"].keys()) != [] and f["workloads/small-normal/calib/a"].shape == (2, 24, 56),
              "calibration samples written")
        check(f["workloads/batched.b/b"].shape == (2, 33, 17), "b_batched gives [batch,k,n]")
        a = f["workloads/small-normal/a"][...]
        col_max = np.abs(a).max(axis=(0, 1))
        outliers = np.sum(np.abs(a).min(axis=(0, 1)) >= 6.0)
        check(outliers == round(0.1 * 56) and col_max.max() <= 60.0, "outlier_channels: round(fraction*K) channels in [6,60]")
        b = f["workloads/more/b"][...]
        check(np.all(b == np.round(b)) and b.min() >= -3 and b.max() <= 3, "integers within [lo,hi]")
        c, ab = f["workloads/mix/c_ref"][...], f["workloads/mix/ab_abs"][...]
        check(np.median(np.abs(c) / ab) < 1e-3, "cancellation: |c| << |a|.|b|")

    # --seed changes the data and the id; the suite text records the new seed.
    three = os.path.join(tmp, "three.h5")
    precis("gen", suite_path, "-o", three, "-q", "--seed", "8", expect=0)
    d3, id3 = array_datasets(three)
    check(id3 != id1 and d3["workloads/mix/a"] != d1["workloads/mix/a"], "--seed changes data and id")
    with h5py.File(three, "r") as f:
        check("seed: 8" in f.attrs["suite"] and int(f.attrs["seed"]) == 8, "--seed recorded in the suite text")

    # Existing output is kept without --force, replaced with it.
    proc = precis("gen", suite_path, "-o", one, "-q")
    check(proc.returncode == 2 and "already exists" in proc.stderr, "existing output refused without --force")
    check(array_datasets(one)[1] == id1, "refused gen left the file alone")
    check(precis("gen", suite_path, "-o", one, "-q", "--force", "--compress", expect=0).returncode == 0, "--force --compress")
    with h5py.File(one, "r") as f:
        check(f["workloads/mix/a"].compression == "gzip" and f["workloads/mix/a"].fletcher32, "--compress: gzip + fletcher32")
    check(array_datasets(one)[1] == id1, "compression does not change dataset_id")
    check(not [p for p in os.listdir(tmp) if ".tmp-" in p], "no temporary files left behind")

    # 2. The default preset (what precis run uses): attributes and references.
    default = os.path.join(tmp, "default.h5")
    check(precis("gen", "--preset", "default", "-o", default, "-q", expect=0).returncode == 0, "gen --preset default")
    with open(os.path.join(SOURCE, "datasets", "default.yaml"), encoding="utf-8") as fp:
        check_dataset_file(default, "default", fp.read())
    proc = precis("inspect", default, expect=0)
    check(proc.returncode == 0 and "matches the contents" in proc.stdout, "inspect default: valid, id matches")

    # 3. A dataset written by h5py alone, following the docs, is accepted.
    handmade = os.path.join(tmp, "handmade.h5")
    write_docs_example(handmade)
    proc = precis("inspect", handmade, expect=0)
    check(proc.returncode == 0 and "my-layer" in proc.stdout, "inspect accepts the docs' h5py dataset")

    # Fixed-length strings and other integer widths are accepted too.
    def variants(f):
        for key in ("format", "generator", "created_utc", "suite", "dataset_id"):
            value = f.attrs[key]
            del f.attrs[key]
            f.attrs[key] = np.bytes_(value if value else " ")
        f.attrs["format_version"] = np.uint8(1)
        f.attrs["seed"] = np.int32(5)
        w = f["workloads/x"]
        w.attrs["m"] = np.int16(4)
        w.attrs["kind"] = np.bytes_("gemm")
        w.attrs["extra-unknown"] = "kept"
    variant = os.path.join(tmp, "variant.h5")
    write_minimal(variant, variants)
    check(precis("inspect", variant, expect=0).returncode == 0, "fixed-length strings, int8/16/32 attributes, unknown attrs")

    # 4. Violations: exit 2, message names the file and the object.
    cases = [
        ("c_ref float32", lambda f: (f["workloads/x"].__delitem__("c_ref"),
                                     f["workloads/x"].create_dataset("c_ref", data=np.zeros((1, 4, 6), np.float32))),
         "/workloads/x/c_ref: expected float64 [1,4,6], found float32 [1,4,6]"),
        ("future version", lambda f: f.attrs.__setitem__("format_version", 2), "format_version 2"),
        ("empty workloads", lambda f: f.__delitem__("workloads/x"), "/workloads: empty"),
        ("zero dimension", lambda f: f["workloads/x"].attrs.__setitem__("m", 0), "attribute m"),
        ("missing attribute", lambda f: f["workloads/x"].attrs.__delitem__("b_dist"), "missing attribute b_dist"),
        ("wrong shape", lambda f: f["workloads/x"].attrs.__setitem__("k", 9), "/workloads/x/a: expected float32 [1,4,9]"),
        ("integer as float", lambda f: f["workloads/x"].attrs.__setitem__("n", 6.0), "attribute n: expected an integer"),
        ("overflowing sizes", lambda f: [f["workloads/x"].attrs.__setitem__(key, 2**40) for key in ("m", "n", "k")],
         "overflow"),
        ("float32 reference widened", lambda f: f["workloads/x/c_ref"].__setitem__(
            Ellipsis, (f["workloads/x/a"][...] @ f["workloads/x/b"][...]).astype(np.float64) + 1e-3),
         "c_ref must be computed in float64"),
    ]
    for label, mutate, expected in cases:
        path = os.path.join(tmp, f"bad-{label.replace(' ', '-')}.h5")
        write_minimal(path, mutate)
        proc = precis("inspect", path)
        ok = proc.returncode == 2 and expected in proc.stderr and path in proc.stderr
        if not ok:
            print(f"  {label}: rc {proc.returncode}, stderr: {proc.stderr.strip()}")
        check(ok, f"inspect refuses {label} (exit 2, names file and object)")
    proc = precis("inspect", suite_path)
    check(proc.returncode == 2 and "not an HDF5 file" in proc.stderr, "inspect refuses a non-HDF5 file")

    # 5. Corruption: one byte flipped inside a chunk -> inspect fails naming the dataset and the checksum.
    for dset in ("workloads/small-normal/a", "workloads/mix/c_ref", "workloads/small-normal/calib/a"):
        corrupt = os.path.join(tmp, "corrupt.h5")
        shutil.copy(two, corrupt)
        flip_byte_in_chunk(corrupt, dset)
        proc = precis("inspect", corrupt)
        ok = proc.returncode == 2 and f"/{dset}" in proc.stderr and "checksum" in proc.stderr
        if not ok:
            print(f"  rc {proc.returncode}, stderr: {proc.stderr.strip()}")
        check(ok, f"corrupted {dset}: inspect exits 2 naming it and the checksum")

    # 6. safetensors import: f32, f16 and bf16 tensors.
    rng = np.random.default_rng(3)
    k, n = 48, 20
    w32 = rng.standard_normal((k, n)).astype(np.float32)
    w16 = rng.standard_normal((n, k)).astype(np.float16)            # stored [n, k]: --transpose-b
    wbf_f32 = rng.standard_normal((k, n)).astype(np.float32)
    wbf_bits = (wbf_f32.view(np.uint32) >> 16).astype(np.uint16)   # truncation to bf16 bit patterns
    wbf = (wbf_bits.astype(np.uint32) << 16).view(np.float32)
    st_path = os.path.join(tmp, "weights.safetensors")
    with open(st_path, "wb") as fp:
        fp.write(safetensors_bytes({
            "layer.w32": ("F32", (k, n), w32.astype("<f4").tobytes()),
            "layer.w16": ("F16", (n, k), w16.astype("<f2").tobytes()),
            "layer.wbf": ("BF16", (k, n), wbf_bits.astype("<u2").tobytes()),
        }))
    for tensor, expected, extra in (("layer.w32", w32, []), ("layer.w16", w16.astype(np.float32).T, ["--transpose-b"]),
                                    ("layer.wbf", wbf, [])):
        out = os.path.join(tmp, f"import-{tensor}.h5")
        proc = precis("import", "--b", f"{st_path}:{tensor}", *extra, "--a", "{dist: normal, std: 2}", "--m", "12",
                      "--batch", "2", "-o", out, "-q", expect=0)
        ok = proc.returncode == 0
        if ok:
            with h5py.File(out, "r") as f:
                g = f[f"workloads/{tensor}"]
                b = g["b"][...]
                ok = b.shape == (k, n) and np.array_equal(b, expected) and g["a"].shape == (2, 12, k)
                ref = g["a"][...].astype(np.float64) @ b.astype(np.float64)
                ok = ok and np.allclose(g["c_ref"][...], ref, rtol=0, atol=1e-12 * np.abs(ref).max())
        check(ok, f"import {tensor} from safetensors")
    check(precis("inspect", os.path.join(tmp, "import-layer.w32.h5"), expect=0).returncode == 0, "imported dataset inspects")

    # import from an HDF5 dataset (Keras-like weights) with a from a file.
    keras = os.path.join(tmp, "keras.h5")
    acts = rng.standard_normal((3, 5, k)).astype(np.float32)
    with h5py.File(keras, "w") as f:
        f["model_weights/dense/kernel:0"] = w32.astype(np.float64)
        f["acts"] = acts
    out = os.path.join(tmp, "import-keras.h5")
    proc = precis("import", "--b", f"{keras}:/model_weights/dense/kernel:0", "--a", f"{keras}:/acts", "--name", "dense",
                  "-o", out, "-q", expect=0)
    ok = proc.returncode == 0
    if ok:
        with h5py.File(out, "r") as f:
            ok = np.array_equal(f["workloads/dense/a"][...], acts) and np.array_equal(f["workloads/dense/b"][...], w32)
    check(ok, "import from HDF5 datasets (a from a [samples, m, k] file)")

    # Malformed safetensors files are refused with a message naming the problem.
    bad_cases = {
        "offset past end": safetensors_bytes({"t": ("F32", (2, 2), b"\0" * 16)})[:-4],
        "shape mismatch": safetensors_bytes({"t": ("F32", (3, 2), b"\0" * 16)}),
        "header too long": struct.pack("<Q", 1 << 40) + b"{}",
        "unknown dtype": safetensors_bytes({"t": ("Q7", (2, 2), b"\0" * 16)}),
    }
    for label, blob in bad_cases.items():
        path = os.path.join(tmp, "bad.safetensors")
        with open(path, "wb") as fp:
            fp.write(blob)
        proc = precis("import", "--b", f"{path}:t", "-o", os.path.join(tmp, "never.h5"), "-q")
        check(proc.returncode == 2 and "bad.safetensors" in proc.stderr, f"import refuses safetensors with {label}")
    check(not os.path.exists(os.path.join(tmp, "never.h5")), "failed imports write nothing")


if __name__ == "__main__":
    sys.exit(main())
