#!/usr/bin/python3
"""Seed corpora for the fuzzers, made rather than checked in:

    /usr/bin/python3 tests/fuzz/make_seeds.py OUT_DIR

writes OUT_DIR/{dataset,suite,safetensors,criteria,numpy}/: small valid inputs (what the fuzzers mutate
from) and every malformed case of tests/corpus/make_corpus.py of that kind (small ones only)."""
import glob
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "corpus"))
import h5py  # noqa: E402
import numpy as np  # noqa: E402

import make_corpus  # noqa: E402

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
MAX_SEED_BYTES = 64 * 1024


def small_dataset(path, chunked, batched_b=False, calib=False):
    """A valid dataset of one tiny workload; contiguous storage keeps it near 2 KiB."""
    m, n, k, batch = 2, 3, 4, 1
    rng = np.random.default_rng(1)
    a = rng.standard_normal((batch, m, k)).astype(np.float32)
    b = rng.standard_normal((batch, k, n) if batched_b else (k, n)).astype(np.float32)
    c_ref = np.matmul(a.astype(np.float64), b.astype(np.float64))
    ab_abs = np.matmul(np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64)))
    opts = {"chunks": True, "fletcher32": True} if chunked else {}
    with h5py.File(path, "w", libver="earliest") as f:
        for key, value in [("format", "precis-dataset"), ("format_version", 1), ("generator", "seed"),
                           ("created_utc", "2024-01-01T00:00:00Z"), ("seed", 0), ("suite", ""), ("dataset_id", "s")]:
            f.attrs[key] = value
        w = f.create_group("workloads/w")
        for key, value in [("kind", "gemm"), ("m", m), ("n", n), ("k", k), ("batch", batch), ("description", ""),
                           ("a_dist", ""), ("b_dist", "")]:
            w.attrs[key] = value
        for key, value in [("a", a), ("b", b), ("c_ref", c_ref), ("ab_abs", ab_abs)]:
            w.create_dataset(key, data=value, **opts)
        if calib:
            w.create_dataset("calib/a", data=a, **opts)


def main(out):
    dirs = {kind: os.path.join(out, kind) for kind in ("dataset", "suite", "safetensors", "criteria", "numpy")}
    for d in dirs.values():
        os.makedirs(d, exist_ok=True)
    small_dataset(os.path.join(dirs["dataset"], "valid-contiguous.h5"), False)
    small_dataset(os.path.join(dirs["dataset"], "valid-fletcher32.h5"), True)
    small_dataset(os.path.join(dirs["dataset"], "valid-batched-b-calib.h5"), False, batched_b=True, calib=True)
    for yaml in glob.glob(os.path.join(SOURCE, "datasets", "*.yaml")):
        shutil.copy(yaml, dirs["suite"])
    for i, text in enumerate(["rel_fro<=1e-2", "nonfinite==0", "sqnr_db>=40", " max_cw < 0.5 ", "cosine>0.999999",
                              "clipped<=1e-3", "mean_err>=-1e-300"]):
        with open(os.path.join(dirs["criteria"], "c%d" % i), "w") as fh:
            fh.write(text)
    with tempfile.TemporaryDirectory() as tmp:
        for case in make_corpus.build(tmp):
            path = os.path.join(tmp, case["file"])
            if os.path.getsize(path) <= MAX_SEED_BYTES:
                # The checked-in inputs that crash libhdf5 are datasets: the guard must refuse them.
                kind = "dataset" if case["kind"] == "libhdf5-crash" else case["kind"]
                shutil.copy(path, dirs[kind])
    # A valid safetensors file beside the malformed ones.
    import json
    import struct
    data = np.arange(6, dtype=np.float32).tobytes() + np.arange(4, dtype=np.float16).tobytes()
    header = json.dumps({"__metadata__": {"format": "pt"},
                         "w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
                         "h": {"dtype": "F16", "shape": [4], "data_offsets": [24, 32]}}).encode()
    with open(os.path.join(dirs["safetensors"], "valid.safetensors"), "wb") as fh:
        fh.write(struct.pack("<Q", len(header)) + header + data)
    # NumPy: .npy of each accepted dtype and order, header versions 2 and 3, stored and deflate .npz.
    w = np.arange(12, dtype=np.float32).reshape(3, 4)
    for name, value in (("f4", w), ("f8", w.astype(np.float64)), ("f2", w.astype(np.float16)),
                        ("be", w.astype(">f4")), ("fortran", np.asfortranarray(w)), ("stack", w.reshape(1, 3, 4))):
        np.save(os.path.join(dirs["numpy"], name + ".npy"), value)
    for version in ((2, 0), (3, 0)):
        with open(os.path.join(dirs["numpy"], "v%d.npy" % version[0]), "wb") as fh:
            np.lib.format.write_array(fh, w, version=version)
    np.savez(os.path.join(dirs["numpy"], "stored.npz"), a=w, b=w.T)
    np.savez_compressed(os.path.join(dirs["numpy"], "deflate.npz"), a=w)
    for kind, d in dirs.items():
        print("%s: %d seeds" % (kind, len(os.listdir(d))))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_seeds.py OUT_DIR")
    main(sys.argv[1])
