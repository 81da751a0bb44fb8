"""Kernel containment of the learner's process: Landlock (files, network, signals) and seccomp-bpf (syscalls).

The learner's process (:mod:`pagedlab.grading.sandbox`) applies both to itself before any learner code
runs; every thread and every process it could start inherit them, and nothing can remove them:

1. :func:`restrict_files` (Landlock, first thing in the process, while it has one thread): writes,
   creating, removing and renaming files only under its scratch folder; reads only under the
   folders it names (the Python installation, the kit, system folders); no ``execve`` of any file;
   no TCP ``bind``/``connect`` (Landlock ABI >= 4); no signal to a process outside itself and no
   abstract unix socket outside it (ABI >= 6).
2. :func:`deny_syscalls` (seccomp-bpf, after the modules the exercises need are loaded, all threads
   at once): no new program (``execve``, ``execveat``), no new process (``fork``, ``vfork``,
   ``clone`` without ``CLONE_THREAD``, ``clone3`` answers ``ENOSYS`` so threads fall back to
   ``clone``), no new executable mapping (``mmap`` with ``PROT_EXEC``: a library can no longer be
   loaded, so ``dlopen`` of new code fails, and Python's ``mmap`` cannot make executable memory;
   ``personality`` is refused, it could make readable memory executable), no other process's memory or signals
   (``ptrace``, ``process_vm_readv/writev``, ``kill``/``tgkill``/``rt_sigqueueinfo`` of another pid,
   ``tkill``, pidfds), no new session or process group, no sockets, no namespaces, no ``io_uring``,
   ``bpf``, ``perf_event_open`` or ``userfaultfd``, and no change to any file's mode, owner, times or
   extended attributes (the ``chmod``, ``chown``, ``utime`` and ``setxattr``/``removexattr`` families,
   by path, by descriptor or relative to a folder descriptor: Landlock does not cover them, and a mode
   taken off the interpreter or the kit would break every later learner's run); no change to a resource
   limit (``setrlimit``; ``prlimit64`` only to read one) or to scheduling (``setpriority``, ``sched_set*``,
   ``ioprio_set``), and none of root's operations on the machine (clock, mounts, ``chroot``, swap, modules,
   ``kexec``, ``reboot``, host name, ``acct``, ``quotactl``). A refused call fails with ``EPERM``; a call of
   another architecture's syscall table kills the process.

Both are plain syscalls made through ctypes; where the kernel lacks one (Landlock needs Linux >= 5.13
with Landlock enabled, seccomp filters Linux >= 3.5) the functions return why, and the caller says so
loudly (the grader prints a warning). Linux on x86-64 and aarch64 only.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
import sys
from collections.abc import Iterable

__all__ = ["deny_syscalls", "landlock_abi", "restrict_files"]

# --- libc ------------------------------------------------------------------------------------------------
_PR_SET_NO_NEW_PRIVS = 38
_MACHINE = platform.machine().lower()
_X86 = _MACHINE in ("x86_64", "amd64")
_ARM = _MACHINE in ("aarch64", "arm64")
#: syscall numbers: (x86-64, aarch64); None: not on that architecture.
_NR: dict[str, tuple[int | None, int | None]] = {
    "execve": (59, 221),
    "execveat": (322, 281),
    "fork": (57, None),
    "vfork": (58, None),
    "clone": (56, 220),
    "clone3": (435, 435),
    "ptrace": (101, 117),
    "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271),
    "kill": (62, 129),
    "tkill": (200, 130),
    "tgkill": (234, 131),
    "rt_sigqueueinfo": (129, 138),
    "rt_tgsigqueueinfo": (297, 240),
    "pidfd_open": (434, 434),
    "pidfd_send_signal": (424, 424),
    "pidfd_getfd": (438, 438),
    "mmap": (9, 222),
    "personality": (135, 92),
    "setsid": (112, 157),
    "setpgid": (109, 154),
    "socket": (41, 198),
    "unshare": (272, 97),
    "setns": (308, 268),
    "io_uring_setup": (425, 425),
    "bpf": (321, 280),
    "perf_event_open": (298, 241),
    "userfaultfd": (323, 282),
    "seccomp": (317, 277),
    "landlock_create_ruleset": (444, 444),
    "landlock_add_rule": (445, 445),
    "landlock_restrict_self": (446, 446),
    # file metadata: Landlock restricts none of these (mode, owner, times, extended attributes)
    "chmod": (90, None),
    "fchmod": (91, 52),
    "fchmodat": (268, 53),
    "fchmodat2": (452, 452),
    "chown": (92, None),
    "fchown": (93, 55),
    "lchown": (94, None),
    "fchownat": (260, 54),
    "utime": (132, None),
    "utimes": (235, None),
    "futimesat": (261, None),
    "utimensat": (280, 88),
    "setxattr": (188, 5),
    "lsetxattr": (189, 6),
    "fsetxattr": (190, 7),
    "removexattr": (197, 14),
    "lremovexattr": (198, 15),
    "fremovexattr": (199, 16),
}
#: Resource limits, scheduling and the machine itself: the learner's limits (``RLIMIT_AS``, ``RLIMIT_CPU``,
#: ``RLIMIT_FSIZE``) are set before its code runs, and as root (Gradescope's container) it could raise them or,
#: as the grader's user, lower the driver's or the grader's (``RLIMIT_FSIZE`` 0 ends a process at its next
#: write); a real-time policy or a negative nice value would starve the grader. Root-only operations on the
#: machine (clock, mounts, modules, swap, reboot) have no use in an exercise. ``prlimit64`` that only reads a
#: limit (``new_limit`` NULL, as ``getrlimit`` does) stays allowed.
_NR.update(
    {
        "setrlimit": (160, 164),
        "prlimit64": (302, 261),
        "setpriority": (141, 140),
        "sched_setparam": (142, 118),
        "sched_setscheduler": (144, 119),
        "sched_setattr": (314, 274),
        "ioprio_set": (251, 30),
        "settimeofday": (164, 170),
        "clock_settime": (227, 112),
        "adjtimex": (159, 171),
        "clock_adjtime": (305, 266),
        "mount": (165, 40),
        "umount2": (166, 39),
        "pivot_root": (155, 41),
        "chroot": (161, 51),
        "open_tree": (428, 428),
        "move_mount": (429, 429),
        "fsopen": (430, 430),
        "fsconfig": (431, 431),
        "fsmount": (432, 432),
        "mount_setattr": (442, 442),
        "swapon": (167, 224),
        "swapoff": (168, 225),
        "reboot": (169, 142),
        "sethostname": (170, 161),
        "setdomainname": (171, 162),
        "init_module": (175, 105),
        "finit_module": (313, 273),
        "delete_module": (176, 106),
        "kexec_load": (246, 104),
        "kexec_file_load": (320, 294),
        "acct": (163, 89),
        "quotactl": (179, 60),
    }
)
_LIMITS_AND_MACHINE = (
    "setrlimit",
    "setpriority",
    "sched_setparam",
    "sched_setscheduler",
    "sched_setattr",
    "ioprio_set",
    "settimeofday",
    "clock_settime",
    "adjtimex",
    "clock_adjtime",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "mount_setattr",
    "swapon",
    "swapoff",
    "reboot",
    "sethostname",
    "setdomainname",
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "acct",
    "quotactl",
)
#: Syscalls that change a file's metadata; Landlock leaves them alone, so seccomp refuses them all (the learner's
#: own folder included: seccomp sees no paths, and nothing an exercise needs changes a mode, owner or time).
_METADATA = (
    "chmod",
    "fchmod",
    "fchmodat",
    "fchmodat2",
    "chown",
    "fchown",
    "lchown",
    "fchownat",
    "utime",
    "utimes",
    "futimesat",
    "utimensat",
    "setxattr",
    "lsetxattr",
    "fsetxattr",
    "removexattr",
    "lremovexattr",
    "fremovexattr",
)


def _nr(name: str) -> int | None:
    x86, arm = _NR[name]
    return x86 if _X86 else arm if _ARM else None


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _syscall(name: str, *args: int | ctypes.c_void_p | None) -> int:
    nr = _nr(name)
    if nr is None:
        raise OSError(errno.ENOSYS, f"{name}: no such syscall on {_MACHINE}")
    fn = _libc().syscall
    fn.restype = ctypes.c_long
    res = int(fn(ctypes.c_long(nr), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args]))
    if res < 0:
        e = ctypes.get_errno()
        raise OSError(e, f"{name}: {os.strerror(e)}")
    return res


def _no_new_privs() -> None:
    if _libc().prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(e)}")


# --- Landlock ------------------------------------------------------------------------------------------------
_FS_EXECUTE, _FS_WRITE_FILE, _FS_READ_FILE, _FS_READ_DIR = 1, 2, 4, 8
_FS_REFER, _FS_TRUNCATE, _FS_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_FILE_RIGHTS = _FS_EXECUTE | _FS_WRITE_FILE | _FS_READ_FILE | _FS_TRUNCATE | _FS_IOCTL_DEV
_READ = _FS_READ_FILE | _FS_READ_DIR


def landlock_abi() -> int:
    """The kernel's Landlock ABI version (0: none)."""
    try:
        return _syscall("landlock_create_ruleset", None, 0, 1)  # LANDLOCK_CREATE_RULESET_VERSION
    except OSError:
        return 0


def _fs_rights(abi: int) -> int:
    rights = (1 << 13) - 1  # ABI 1: execute ... make_sym
    if abi >= 2:
        rights |= _FS_REFER
    if abi >= 3:
        rights |= _FS_TRUNCATE
    if abi >= 5:
        rights |= _FS_IOCTL_DEV
    return rights


def _add_path(ruleset: int, path: str, access: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # a folder this machine does not have
    try:
        if not os.path.isdir(path):
            access &= _FILE_RIGHTS
        attr = struct.pack("=Qi", access, fd)  # struct landlock_path_beneath_attr (packed)
        buf = ctypes.create_string_buffer(attr, len(attr))
        _syscall("landlock_add_rule", ruleset, 1, ctypes.cast(buf, ctypes.c_void_p), 0)  # RULE_PATH_BENEATH
    finally:
        os.close(fd)


def restrict_files(workdir: str, read_roots: Iterable[str]) -> str:
    """Apply Landlock to this process (and all it starts): see the module docstring.

    Call while the process has one thread (Landlock binds the calling thread and its future
    children). Returns "" or why Landlock is not applied (the kernel has none, a syscall failed).
    """
    abi = landlock_abi()
    if abi < 1:
        return "Landlock is not available in this kernel (Linux >= 5.13 with Landlock enabled needed)"
    rights = _fs_rights(abi)
    attr = struct.pack("=QQQ", rights, 3 if abi >= 4 else 0, 3 if abi >= 6 else 0)  # fs, net (tcp), scoped
    size = 8 if abi < 4 else 16 if abi < 6 else 24
    buf = ctypes.create_string_buffer(attr, len(attr))
    try:
        ruleset = _syscall("landlock_create_ruleset", ctypes.cast(buf, ctypes.c_void_p), size, 0)
    except OSError as e:
        return f"Landlock ruleset refused ({e})"
    try:
        for root in sorted(set(read_roots)):
            _add_path(ruleset, root, _READ)
        _add_path(ruleset, "/dev/null", _FS_READ_FILE | _FS_WRITE_FILE)
        _add_path(ruleset, workdir, rights & ~_FS_EXECUTE)
        _no_new_privs()
        _syscall("landlock_restrict_self", ruleset, 0)
    except OSError as e:
        return f"Landlock could not be applied ({e})"
    finally:
        os.close(ruleset)
    return ""


# --- seccomp-bpf -----------------------------------------------------------------------------------------
_LD_W_ABS, _JEQ, _JSET, _RET = 0x20, 0x15, 0x45, 0x06
_ALLOW, _KILL = 0x7FFF0000, 0x80000000


def _errno(e: int) -> int:
    return 0x00050000 | e


_ARCH = 0xC000003E if _X86 else 0xC00000B7  # AUDIT_ARCH_X86_64 / AUDIT_ARCH_AARCH64
_OFF_NR, _OFF_ARCH = 0, 4
_CLONE_THREAD, _PROT_EXEC = 0x00010000, 0x4


def _arg_low(i: int) -> int:
    return 16 + 8 * i  # seccomp_data.args[i], low 32 bits (little-endian)


def _program(pid: int) -> list[tuple[int, int, int, int]]:
    """The BPF program: (code, jt, jf, k) instructions."""
    deny = _errno(errno.EPERM)
    prog: list[tuple[int, int, int, int]] = [
        (_LD_W_ABS, 0, 0, _OFF_ARCH),
        (_JEQ, 1, 0, _ARCH),
        (_RET, 0, 0, _KILL),
        (_LD_W_ABS, 0, 0, _OFF_NR),
    ]
    if _X86:  # the x32 table (nr | 0x40000000) would be a second door
        prog += [(0x35, 0, 1, 0x40000000), (_RET, 0, 0, _KILL)]  # JGE

    def nr(name: str) -> int | None:
        return _nr(name)

    refused = [
        "execve",
        "execveat",
        "fork",
        "vfork",
        "ptrace",
        "process_vm_readv",
        "process_vm_writev",
        "tkill",
        "pidfd_open",
        "pidfd_send_signal",
        "pidfd_getfd",
        "personality",
        "setsid",
        "setpgid",
        "socket",
        "unshare",
        "setns",
        "io_uring_setup",
        "bpf",
        "perf_event_open",
        "userfaultfd",
        *_METADATA,
        *_LIMITS_AND_MACHINE,
    ]
    for name in refused:
        n = nr(name)
        if n is not None:
            prog += [(_JEQ, 0, 1, n), (_RET, 0, 0, deny)]
    prog += [(_JEQ, 0, 1, nr("clone3") or 0xFFFFFFFF), (_RET, 0, 0, _errno(errno.ENOSYS))]

    def when_arg(name: str, arg: int, test: int, value: int, allow_if_set: bool) -> list[tuple[int, int, int, int]]:
        """``name``: load args[arg], then allow/deny on a bit test (JSET) or an equality (JEQ)."""
        n = nr(name)
        if n is None:
            return []
        ok, bad = (_ALLOW, deny) if allow_if_set else (deny, _ALLOW)
        return [
            (_JEQ, 0, 4, n),
            (_LD_W_ABS, 0, 0, _arg_low(arg)),
            (test, 0, 1, value),
            (_RET, 0, 0, ok),
            (_RET, 0, 0, bad),
        ]

    n = nr("prlimit64")
    if n is not None:  # prlimit64(pid, resource, new_limit, old_limit): only reading (new_limit NULL) is allowed
        prog += [
            (_JEQ, 0, 6, n),
            (_LD_W_ABS, 0, 0, _arg_low(2)),
            (_JEQ, 0, 2, 0),
            (_LD_W_ABS, 0, 0, _arg_low(2) + 4),
            (_JEQ, 1, 0, 0),
            (_RET, 0, 0, deny),
            (_RET, 0, 0, _ALLOW),
        ]
    prog += when_arg("clone", 0, _JSET, _CLONE_THREAD, allow_if_set=True)
    # a new executable mapping (a library's code, memory made executable at once) is refused; making
    # memory executable later (mprotect) is not: oneDNN, torch's CPU kernels, generates its kernels so
    prog += when_arg("mmap", 2, _JSET, _PROT_EXEC, allow_if_set=False)
    for name in ("kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo"):
        prog += when_arg(name, 0, _JEQ, pid, allow_if_set=True)
    prog.append((_RET, 0, 0, _ALLOW))
    return prog


def deny_syscalls() -> str:
    """Install the seccomp filter on every thread of this process (see the module docstring).

    Returns "" or why it is not installed. Load every library the process will need first: after
    this, none can be loaded.
    """
    if not (_X86 or _ARM) or sys.platform != "linux":
        return f"seccomp: only Linux on x86-64 and aarch64 is supported here (this is {sys.platform} {_MACHINE})"
    prog = _program(os.getpid())
    insns = (ctypes.c_ubyte * (8 * len(prog))).from_buffer_copy(b"".join(struct.pack("=HBBI", *i) for i in prog))
    fprog = struct.pack("=HxxxxxxQ", len(prog), ctypes.addressof(insns))  # struct sock_fprog
    fbuf = ctypes.create_string_buffer(fprog, len(fprog))
    try:
        _no_new_privs()
        _syscall("seccomp", 1, 1, ctypes.cast(fbuf, ctypes.c_void_p))  # SET_MODE_FILTER, FILTER_FLAG_TSYNC
    except OSError as e:
        return f"seccomp filter refused ({e})"
    return ""
