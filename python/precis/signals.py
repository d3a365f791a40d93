"""SIGINT and SIGTERM leave no temporary file behind (DESIGN §20, docs/robustness.md).

Inside `stopped_by_signals()` both signals raise Stopped, so that every `finally` on the way out
removes what it wrote; `die_by(signum)` then ends the process by the same signal (its exit status
is what the shell reports as 128 + the signal's number), as if the handler had not been there.
Outside the main thread (where Python cannot install handlers) the block runs unguarded."""
import contextlib
import os
import signal
import threading

__all__ = ["Stopped", "stopped_by_signals", "die_by"]


class Stopped(BaseException):
    """A SIGINT or SIGTERM arrived inside stopped_by_signals()."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def stopped_by_signals():
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise Stopped(signum)
    old = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)


def die_by(signum):
    """Ends the process by signal `signum` with its default action (after the cleanup is done)."""
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    raise SystemExit(128 + signum)  # not reached unless the signal is blocked
