"""The C loader's lifetime on the Python side (docs/python.md "Threads, interrupts and exit"):
_Handle, one rf_loader* and what may still reach it (C calls in flight on any thread, and
leases whose arrays view its memory); the exit handler that stops every loader still open;
and Deferred, which holds Ctrl-C back while a call changes the loader's state. _base.py
builds the loaders' common part on them."""
import atexit
import os
import signal
import threading
import time
import weakref

from . import _capi as C

EXIT_WAIT_S = 10  # at exit, the longest wait for a loader's calls in flight to return
_live = weakref.WeakSet()  # every _Handle whose C loader exists
_MAIN = threading.main_thread()
# .active is true on a decode thread while it runs a loader's transform (_transform.py). A
# loader retired there (its last reference dropped by a GC run inside the transform, or a
# close() from it) is stopped from another thread: rf_loader_stop waits for its decode threads,
# and the one it would run on is one of them.
HOOK_THREAD = threading.local()


class _Handle:
    """One C loader (rf_loader*) and what may still reach it: C calls in flight, on any thread,
    and leases, whose arrays may still view its memory (numpy arrays and torch tensors hold
    their lease through their base / deleter). Once the handle is retired (close(),
    load_state_dict(), garbage collection, interpreter exit), a call in flight that waits for
    a batch is woken (rf_loader_cancel), and once no call is in flight rf_loader_stop ends its
    threads at once and rf_loader_destroy runs when no lease is left either: a close() from
    another thread while one iterates, or arrays read after close(), then never touch freed
    memory (they segfaulted the interpreter). Counts change under a lock; the C calls run
    outside it."""

    __slots__ = ("ptr", "retired", "keep", "_mu", "_calls", "_leases", "_stopped",
                 "__weakref__")

    def __init__(self, ptr, keep=None):
        self.ptr = ptr
        self.keep = keep  # what the C loader calls back into (a transform's hook) until destroy
        self.retired = False
        self._mu = threading.RLock()  # re-entered when a lease dies in a GC run inside one
        self._calls = 0
        self._leases = 0
        self._stopped = False
        _live.add(self)

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
        """No new calls; the C loader goes once the calls in flight and the leases are gone.
        A call in flight on another thread (next() waiting for a stalled server) is woken:
        it returns RF_ECLOSED at once instead of when its reads time out."""
        with self._mu:
            self.retired = True
            wake = self.ptr if self._calls and not self._stopped else None
            if wake:
                self._calls += 1  # the loader outlives the cancel
        if wake:
            try:
                C.lib().rf_loader_cancel(wake)
            finally:
                self._count(calls=-1)
        else:
            self._count()

    def quiet(self):
        """Its threads are stopped (or it is destroyed) and no call is in flight."""
        with self._mu:
            return self.ptr is None or (self._stopped and not self._calls)

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
        if (destroy or stop) and getattr(HOOK_THREAD, "active", False):
            threading.Thread(target=self._end, args=(destroy, stop), daemon=True).start()
        else:
            self._end(destroy, stop)

    def _end(self, destroy, stop):
        if destroy:
            _live.discard(self)
            C.lib().rf_loader_destroy(destroy)
            self.keep = None
        elif stop:
            try:
                C.lib().rf_loader_stop(stop)
            finally:
                self._count(calls=-1)


@atexit.register
def _stop_all():
    """At interpreter exit, before the C library's exit handlers run: every loader still open
    stops its threads, so none is reading, decoding or signing a request (libcrypto, for S3)
    while those handlers tear the libraries down (a script that ended without close() died
    of SIGSEGV). Memory stays for arrays that are still referenced."""
    handles = list(_live)
    for h in handles:
        h.retire()
    deadline = time.monotonic() + EXIT_WAIT_S
    for h in handles:
        while not h.quiet() and time.monotonic() < deadline:
            time.sleep(0.005)  # a call in flight on a daemon thread returns, then stops it


class Deferred:
    """`with Deferred():` holds SIGINT back for the block, on the main thread (the only one a
    KeyboardInterrupt is raised in), and raises it when the block ends, through the handler
    that was installed. A block that changes the loader's state (a batch leased in C and
    wrapped in Python, released, a loader created and adopted) then runs whole or not at all:
    an interrupt leaves the loader as the block left it, and the call that follows carries on
    from there. Another thread, or a SIGINT handler not set from Python, is left as it is."""

    __slots__ = ("prev", "frames")

    def __enter__(self):
        self.prev, self.frames = None, []
        if threading.current_thread() is not _MAIN:
            return self
        prev = signal.getsignal(signal.SIGINT)
        if prev is not None:
            # A SIGINT pending from before is handled by this handler from here on: the
            # block cannot be entered with one raised half-way.
            signal.signal(signal.SIGINT, self._hold)
            self.prev = prev
        return self

    def _hold(self, signum, frame):
        self.frames.append(frame)

    def __exit__(self, *exc):
        prev = self.prev
        if prev is None:
            return False
        self.prev = None
        signal.signal(signal.SIGINT, prev)
        if self.frames:
            if callable(prev):
                prev(signal.SIGINT, self.frames[0])
            elif prev == signal.SIG_DFL:
                os.kill(os.getpid(), signal.SIGINT)
        return False
