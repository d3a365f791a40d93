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


class PeakSampler:
    """A child's VmRSS sampled every `interval` seconds on a thread until stop(); `peak` in bytes.
    Beside the child's ru_maxrss for processes that reset the kernel's high-water mark (precis run
    does, per case, through /proc/self/clear_refs)."""

    def __init__(self, pid, interval=0.01):
        self.pid, self.interval, self.peak = pid, interval, 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample)
        self._thread.start()

    def _sample(self):
        while not self._done.is_set():
            try:
                with open(f"/proc/{self.pid}/status") as f:
                    for line in f:
                        if line.startswith("VmRSS:"):
                            self.peak = max(self.peak, int(line.split()[1]) * 1024)
            except (OSError, ValueError):
                pass
            self._done.wait(self.interval)

    def stop(self):
        self._done.set()
        self._thread.join()
        return self.peak


def peak_rss(argv):
    """(exit code, stderr, peak RSS in bytes: the larger of VmRSS sampled every 10 ms and ru_maxrss)."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    sampler = PeakSampler(proc.pid)
    err = []
    reader = threading.Thread(target=lambda: err.append(proc.stderr.read()))
    reader.start()
    _, status, usage = os.wait4(proc.pid, 0)
    sampled = sampler.stop()
    reader.join()
    return os.waitstatus_to_exitcode(status), err[0], max(sampled, usage.ru_maxrss * 1024)
