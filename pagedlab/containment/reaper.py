"""Every process ``pagedlab grade`` starts ends before it writes a result, and when it is stopped.

* :class:`Supervisor` makes the grader a *child subreaper* (``PR_SET_CHILD_SUBREAPER``, Linux) for
  its run: a process that leaves its parent behind (a detached grandchild of a driver, however it
  was started) becomes the grader's child instead of init's, so the grader can find it.
  :meth:`Supervisor.kill_strays` kills and reaps every such child; the grader calls it before it reads a
  driver's results and before it writes any report.
* :func:`die_with_parent` (a ``preexec_fn`` step): a driver, and the learner's process under it,
  gets ``SIGKILL`` when its parent dies, even by ``SIGKILL``.
* :func:`stop_on_signals`: ``SIGINT``/``SIGTERM`` raise :class:`Stopped` in the grader's main
  thread, so its ``finally`` blocks kill what runs and remove the temporary folders.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
from collections.abc import Iterator

__all__ = ["Stopped", "Supervisor", "children", "die_with_parent", "stop_on_signals"]

_PR_SET_PDEATHSIG, _PR_SET_CHILD_SUBREAPER, _PR_GET_CHILD_SUBREAPER = 1, 36, 37


class Stopped(KeyboardInterrupt):
    """``pagedlab grade`` received SIGINT or SIGTERM (``signum``)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


#: Resolved once, in the parent: a ``preexec_fn`` must not load libraries between fork and exec.
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform == "linux" else None


def _prctl(option: int, arg: int | ctypes.c_void_p = 0) -> int:
    if _LIBC is None:
        return -1
    return int(_LIBC.prctl(option, arg, 0, 0, 0))


def die_with_parent() -> None:
    """In a child before ``exec``: be killed when the parent dies (Linux; elsewhere nothing)."""
    _prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL))


def children(pid: int | None = None) -> list[int]:
    """Pids whose parent is ``pid`` (default: this process), from ``/proc``."""
    me = os.getpid() if pid is None else pid
    out = []
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if len(fields) > 1 and int(fields[1]) == me:
                out.append(int(name))
    return sorted(out)


class Supervisor:
    """The grader as the subreaper of its run (a context manager); see the module docstring."""

    def __init__(self) -> None:
        self.before: set[int] = set()
        self.was = 0
        self.active = False

    def __enter__(self) -> Supervisor:
        self.before = set(children())
        flag = ctypes.c_int(0)
        if _prctl(_PR_GET_CHILD_SUBREAPER, ctypes.cast(ctypes.pointer(flag), ctypes.c_void_p)) == 0:
            self.was = flag.value
        self.active = _prctl(_PR_SET_CHILD_SUBREAPER, 1) == 0
        return self

    def kill_strays(self, keep: set[int] | frozenset[int] = frozenset()) -> int:
        """Kill and reap every child of this process that is not in ``keep`` and was not there before
        the run (so: the orphaned descendants of the drivers); return how many. Repeats until none
        is left (a stray's own children come to this process when it dies)."""
        killed = 0
        for _ in range(50):
            strays = [p for p in children() if p not in keep and p not in self.before]
            if not strays:
                break
            for pid in strays:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            for pid in strays:
                with contextlib.suppress(ChildProcessError, OSError):
                    os.waitpid(pid, 0)
            killed += len(strays)
        return killed

    def __exit__(self, *exc: object) -> None:
        self.kill_strays()
        if self.active and not self.was:
            _prctl(_PR_SET_CHILD_SUBREAPER, 0)


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM raise :class:`Stopped` (main thread only; elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_signal(signum: int, _frame: object) -> None:
        raise Stopped(signum)

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
