"""A contained child's resource limits, and the native modules it loads before seccomp forbids loading any."""

from __future__ import annotations

import importlib
import importlib.machinery
import os
import resource
import sys
import sysconfig
from collections.abc import Callable

from pagedlab.containment.reaper import die_with_parent

__all__ = ["PRELOADED", "limits_preexec", "preload_native_modules"]


def limits_preexec(memory_mb: int, cpu_s: int, fsize_mb: int = 64) -> Callable[[], None]:
    """A ``preexec_fn`` setting the child's resource limits (Linux/macOS) and its death with its parent."""

    def apply() -> None:
        mem = int(memory_mb) * 1024 * 1024
        for lim, val in (
            (resource.RLIMIT_AS, (mem, mem)),
            (resource.RLIMIT_CPU, (int(cpu_s), int(cpu_s) + 5)),
            (resource.RLIMIT_FSIZE, (fsize_mb * 1024 * 1024, fsize_mb * 1024 * 1024)),
            (resource.RLIMIT_CORE, (0, 0)),
        ):
            try:
                resource.setrlimit(lim, val)
            except (ValueError, OSError):  # e.g. RLIMIT_AS unsupported on macOS: the timeout still holds
                pass
        die_with_parent()  # a grader or driver killed even by SIGKILL takes its processes with it

    return apply


#: Extension modules of the standard library not loaded for learner code (no use in an exercise).
_NOT_PRELOADED = ("_test", "_xx", "xx", "_ctypes_test", "_tkinter", "_curses", "readline", "ossaudiodev", "nis", "spwd")
#: Third-party modules with native code a learner's cell may import, loaded when installed.
PRELOADED = ("numpy",)


def preload_native_modules() -> list[str]:
    """Load every extension module of the standard library (``math``, ``_random``, ``_heapq``,
    ``_bisect``, ``_decimal``...) and :data:`PRELOADED`: after the seccomp filter no library can be
    loaded, so a learner's ``import random`` must find its native part loaded. Returns those that
    could not be loaded."""
    failed = []
    # In a venv (Gradescope's /autograder/venv, the kit's .venv) sysconfig's platstdlib is the venv's own
    # lib/pythonX.Y, which has no lib-dynload: the base interpreter's is on sys.path (and under base_exec_prefix).
    base = sysconfig.get_path(
        "platstdlib", vars={"platbase": sys.base_exec_prefix, "installed_platbase": sys.base_exec_prefix}
    )
    folders = {p for p in sys.path if os.path.basename(p) == "lib-dynload"} | {os.path.join(base, "lib-dynload")}
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    names = sorted(
        {f.split(".")[0] for d in folders if os.path.isdir(d) for f in os.listdir(d) if f.endswith(suffixes)}
    )
    for name in [n for n in names if not n.startswith(_NOT_PRELOADED)] + list(PRELOADED):
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - not installed or not loadable here: a learner's import says so
            failed.append(name)
    return failed
