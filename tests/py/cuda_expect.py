"""What `--backend cuda` must do in this build, decided without asking precis's CUDA code:

- the build has no CUDA backend (CMake's PRECIS_HAVE_CUDA, passed by tests/CMakeLists.txt as
  PRECIS_CUDA_BUILT): exit 1 naming the missing backend;
- built, and no usable device (nvidia-smi lists no GPU): exit 1 with a message naming CUDA;
- built, with a device: the command's success exit codes.
"""
import os
import shutil
import subprocess


def cuda_built(precis):
    flag = os.environ.get("PRECIS_CUDA_BUILT")
    if flag in ("0", "1"):
        return flag == "1"
    # Outside ctest: the build's own statement (precis info prints "CUDA backend   built|not built").
    info = subprocess.run([precis, "info"], capture_output=True, text=True).stdout
    return any(line.split()[:2] == ["CUDA", "backend"] and line.split()[2:3] == ["built"] for line in info.splitlines())


def device_present():
    smi = shutil.which("nvidia-smi")
    if not smi:
        return False
    p = subprocess.run([smi, "-L"], capture_output=True, text=True)
    return p.returncode == 0 and "GPU " in p.stdout


def check_cuda_outcome(precis, proc, success_codes, check, what):
    """Asserts the outcome of one `precis ... --backend cuda` run for this build and machine."""
    if not cuda_built(precis):
        check(proc.returncode == 1 and "built without the CUDA backend" in proc.stderr,
              f"{what}: a build without CUDA must exit 1 saying so, got {proc.returncode}: {proc.stderr.strip()}")
    elif not device_present():
        check(proc.returncode == 1 and "cuda" in proc.stderr.lower(),
              f"{what}: CUDA built, no device: expected exit 1 naming CUDA, got {proc.returncode}: {proc.stderr.strip()}")
    else:
        check(proc.returncode in success_codes,
              f"{what}: CUDA built with a device: expected exit {success_codes}, got {proc.returncode}: "
              f"{proc.stderr.strip()[-2000:]}")
