"""The guard: an audit hook refusing file access outside the working folder and the read roots, programs,
resource limits, sockets, signals to others, native code and ``gc`` walks, with a clear :class:`GuardError`
(defence in depth behind :mod:`pagedlab.containment.kernel`)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import Any

__all__ = ["GuardError", "install_guard"]


# --- the events --------------------------------------------------------------------------------------------
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_FS_EVENTS = {
    "os.remove",
    "os.rmdir",
    "os.rename",
    "os.replace",
    "shutil.rmtree",
    "os.truncate",
    "os.chmod",
    "os.chown",
    "os.link",
    "os.symlink",
    "os.mkdir",
    "os.utime",
    "shutil.move",
    "shutil.copyfile",
    "shutil.copytree",
    "os.chflags",
    "os.lchflags",
    "os.lchmod",
    "os.lchown",
    "os.setxattr",
    "os.removexattr",
}
#: Where the paths of an event are in its audit arguments: (path, its dir_fd) pairs; a path may be a file
#: descriptor (``os.fchmod(fd)`` audits as ``os.chmod``), and a relative one is relative to its dir_fd when that is
#: given. Events not listed: their first two arguments that are paths (str, bytes, PathLike), relative to the
#: working folder.
_FS_PATHS: dict[str, tuple[tuple[int, int | None], ...]] = {
    "os.chmod": ((0, 2),),
    "os.chown": ((0, 3),),
    "os.utime": ((0, 3),),
    "os.mkdir": ((0, 2),),
    "os.remove": ((0, 1),),
    "os.rmdir": ((0, 1),),
    "os.rename": ((0, 2), (1, 3)),
    "os.replace": ((0, 2), (1, 3)),
    "os.link": ((0, 2), (1, 3)),
    "os.symlink": ((0, None), (1, 2)),
    "os.truncate": ((0, None),),
    "os.setxattr": ((0, None),),
    "os.removexattr": ((0, None),),
    "shutil.rmtree": ((0, 1),),
}
_SPAWN_EVENTS = {
    "subprocess.Popen",
    "os.system",
    "os.exec",
    "os.posix_spawn",
    "os.spawn",
    "os.fork",
    "os.forkpty",
    "pty.spawn",
    "os.startfile",
    "_posixsubprocess.fork_exec",
}
_NET_EVENTS = {
    "socket.connect",
    "socket.bind",
    "socket.sendto",
    "socket.sendmsg",
    "socket.getaddrinfo",
    "socket.gethostbyname",
    "socket.__new__",
}
_GC_EVENTS = {"gc.get_objects", "gc.get_referrers", "gc.get_referents"}
#: ctypes' audit events (dlopen, dlsym, call_function, cdata, addressof, string_at...) and cffi's modules.
_FOREIGN_PREFIXES = ("ctypes.", "_ctypes.", "cffi.")
_FOREIGN_MODULES = frozenset({"ctypes", "_ctypes", "cffi", "_cffi_backend", "ctypes.util", "ctypes.wintypes"})


class GuardError(PermissionError):
    """Raised inside the learner's code for an operation the grader does not allow."""


def _under(path: str, roots: Iterable[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


class _Guard:
    """The audit hook (see :func:`install_guard`); one method per family of events."""

    SYSTEM_READ = [
        "/dev/null",
        "/dev/urandom",
        "/dev/random",
        "/dev/shm",
        "/proc/self",
        "/proc/thread-self",
        "/sys/devices/system/cpu",
        "/sys/fs/cgroup",
        "/etc/localtime",
        "/usr/share/zoneinfo",
        "/etc/ld.so.cache",
        "/proc/cpuinfo",
        "/proc/meminfo",
        "/proc/stat",
    ]

    def __init__(self, workdir: str, read_roots: list[str]) -> None:
        self.work = os.path.realpath(workdir)
        self.roots = [os.path.realpath(r) for r in read_roots if r]
        self.me = os.getpid()
        self.readable = self.roots + self.SYSTEM_READ + [f"/proc/{self.me}"]

    def deny(self, what: str) -> None:
        raise GuardError(
            f"pagedlab grade: {what} is not allowed while grading (your code may only use files "
            "in its own working folder)"
        )

    @staticmethod
    def real(p: Any) -> str:
        try:
            p = os.fsdecode(p)
        except TypeError:
            return ""
        return os.path.realpath(p if os.path.isabs(p) else os.path.join(os.getcwd(), p))

    @staticmethod
    def fd_path(fd: int) -> str:
        """The file an open descriptor refers to ("" if it cannot be told: then it counts as outside)."""
        try:
            return os.path.realpath(os.readlink(f"/proc/self/fd/{int(fd)}"))
        except (OSError, ValueError, OverflowError):
            return ""

    def target(self, path: Any, dir_fd: Any) -> str | None:
        """The real path an event acts on: ``path`` itself, a descriptor's file, or ``path`` under ``dir_fd``
        (None: the argument is not a path)."""
        if isinstance(path, int) and not isinstance(path, bool):
            return self.fd_path(path)
        if not isinstance(path, (str, bytes, os.PathLike)):
            return None
        p = os.fsdecode(path)
        if not os.path.isabs(p) and isinstance(dir_fd, int) and not isinstance(dir_fd, bool) and dir_fd >= 0:
            base = self.fd_path(dir_fd)
            return os.path.realpath(os.path.join(base, p)) if base else ""
        return self.real(p)

    @staticmethod
    def describe(path: Any, target: str) -> str:
        if isinstance(path, int):
            return f"file descriptor {path} ({target or 'unknown file'})"
        return (
            os.fsdecode(path) if not target or os.path.isabs(os.fsdecode(path)) else f"{os.fsdecode(path)} ({target})"
        )

    def on_open(self, args: Any) -> None:
        path, mode, flags = (list(args) + [None, None, None])[:3]
        if path is None or isinstance(path, int):
            return
        p = self.real(path)
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or bool(
            isinstance(flags, int) and flags & _WRITE_FLAGS
        )
        if _under(p, [self.work]) or p == "/dev/null" or (not writing and _under(p, self.readable)):
            return
        self.deny(f"{'writing' if writing else 'reading'} {os.fsdecode(path)}")

    def on_listdir(self, args: Any) -> None:
        path = args[0] if args else "."
        if isinstance(path, int):
            return
        if not _under(self.real(path if path is not None else "."), [self.work] + self.readable):
            self.deny(f"listing the folder {os.fsdecode(path)}")

    def __call__(self, event: str, args: Any) -> None:  # noqa: C901 - one branch per refused operation
        if event == "open":
            self.on_open(args)
        elif event in ("os.listdir", "os.scandir"):
            self.on_listdir(args)
        elif event in _FS_EVENTS:
            listed = event in _FS_PATHS
            for i, dir_i in _FS_PATHS.get(event, ((0, None), (1, None))):
                a = args[i] if len(args) > i else None
                if not listed and isinstance(a, int):  # e.g. os.chflags(path, flags): an int there is no file
                    continue
                dir_fd = args[dir_i] if dir_i is not None and len(args) > dir_i else None
                target = self.target(a, dir_fd)
                if target is not None and not _under(target, [self.work]):
                    self.deny(f"{event} on {self.describe(a, target)}")
        elif event == "resource.setrlimit" or (event == "resource.prlimit" and len(args) > 2 and args[2] is not None):
            self.deny("changing a resource limit")  # the seccomp filter refuses it too (any process's)
        elif event in _SPAWN_EVENTS:
            self.deny("starting another program")
        elif event in _NET_EVENTS:
            self.deny("network access")
        elif event in ("os.kill", "os.killpg", "signal.pthread_kill"):
            if event != "os.kill" or (args[0] if args else None) != self.me:  # kill(0, ...) is the driver's group
                self.deny("signalling another process")
        elif event == "sys.addaudithook":
            self.deny("adding an audit hook")
        elif event in _GC_EVENTS:
            self.deny(f"{event}()")
        elif event.startswith(_FOREIGN_PREFIXES) or (event == "import" and args and args[0] in _FOREIGN_MODULES):
            # deny by default: no library (not even dlopen(None), the process itself, whose libc has
            # system()), no symbol, no foreign call, no raw memory - the kit needs none after the guard
            self.deny(f"native code ({event})")


def install_guard(workdir: str, read_roots: list[str]) -> None:
    """Install the audit hook of this process (it cannot be removed).

    Reads are allowed under ``workdir``, ``read_roots`` (the Python installation and the pagedlab
    package) and a few system paths Python and torch need; writes only under ``workdir``.
    Refused operations raise :class:`GuardError` inside the learner's code.
    """
    sys.addaudithook(_Guard(workdir, read_roots))
