#!/usr/bin/python3
"""Issue 15, the rough edges on the way in: matrix files told apart by their first bytes (HDF5 with
or without a leading '/' and behind a user block, safetensors with a stray '/'), NumPy .npy and .npz
inputs (dtypes, byte order, Fortran order, stored and compressed members, strict refusals), `precis
inspect` on a safetensors file, the closest names for a misspelled tensor, the --transpose-b
convention, repeated options, and `precis import` naming itself.

Runs with Debian's python3 + python3-h5py + python3-numpy; env PRECIS (binary)."""
import json
import os
import struct
import subprocess
import sys
import scratch  # tests/py/scratch.py: scratch under the build tree, removed on a signal
import zipfile

try:
    import h5py
    import numpy as np
except ImportError as exc:  # pragma: no cover
    print(f"skipped: {exc}")
    sys.exit(77)

PRECIS = os.environ.get("PRECIS") or os.path.join(os.environ.get("PRECIS_BUILD_DIR", "build"), "precis")
failures = []


def check(cond, what, proc=None):
    if cond:
        print(f"ok   {what}")
    else:
        print(f"FAIL {what}")
        if proc is not None:
            print(f"  exit {proc.returncode}\n  stdout: {proc.stdout}\n  stderr: {proc.stderr}")
        failures.append(what)


def precis(*args):
    return subprocess.run([PRECIS, *args], capture_output=True, text=True, timeout=120)


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, value in tensors.items():
        data = np.ascontiguousarray(value, dtype=np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(value.shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def stored_b(path):
    with h5py.File(path, "r") as f:
        (name,) = list(f["workloads"])
        return f["workloads"][name]["b"][()], f["workloads"][name]["a"][()]


def main():
    rng = np.random.default_rng(15)
    weight = rng.standard_normal((48, 32)).astype(np.float32)  # a PyTorch Linear weight: [out, in]
    acts = rng.standard_normal((4, 32)).astype(np.float32)
    with scratch.TemporaryDirectory() as tmp:
        p = lambda name: os.path.join(tmp, name)  # noqa: E731
        out = p("out.h5")

        # --- (4) the file's kind from its first bytes, not from a '/' in FILE:NAME
        with h5py.File(p("acts.h5"), "w") as f:
            f["L0_in"] = acts
        with h5py.File(p("ub.h5"), "w", userblock_size=512) as f:
            f["L0_in"] = acts
        write_safetensors(p("model.safetensors"), {"model.layers.0.mlp.down_proj.weight": weight,
                                                   "model.layers.0.mlp.up_proj.weight": weight.T,
                                                   "square": rng.standard_normal((32, 32))})
        for spec in ("acts.h5:L0_in", "acts.h5:/L0_in", "ub.h5:L0_in"):
            run = precis("import", "--b", p("model.safetensors") + ":/model.layers.0.mlp.down_proj.weight",
                         "--transpose-b", "--a", p(spec), "-o", out, "--force", "-q")
            check(run.returncode == 0, f"import --a {spec} (HDF5 told by its bytes) with a safetensors '/name'", run)
            if run.returncode == 0:
                b, a = stored_b(out)
                check(np.array_equal(b, weight.T) and np.array_equal(a[0], acts), f"{spec}: the values imported")
        with open(p("junk.bin"), "wb") as f:
            f.write(b"hello, not a matrix\n")
        run = precis("import", "--b", p("junk.bin") + ":x", "-o", out, "--force", "-q")
        check(run.returncode == 2 and "junk.bin: not a matrix file" in run.stderr and "HDF5" in run.stderr,
              "an unknown file is named with what was expected", run)

        # --- (5) NumPy inputs
        cases = {"f4.npy": weight, "f8.npy": weight.astype(np.float64) / 3, "f2.npy": weight.astype(np.float16),
                 "be.npy": weight.astype(">f4"), "fortran.npy": np.asfortranarray(weight)}
        for name, value in cases.items():
            np.save(p(name), value)
            run = precis("import", "--b", p(name), "--transpose-b", "--a", p("acts.h5") + ":L0_in", "-o", out,
                         "--force", "-q")
            check(run.returncode == 0, f"import --b {name}", run)
            if run.returncode == 0:
                b, _ = stored_b(out)
                check(np.array_equal(b, np.asarray(value, dtype=np.float32).T), f"{name}: values as NumPy's float32")
        # version 2.0 and 3.0 headers
        for version in ((2, 0), (3, 0)):
            with open(p("v.npy"), "wb") as f:
                np.lib.format.write_array(f, weight, version=version)
            run = precis("import", "--b", p("v.npy"), "--transpose-b", "-o", out, "--force", "-q")
            check(run.returncode == 0, f".npy format version {version}", run)
        np.savez(p("acts.npz"), L0_in=acts, other=acts[:2])
        np.savez_compressed(p("actsz.npz"), L0_in=acts[None].repeat(3, axis=0))
        for spec, batch in (("acts.npz:L0_in", None), ("actsz.npz:L0_in", "3")):
            args = ["import", "--b", p("f4.npy"), "--transpose-b", "--a", p(spec), "-o", out, "--force", "-q"]
            run = precis(*args)
            check(run.returncode == 0, f"import --a {spec} (stored / deflate member)", run)
            if run.returncode == 0:
                _, a = stored_b(out)
                check(np.array_equal(a[0], acts) and (batch is None or a.shape[0] == 3), f"{spec}: the values imported")
        # refusals name the file and what was expected
        np.save(p("int.npy"), np.arange(6, dtype=np.int32).reshape(2, 3))
        run = precis("import", "--b", p("int.npy"), "-o", out, "--force", "-q")
        check(run.returncode == 2 and "int.npy: dtype '<i4'; expected float16, float32 or float64" in run.stderr,
              "an integer .npy is refused, naming the dtype", run)
        np.save(p("rank1.npy"), np.ones(5, np.float32))
        run = precis("import", "--b", p("rank1.npy"), "-o", out, "--force", "-q")
        check(run.returncode == 2 and "rank1.npy" in run.stderr and "found rank 1" in run.stderr, "a vector is refused", run)
        raw = open(p("f4.npy"), "rb").read()
        open(p("short.npy"), "wb").write(raw[:-8])
        run = precis("import", "--b", p("short.npy"), "-o", out, "--force", "-q")
        check(run.returncode == 2 and "short.npy" in run.stderr and "truncated" in run.stderr, "a truncated .npy", run)
        check("line" not in run.stderr and "column" not in run.stderr, "no line/column of a suite the user never wrote")
        run = precis("import", "--b", p("f4.npy") + ":x", "-o", out, "--force", "-q")
        check(run.returncode == 2 and "holds one array" in run.stderr, "a .npy with :NAME", run)
        run = precis("import", "--b", p("f4.npy"), "--a", p("acts.npz") + ":L0_inn", "-o", out, "--force", "-q")
        check(run.returncode == 2 and 'no array named "L0_inn"' in run.stderr and '"L0_in"' in run.stderr,
              "a misspelled .npz member gets the closest name", run)
        # a corrupted compressed member: the CRC (or the deflate stream) catches it
        data = bytearray(open(p("actsz.npz"), "rb").read())
        with zipfile.ZipFile(p("actsz.npz")) as z:
            info = z.getinfo("L0_in.npy")
        start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
        data[start + info.compress_size // 2] ^= 0xFF
        open(p("bad.npz"), "wb").write(bytes(data))
        run = precis("import", "--b", p("f4.npy"), "--transpose-b", "--a", p("bad.npz") + ":L0_in", "-o", out, "--force", "-q")
        check(run.returncode == 2 and "bad.npz" in run.stderr and ("corrupt" in run.stderr or "CRC" in run.stderr),
              "a corrupted .npz member is refused", run)
        # a flipped byte in a stored member's data: only the CRC-32 can tell
        data = bytearray(open(p("acts.npz"), "rb").read())
        with zipfile.ZipFile(p("acts.npz")) as z:
            info = z.getinfo("L0_in.npy")
        start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
        data[start + info.compress_size - 3] ^= 0x01
        open(p("flip.npz"), "wb").write(bytes(data))
        run = precis("import", "--b", p("f4.npy"), "--transpose-b", "--a", p("flip.npz") + ":L0_in", "-o", out, "--force", "-q")
        check(run.returncode == 2 and "flip.npz" in run.stderr and "CRC" in run.stderr, "a stored member's CRC-32 is checked", run)
        # sizes recorded in the central directory that the file cannot hold (a fuzzer's find: a
        # 4 GiB allocation before any check): refused, naming the damage, nothing allocated
        for field, what in ((20, "past its end"), (24, "more than deflate can make")):
            data = bytearray(open(p("actsz.npz"), "rb").read())
            central = data.rfind(b"PK\x01\x02")
            data[central + field:central + field + 4] = (0xFFFFFF4F).to_bytes(4, "little")
            open(p("huge.npz"), "wb").write(bytes(data))
            run = precis("import", "--b", p("f4.npy"), "--transpose-b", "--a", p("huge.npz") + ":L0_in", "-o", out,
                         "--force", "-q")
            check(run.returncode == 2 and "huge.npz" in run.stderr and what in run.stderr,
                  "a recorded size the .npz cannot hold is refused (%s)" % what, run)
        run = precis("import", "--b", p("f4.npy"), "--a", p("nothere.npy"), "-o", out, "--force", "-q")
        check(run.returncode == 2 and "nothere.npy: no such file" in run.stderr, "a missing --a file is named", run)

        # --- (6) inspect a safetensors file; a misspelled tensor gets the closest names
        run = precis("inspect", p("model.safetensors"))
        check(run.returncode == 0 and "model.layers.0.mlp.down_proj.weight" in run.stdout and "F32" in run.stdout
              and "[48, 32]" in run.stdout and "6144" in run.stdout, "inspect lists name, dtype, shape, bytes", run)
        run = precis("import", "--b", p("model.safetensors") + ":model.layers.0.mlp.down_prj.weight", "-o", out, "-q")
        check(run.returncode == 2 and 'closest: "model.layers.0.mlp.down_proj.weight"' in run.stderr,
              "a misspelled tensor name gets the closest names", run)

        # --- (7) the --transpose-b convention, repeated options, the command's own name
        run = precis("import", "--b", p("model.safetensors") + ":square", "-o", out, "--force", "-q")
        check(run.returncode == 0 and "warning" in run.stderr and "--transpose-b" in run.stderr
              and "[out, in]" in run.stderr, "a square b without --transpose-b warns about the convention", run)
        run = precis("import", "--b", p("model.safetensors") + ":square", "--transpose-b", "-o", out, "--force", "-q")
        check(run.returncode == 0 and "warning" not in run.stderr, "no warning with --transpose-b", run)
        run = precis("import", "--b", p("f4.npy"), "--a", p("acts.h5") + ":L0_in", "-o", out, "--force", "-q")
        check(run.returncode == 2 and "--transpose-b" in run.stderr, "a non-square mismatch mentions --transpose-b", run)
        run = precis("import", "--b", p("f4.npy"), "--transpose-b", "--a", "bogus", "-o", out, "--force", "-q")
        check(run.returncode == 2 and "--a bogus: unknown distribution" in run.stderr and ":11:" not in run.stderr,
              "a bad --a names the option, not a line of import's own suite", run)
        run = precis("import", "--b", p("f4.npy"), "--b", p("f8.npy"), "-o", out, "--force")
        check(run.returncode == 2 and "--b given twice" in run.stderr, "a repeated --b is an error", run)
        run = precis("import", "--b", p("f4.npy"), "--transpose-b", "--m", "4", "--m", "8", "-o", out, "--force")
        check(run.returncode == 2 and "given twice" in run.stderr, "a repeated --m is an error", run)
        run = precis("import", "--b", p("f4.npy"), "--transpose-b", "-o", out, "--force")
        check(run.returncode == 0 and "precis import: [1/1]" in run.stderr and "precis gen" not in run.stderr,
              "import reports progress as precis import", run)

    print(f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
