"""The C loader's lifetime on the Python side: _Handle, one rf_loader* and what may still reach
it (C calls in flight on any thread, and leases whose arrays view its memory); loader.py builds
ringfeed.Loader on it."""
import threading

from . import _capi as C


class _Handle:
    """One C loader (rf_loader*) and what may still reach it: C calls in flight, on any thread,
    and leases, whose arrays may still view its memory (numpy arrays and torch tensors hold
    their lease through their base / deleter). Once the handle is retired (close(),
    load_state_dict()) and no call is in flight, rf_loader_stop ends its threads at once and
    rf_loader_destroy runs when no lease is left either: a close() from another thread while
    one iterates, or arrays read after close(), then never touch freed memory (they
    segfaulted the interpreter). Counts change under a lock; the C calls run outside it."""

    __slots__ = ("ptr", "retired", "_mu", "_calls", "_leases", "_stopped")

    def __init__(self, ptr):
        self.ptr = ptr
        self.retired = False
        self._mu = threading.RLock()  # re-entered when a lease dies in a GC run inside one
        self._calls = 0
        self._leases = 0
        self._stopped = False

    def enter(self):
        """Start a C call on the loader: its rf_loader*, or RuntimeError once retired."""
        with self._mu:
            if self.retired:
                raise RuntimeError("the loader is closed")
            self._calls += 1
            return self.ptr

    def leave(self):
        self._count(calls=-1)

    def lease_made(self):
        self._count(leases=1)

    def lease_gone(self):
        self._count(leases=-1)

    def retire(self):
        """No new calls; the C loader goes once the calls in flight and the leases are gone."""
        with self._mu:
            self.retired = True
        self._count()

    def _count(self, calls=0, leases=0):
        with self._mu:
            self._calls += calls
            self._leases += leases
            destroy = stop = None
            if self.retired and not self._calls and self.ptr:
                if not self._leases:
                    destroy, self.ptr = self.ptr, None
                elif not self._stopped:  # counted as a call: no destroy while it runs
                    stop, self._stopped = self.ptr, True
                    self._calls += 1
        if destroy:
            C.lib().rf_loader_destroy(destroy)
        elif stop:
            try:
                C.lib().rf_loader_stop(stop)
            finally:
                self._count(calls=-1)
