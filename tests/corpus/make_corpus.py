#!/usr/bin/python3
"""Builds the corpus of malformed inputs that precis must refuse cleanly (docs/robustness.md).

    /usr/bin/python3 tests/corpus/make_corpus.py OUT_DIR

writes every case into OUT_DIR and OUT_DIR/manifest.json: one entry per case with the file, the
commands that must refuse it ("inspect", "run", "gen", "import") and the fragments (regular
expressions) the one-line error message must hold besides the file's name: the object and what
was expected. tests/py/test_corpus.py runs them. Each file is made from a small valid dataset,
suite or safetensors file by one named mutation, so that a failing case says exactly which defect
was not caught; except the few checked-in files under tests/corpus/libhdf5-crashes/: inputs the
dataset fuzzer found that make libhdf5 1.10.8 itself crash or loop forever (see
libhdf5-crashes/README.md), which precis must refuse as corrupt files without crashing or hanging.
"""
import shutil
import json
import os
import struct
import sys

import h5py
import numpy as np

M, N, K, BATCH = 4, 3, 8, 2


def valid_arrays(m=M, n=N, k=K, batch=BATCH, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((batch, m, k)).astype(np.float32)
    b = (0.5 * rng.standard_normal((k, n))).astype(np.float32)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return a, b, a64 @ b64, np.abs(a64) @ np.abs(b64)


def write_valid(path, name="w0", calib=False):
    a, b, c_ref, ab_abs = valid_arrays()
    with h5py.File(path, "w") as f:
        f.attrs["format"] = "precis-dataset"
        f.attrs["format_version"] = 1
        f.attrs["generator"] = "tests/corpus/make_corpus.py"
        f.attrs["created_utc"] = "2024-01-01T00:00:00Z"
        f.attrs["seed"] = 0
        f.attrs["suite"] = ""
        f.attrs["dataset_id"] = "corpus-base"
        w = f.create_group("workloads").create_group(name)
        w.attrs["kind"] = "gemm"
        w.attrs["m"], w.attrs["n"], w.attrs["k"], w.attrs["batch"] = M, N, K, BATCH
        w.attrs["description"] = "corpus base workload"
        w.attrs["a_dist"] = "normal"
        w.attrs["b_dist"] = "normal"
        for key, data in [("a", a), ("b", b), ("c_ref", c_ref), ("ab_abs", ab_abs)]:
            w.create_dataset(key, data=data, chunks=True, fletcher32=True)
        if calib:
            w.create_dataset("calib/a", data=np.ones((2, M, K), np.float32), chunks=True, fletcher32=True)


def replace(group, key, data=None, **kwargs):
    del group[key]
    if data is not None:
        group.create_dataset(key, data=data, **kwargs)
    else:
        group.create_dataset(key, **kwargs)


def set_shapes(w, m, n, k, batch):
    """Attributes and empty (never written, so never allocated) chunked datasets of any size."""
    w.attrs["m"], w.attrs["n"], w.attrs["k"], w.attrs["batch"] = m, n, k, batch
    for key, shape, dtype in [("a", (batch, m, k), "f4"), ("b", (k, n), "f4"), ("c_ref", (batch, m, n), "f8"),
                              ("ab_abs", (batch, m, n), "f8")]:
        replace(w, key, shape=shape, dtype=dtype, chunks=tuple([1] * (len(shape) - 1) + [min(shape[-1], 1024)]))


class Corpus:
    def __init__(self, out):
        self.out = out
        self.cases = []

    def add(self, name, kind, file, commands, expect, tensor=None):
        self.cases.append({"name": name, "kind": kind, "file": file, "commands": commands, "expect": expect,
                           "tensor": tensor})

    def path(self, file):
        return os.path.join(self.out, file)

    # A dataset made valid, then mutated by fn(h5py.File) (or by fn_bytes on the raw bytes).
    def dataset(self, name, expect, fn=None, fn_bytes=None, commands=("inspect", "run"), calib=False):
        file = name + ".h5"
        p = self.path(file)
        write_valid(p, calib=calib)
        if fn:
            with h5py.File(p, "r+") as f:
                fn(f)
        if fn_bytes:
            with open(p, "rb") as fh:
                data = bytearray(fh.read())
            data = fn_bytes(data)
            with open(p, "wb") as fh:
                fh.write(bytes(data))
        self.add(name, "dataset", file, list(commands), expect)

    # A checked-in file, copied as it is (tests/corpus/libhdf5-crashes/).
    def stored(self, name, source, expect, commands=("inspect", "run")):
        file = name + ".h5"
        shutil.copyfile(os.path.join(os.path.dirname(os.path.abspath(__file__)), source), self.path(file))
        self.add(name, "libhdf5-crash", file, list(commands), expect)

    def suite(self, name, text, expect):
        file = name + ".yaml"
        with open(self.path(file), "wb") as fh:
            fh.write(text if isinstance(text, bytes) else text.encode())
        self.add(name, "suite", file, ["gen"], expect)

    def safetensors(self, name, expect, header=None, data=b"", raw=None, tensor="w"):
        file = name + ".safetensors"
        if raw is None:
            blob = header if isinstance(header, bytes) else json.dumps(header).encode()
            raw = struct.pack("<Q", len(blob)) + blob + data
        with open(self.path(file), "wb") as fh:
            fh.write(raw)
        self.add(name, "safetensors", file, ["import"], expect, tensor=tensor)


def flip(data, offset, mask=0xFF):
    data[offset] ^= mask
    return data


def chunk_offset(path, key):
    with h5py.File(path, "r") as f:
        return f["workloads/w0/" + key].id.get_chunk_info(0).byte_offset


def build(out):
    os.makedirs(out, exist_ok=True)
    c = Corpus(out)
    W = "/workloads/w0"

    # --- the file as a whole -------------------------------------------------------------------
    c.dataset("not-hdf5", [r"HDF5|not an? "], fn_bytes=lambda d: bytearray(b"precis? no, just text\n" * 8))
    c.dataset("empty-file", [r"HDF5|empty|not an? "], fn_bytes=lambda d: bytearray())
    c.dataset("truncated-half", [r"truncat|cannot|HDF5"], fn_bytes=lambda d: d[: len(d) // 2])
    c.dataset("truncated-superblock", [r"truncat|cannot|HDF5"], fn_bytes=lambda d: d[:40])

    # --- root attributes ------------------------------------------------------------------------
    c.dataset("missing-format", [r"format", r"expected|missing"], fn=lambda f: f.attrs.__delitem__("format"))
    c.dataset("wrong-format", [r"format", r"precis-dataset"], fn=lambda f: f.attrs.__setitem__("format", "keras"))
    c.dataset("format-not-string", [r"format", r"string"], fn=lambda f: f.attrs.__setitem__("format", 7))
    c.dataset("missing-format-version", [r"format_version", r"expected|missing"],
              fn=lambda f: f.attrs.__delitem__("format_version"))
    c.dataset("future-format-version", [r"format_version 2", r"newer"],
              fn=lambda f: f.attrs.__setitem__("format_version", 2))
    c.dataset("format-version-float", [r"format_version", r"integer"],
              fn=lambda f: f.attrs.__setitem__("format_version", 1.5))
    c.dataset("format-version-string", [r"format_version", r"integer"],
              fn=lambda f: f.attrs.__setitem__("format_version", "1"))
    # dataset_id is optional (the writer's label; the identity is the digest of the contents, issue
    # 34), but given, it is a non-empty string.
    c.dataset("empty-dataset-id", [r"dataset_id", r"non-empty"], fn=lambda f: f.attrs.__setitem__("dataset_id", ""))
    c.dataset("dataset-id-not-string", [r"dataset_id", r"string"], fn=lambda f: f.attrs.__setitem__("dataset_id", 7))
    c.dataset("seed-negative", [r"seed", r"non-negative|integer"], fn=lambda f: f.attrs.__setitem__("seed", -3))

    # --- the workloads group ----------------------------------------------------------------------
    def empty_workloads(f):
        del f["workloads/w0"]
    c.dataset("empty-workloads", [r"/workloads", r"empty|at least one"], fn=empty_workloads)
    c.dataset("no-workloads-group", [r"workloads", r"expected|missing"], fn=lambda f: f.__delitem__("workloads"))

    def workload_is_dataset(f):
        f["workloads"].create_dataset("w1", data=np.zeros(3, np.float32))
    c.dataset("workload-is-a-dataset", [r"/workloads/w1", r"expected a group"], fn=workload_is_dataset)

    def non_utf8_name(f):
        f.move("workloads/w0", b"workloads/w\xff\xfe0")
    c.dataset("name-not-utf8", [r"/workloads", r"UTF-8"], fn=non_utf8_name)

    def description_not_utf8(f):
        w = f["workloads/w0"]
        del w.attrs["description"]
        w.attrs.create("description", b"caf\xe9 latin-1", dtype=h5py.string_dtype("utf-8"))
    c.dataset("description-not-utf8", [W, r"description", r"UTF-8"], fn=description_not_utf8)

    # The root's own attribute, read into a local the caller frees only on success: the fuzzer found
    # that a refused value leaked (the ASan run of this corpus reports it).
    def format_not_utf8(f):
        del f.attrs["format"]
        f.attrs.create("format", b"precis-dataset\xff", dtype=h5py.string_dtype("utf-8"))
    c.dataset("format-not-utf8", [r"format", r"UTF-8"], fn=format_not_utf8)

    # --- workload attributes --------------------------------------------------------------------
    c.dataset("missing-m", [W, r"\bm\b", r"expected|missing"], fn=lambda f: f["workloads/w0"].attrs.__delitem__("m"))
    c.dataset("missing-kind", [W, r"kind"], fn=lambda f: f["workloads/w0"].attrs.__delitem__("kind"))
    c.dataset("kind-not-gemm", [W, r"kind", r"gemm"], fn=lambda f: f["workloads/w0"].attrs.__setitem__("kind", "conv"))
    c.dataset("m-is-string", [W, r"\bm\b", r"integer"], fn=lambda f: f["workloads/w0"].attrs.__setitem__("m", "4"))
    c.dataset("m-is-float", [W, r"\bm\b", r"integer"], fn=lambda f: f["workloads/w0"].attrs.__setitem__("m", 4.0))
    c.dataset("m-is-array", [W, r"\bm\b", r"integer|scalar"],
              fn=lambda f: f["workloads/w0"].attrs.__setitem__("m", np.array([4, 4], np.int64)))
    c.dataset("k-negative", [W, r"\bk\b", r"positive"], fn=lambda f: f["workloads/w0"].attrs.__setitem__("k", -8))
    c.dataset("batch-mismatch", [W + "/a", r"expected float32 \[3,4,8\]"],
              fn=lambda f: f["workloads/w0"].attrs.__setitem__("batch", 3))

    # --- datasets: types, ranks, shapes -----------------------------------------------------------
    def retype(key, dtype):
        def fn(f):
            w = f["workloads/w0"]
            data = w[key][...]
            replace(w, key, data.astype(dtype))
        return fn
    # float64 a/b are valid inputs (DESIGN §13); other float widths are not.
    c.dataset("a-float16", [W + "/a", r"expected float32", r"found float16"], fn=retype("a", np.float16))
    c.dataset("a-int32", [W + "/a", r"expected float32"], fn=retype("a", np.int32))
    c.dataset("c-ref-float32", [W + "/c_ref", r"expected float64", r"found float32"], fn=retype("c_ref", np.float32))
    c.dataset("ab-abs-float16", [W + "/ab_abs", r"expected float64"], fn=retype("ab_abs", np.float16))

    def reshape(key, shape):
        def fn(f):
            w = f["workloads/w0"]
            data = w[key][...].reshape(-1)
            total = int(np.prod(shape))
            replace(w, key, np.resize(data, total).reshape(shape))
        return fn
    c.dataset("a-rank2", [W + "/a", r"expected float32 \[2,4,8\]"], fn=reshape("a", (BATCH * M, K)))
    c.dataset("b-rank1", [W + "/b", r"expected float32 \[8,3\]"], fn=reshape("b", (K * N,)))
    c.dataset("c-ref-rank4", [W + "/c_ref", r"expected float64 \[2,4,3\]"], fn=reshape("c_ref", (1, BATCH, M, N)))
    c.dataset("b-k-disagrees", [W + "/b", r"expected float32 \[8,3\]"], fn=reshape("b", (K + 1, N)))
    c.dataset("c-ref-n-disagrees", [W + "/c_ref", r"expected float64 \[2,4,3\]"], fn=reshape("c_ref", (BATCH, M, N + 1)))
    c.dataset("ab-abs-m-disagrees", [W + "/ab_abs", r"expected float64 \[2,4,3\]"],
              fn=reshape("ab_abs", (BATCH, M + 1, N)))
    c.dataset("calib-wrong-shape", [W + "/calib/a", r"expected float32 \[2,4,8\]"], calib=True,
              fn=lambda f: replace(f["workloads/w0/calib"], "a", np.ones((2, M, K + 2), np.float32)))

    def missing(key):
        return lambda f: f["workloads/w0"].__delitem__(key)
    c.dataset("missing-c-ref", [W + "/c_ref", r"missing|expected"], fn=missing("c_ref"))
    c.dataset("missing-a", [W + "/a", r"missing|expected"], fn=missing("a"))

    def a_is_group(f):
        w = f["workloads/w0"]
        del w["a"]
        w.create_group("a")
    c.dataset("a-is-a-group", [W + "/a", r"expected"], fn=a_is_group)

    # --- sizes: zero, overflow, more than memory ---------------------------------------------------
    def zero_m(f):
        set_shapes(f["workloads/w0"], 1, N, K, BATCH)
        f["workloads/w0"].attrs["m"] = 0
    c.dataset("zero-m", [W, r"\bm\b", r"positive"], fn=zero_m)

    def zero_dim_dataset(f):
        w = f["workloads/w0"]
        replace(w, "a", np.zeros((BATCH, 0, K), np.float32))
    c.dataset("zero-sized-a", [W + "/a", r"expected float32 \[2,4,8\]"], fn=zero_dim_dataset)

    # batch*m*k = 2^63 elements: the byte sizes overflow 64 bits.
    c.dataset("sizes-overflow-64bit", [W, r"overflow"],
              fn=lambda f: set_shapes(f["workloads/w0"], 2**31, 2**31, 2**31, 2))
    # Attributes alone (the datasets keep their small shapes): refused before any shape arithmetic.
    def huge_attrs(f):
        w = f["workloads/w0"]
        w.attrs["m"], w.attrs["n"], w.attrs["k"] = 2**62, 2**62, 2**62
    c.dataset("attrs-overflow-64bit", [W, r"overflow"], fn=huge_attrs)
    # About 2 TiB: valid on paper, refused when loaded (inspect reads the data; run loads it).
    c.dataset("exceeds-memory", [W, r"memory"], fn=lambda f: set_shapes(f["workloads/w0"], 2**18, 2**18, 2**18, 1))

    # --- values ----------------------------------------------------------------------------------
    def poke(key, index, value):
        def fn(f):
            w = f["workloads/w0"]
            data = w[key][...]
            data.reshape(-1)[index] = value
            replace(w, key, data, chunks=True, fletcher32=True)
        return fn
    c.dataset("nan-in-a", [W + "/a", r"finite|NaN"], fn=poke("a", 5, np.nan))
    c.dataset("inf-in-b", [W + "/b", r"finite|inf"], fn=poke("b", 2, np.inf))
    c.dataset("nan-in-calib", [W + "/calib/a", r"finite|NaN"], calib=True,
              fn=lambda f: f["workloads/w0/calib/a"].__setitem__((0, 0, 0), np.nan))
    c.dataset("nan-in-c-ref", [W + "/c_ref", r"finite|NaN"], fn=poke("c_ref", 3, np.nan))
    c.dataset("inf-in-c-ref", [W + "/c_ref", r"finite|inf"], fn=poke("c_ref", 0, -np.inf))
    c.dataset("inf-in-ab-abs", [W + "/ab_abs", r"finite|inf"], fn=poke("ab_abs", 1, np.inf))
    c.dataset("negative-ab-abs", [W + "/ab_abs", r"negative|>= ?0|non-negative"], fn=poke("ab_abs", 1, -1.0))

    def float32_reference(f):
        w = f["workloads/w0"]
        a, b = w["a"][...], w["b"][...]
        replace(w, "c_ref", (a @ b).astype(np.float64) + 1e-3, chunks=True, fletcher32=True)
    c.dataset("c-ref-wrong", [W + "/c_ref", r"agree|reference|differ"], fn=float32_reference)

    # --- corruption: data chunks and metadata (Fletcher32 must catch the data) -------------------
    for key in ("a", "c_ref"):
        name = "flipped-data-" + key.replace("_", "-")
        file = name + ".h5"
        p = c.path(file)
        write_valid(p)
        offset = chunk_offset(p, key)
        with open(p, "r+b") as fh:
            fh.seek(offset + 5)
            byte = fh.read(1)
            fh.seek(offset + 5)
            fh.write(bytes([byte[0] ^ 0x40]))
        c.add(name, "dataset", file, ["inspect", "run"], [W + "/" + key, r"checksum|corrupt"])

    def flip_signature(signature, nth=0):
        def fn(d):
            at = -1
            for _ in range(nth + 1):
                at = d.find(signature, at + 1)
            assert at >= 0, signature
            return flip(d, at + 1, 0x20)
        return fn
    # Object-header / B-tree / heap signatures: the structure itself is damaged.
    c.dataset("flipped-btree-signature", [r"HDF5|cannot|corrupt"], fn_bytes=flip_signature(b"TREE"))
    c.dataset("flipped-heap-signature", [r"HDF5|cannot|corrupt"], fn_bytes=flip_signature(b"HEAP"))
    c.dataset("flipped-symbol-node", [r"HDF5|cannot|corrupt"], fn_bytes=flip_signature(b"SNOD"))

    def flip_attr_name(d):
        at = d.find(b"format_version")
        assert at >= 0
        d[at] = ord("F")
        return d
    c.dataset("flipped-attribute-name", [r"format_version", r"expected|missing"], fn_bytes=flip_attr_name)

    # --- suites (precis gen) ---------------------------------------------------------------------
    c.suite("suite-unknown-top-key", "seed: 1\nseeds: 2\nworkloads:\n  - {name: w, m: 4, n: 4, k: 8}\n", [r":2:", r"seeds"])
    c.suite("suite-unknown-workload-key", "workloads:\n  - {name: w, m: 4, n: 4, k: 8, kk: 3}\n", [r":2:", r"kk"])
    c.suite("suite-m-string", "workloads:\n  - {name: w, m: four, n: 4, k: 8}\n", [r":2:", r"\bm\b", r"integer"])
    c.suite("suite-m-float", "workloads:\n  - {name: w, m: 4.5, n: 4, k: 8}\n", [r":2:", r"\bm\b", r"integer"])
    c.suite("suite-negative-k", "workloads:\n  - {name: w, m: 4, n: 4, k: -8}\n", [r":2:", r"\bk\b", r"positive"])
    c.suite("suite-zero-batch", "workloads:\n  - {name: w, m: 4, n: 4, k: 8, batch: 0}\n", [r":2:", r"batch", r"positive"])
    c.suite("suite-duplicate-name", "workloads:\n  - {name: w, m: 4, n: 4, k: 8}\n  - {name: w, m: 2, n: 2, k: 2}\n",
            [r":3:", r"duplicate|already"])
    c.suite("suite-duplicate-key", "workloads:\n  - {name: w, m: 4, m: 5, n: 4, k: 8}\n", [r":2:", r"\bm\b", r"duplicate|twice|more than once"])
    c.suite("suite-no-workloads", "seed: 3\nworkloads: []\n", [r"workloads", r"at least one|empty"])
    c.suite("suite-workloads-not-list", "workloads: {name: w}\n", [r"workloads", r"list|sequence"])
    c.suite("suite-seed-negative", "seed: -1\nworkloads:\n  - {name: w, m: 4, n: 4, k: 8}\n", [r":1:", r"seed"])
    c.suite("suite-name-slash", "workloads:\n  - {name: a/b, m: 4, n: 4, k: 8}\n", [r"a/b", r"'/'|slash"])
    c.suite("suite-unknown-dist", "workloads:\n  - {name: w, m: 4, n: 4, k: 8, a: gaussian}\n", [r":2:", r"gaussian"])
    c.suite("suite-syntax-error", "workloads:\n  - {name: w, m: 4\n  n: [\n", [r":\d+:", r"YAML|syntax|expected|parse"])
    c.suite("suite-not-utf8", b"description: caf\xe9\nworkloads:\n  - {name: w, m: 4, n: 4, k: 8}\n",
            [r"UTF-8|utf|encoding|invalid|YAML"])
    c.suite("suite-size-overflow", "workloads:\n  - {name: w, m: 4294967296, n: 4294967296, k: 4294967296}\n",
            [r"overflow|too large|at most|memory"])
    c.suite("suite-exceeds-memory", "workloads:\n  - {name: w, m: 262144, n: 262144, k: 262144}\n",
            [r"memory|too large|at most"])
    c.suite("suite-missing-file", "workloads:\n  - {name: w, m: 4, n: 4, k: 8, b: {dist: file, path: nope.h5, dataset: /x}}\n",
            [r"nope\.h5"])
    c.suite("suite-empty", "", [r"empty|workloads|mapping"])

    # --- safetensors (precis import --b FILE:w) ---------------------------------------------------
    f32 = np.arange(12, dtype=np.float32).tobytes()
    good = {"w": {"dtype": "F32", "shape": [4, 3], "data_offsets": [0, 48]}}
    c.safetensors("st-offsets-past-end", [r"\bw\b", r"offset|data"], header={"w": {"dtype": "F32", "shape": [4, 3],
                  "data_offsets": [0, 4800]}}, data=f32)
    c.safetensors("st-begin-after-end", [r"\bw\b", r"offset"], header={"w": {"dtype": "F32", "shape": [0],
                  "data_offsets": [40, 8]}}, data=f32)
    c.safetensors("st-shape-size-mismatch", [r"\bw\b", r"shape|bytes"], header={"w": {"dtype": "F32", "shape": [5, 3],
                  "data_offsets": [0, 48]}}, data=f32)
    c.safetensors("st-shape-overflow", [r"\bw\b", r"overflow|shape"], header={"w": {"dtype": "F32",
                  "shape": [2**32, 2**32, 2**32], "data_offsets": [0, 48]}}, data=f32)
    c.safetensors("st-negative-shape", [r"\bw\b", r"shape"], header={"w": {"dtype": "F32", "shape": [-4, -3],
                  "data_offsets": [0, 48]}}, data=f32)
    c.safetensors("st-unknown-dtype", [r"\bw\b", r"dtype"], header={"w": {"dtype": "F33", "shape": [4, 3],
                  "data_offsets": [0, 48]}}, data=f32)
    c.safetensors("st-overlap", [r"overlap|hole"], header={"w": {"dtype": "F32", "shape": [4, 3], "data_offsets": [0, 48]},
                  "v": {"dtype": "F32", "shape": [2], "data_offsets": [40, 48]}}, data=f32)
    c.safetensors("st-hole", [r"overlap|hole|gap"], header={"w": {"dtype": "F32", "shape": [2, 3],
                  "data_offsets": [24, 48]}}, data=f32)
    c.safetensors("st-header-len-huge", [r"header", r"length|size|bytes"],
                  raw=struct.pack("<Q", 2**63 + 5) + b"{}")
    c.safetensors("st-header-len-past-end", [r"header", r"length|size|bytes"],
                  raw=struct.pack("<Q", 4096) + json.dumps(good).encode() + f32)
    c.safetensors("st-too-short", [r"header|short|8 bytes"], raw=b"\x10\x00\x00")
    c.safetensors("st-header-not-json", [r"header", r"JSON"], header=b"{\"w\": {\"dtype\": \"F32\", ]", data=f32)
    c.safetensors("st-missing-offsets", [r"\bw\b", r"data_offsets"], header={"w": {"dtype": "F32", "shape": [4, 3]}},
                  data=f32)
    c.safetensors("st-offsets-not-numbers", [r"\bw\b", r"data_offsets"], header={"w": {"dtype": "F32", "shape": [4, 3],
                  "data_offsets": ["0", "48"]}}, data=f32)
    c.safetensors("st-nan-weights", [r"\bw\b|finite", r"finite|NaN"], header=good,
                  data=np.array([1, 2, np.nan, 4, 5, 6, 7, 8, 9, 10, 11, 12], np.float32).tobytes())

    # --- files that crash or hang libhdf5 1.10.8 itself (found by tests/fuzz/fuzz_dataset.c) -----
    # Refused through the child-process check (src/data/hdf5_guard.c); without it, precis dies of
    # SIGSEGV (segv) or never returns (hang) on each of them.
    corrupt = [r"corrupt file \(the HDF5 library failed reading it\)"]
    for crash in ("h5hg-read-segv-1", "h5hg-read-segv-2", "h5c-protect-segv", "h5c-protect-hang-1",
                  "h5c-protect-hang-2"):
        c.stored("libhdf5-" + crash, os.path.join("libhdf5-crashes", crash + ".h5"), corrupt)

    # A name with markup is legal: run must succeed and every report must escape it (tested apart).
    with open(os.path.join(out, "manifest.json"), "w") as fh:
        json.dump(c.cases, fh, indent=1)
    return c.cases


MARKUP_NAMES = ["<img src=x onerror=alert(1)>", "=HYPERLINK(\"x\"),|*a*|"]
MARKUP_DESCRIPTION = "<script>alert(1)</script> | `x` ,\"q\"\n# heading \x1b[31mred"


def write_markup_dataset(path):
    """A legal dataset whose workload names and descriptions carry HTML, Markdown, CSV-formula and
    terminal markup: every report must escape it."""
    write_valid(path, name=MARKUP_NAMES[0])
    with h5py.File(path, "r+") as f:
        f.copy(f["workloads"][MARKUP_NAMES[0]], f["workloads"], name=MARKUP_NAMES[1])
        for name in MARKUP_NAMES:
            f["workloads"][name].attrs["description"] = MARKUP_DESCRIPTION


def write_extra_attributes(path):
    """A legal dataset with attributes and objects the format does not name (they are ignored)."""
    write_valid(path)
    with h5py.File(path, "r+") as f:
        f.attrs["my_project"] = "kept"
        f.attrs["my_numbers"] = np.arange(3)
        w = f["workloads/w0"]
        w.attrs["layer_index"] = 7
        w.attrs["source_commit"] = b"abc123"
        w.create_dataset("notes", data=np.zeros(2))
        w.create_group("extras").attrs["x"] = 1


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_corpus.py OUT_DIR")
    cases = build(sys.argv[1])
    print("%d cases in %s" % (len(cases), sys.argv[1]))
