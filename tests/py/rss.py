"""Resident memory as the memory tests read it (Linux /proc): this process's now, and a child's peak."""
import gc
import os
import subprocess
import threading


def resident():
    """This process's resident set in bytes now (VmRSS), after a garbage collection."""
    gc.collect()
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def peak_rss(argv):
    """(exit code, stderr, peak RSS in bytes: the larger of VmRSS sampled every 10 ms and ru_maxrss)."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    sampled, done = [0], threading.Event()

    def sample():
        while not done.is_set():
            try:
                with open(f"/proc/{proc.pid}/status") as f:
                    for line in f:
                        if line.startswith("VmRSS:"):
                            sampled[0] = max(sampled[0], int(line.split()[1]) * 1024)
            except (OSError, ValueError):
                pass
            done.wait(0.01)

    err = []
    threads = [threading.Thread(target=sample), threading.Thread(target=lambda: err.append(proc.stderr.read()))]
    for t in threads:
        t.start()
    _, status, usage = os.wait4(proc.pid, 0)
    done.set()
    for t in threads:
        t.join()
    return os.waitstatus_to_exitcode(status), err[0], max(sampled[0], usage.ru_maxrss * 1024)
