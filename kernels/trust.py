"""Whether a file may be loaded as code: written by this user or root, and unchanged since.

The CPU path's C library (``pagedlab.kernels.native``) is kept in the user's cache or in a temp folder,
under a name anyone can compute (a hash of the kit's sources, compiler, flags and CPU); loading it runs
its code in the user's process. So a library is loaded only when

* its folder and every folder above it belong to this user or root, and no one else can write to the
  folder (above it, a folder others can write only with the sticky bit, as ``/tmp``: there, others can
  neither rename nor delete what is ours); the library and its checksum file belong to this user or root
  and no one else can write to them;
* its content is the one written at build time: the sha256 in ``<library>.sha256`` (``sha256sum``'s
  format) beside it. A truncated copy (an interrupted ``cp`` of a shared cache) would otherwise crash the
  process with SIGBUS inside ``dlopen``; a changed one would run other code.

Each check returns ``""`` when the path passes, else the reason, one line. Without POSIX owners (Windows)
only the checksum is checked.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

__all__ = ["CHECKSUM_SUFFIX", "private_folder", "folder_problem", "library_problem", "write_checksum"]

CHECKSUM_SUFFIX = ".sha256"
_OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH


def _uid() -> int | None:
    return os.getuid() if hasattr(os, "getuid") else None


def _owner_problem(path: Path, st: os.stat_result, *, sticky_ok: bool) -> str:
    """Why ``path`` (stat ``st``) could have been written by another user ("" if it cannot)."""
    uid = _uid()
    if uid is None:
        return ""
    if st.st_uid not in (uid, 0):
        return f"{path} belongs to uid {st.st_uid}, not to this user ({uid}) or root"
    if st.st_mode & _OTHERS_WRITE and not (sticky_ok and st.st_mode & stat.S_ISVTX):
        return f"{path} can be written by other users (mode {stat.S_IMODE(st.st_mode):o})"
    return ""


def folder_problem(folder: Path) -> str:
    """Why files in ``folder`` could have been put there by another user ("" if they cannot)."""
    try:
        real = folder.resolve(strict=True)
        problem = _owner_problem(real, real.stat(), sticky_ok=False)
        for above in real.parents:
            problem = problem or _owner_problem(above, above.stat(), sticky_ok=True)
    except OSError as e:
        return f"{folder}: {e.strerror or e}"
    return problem


def private_folder(folder: Path) -> str:
    """Create ``folder`` (and the missing folders above it) with mode 0700, then check it as
    :func:`folder_problem` does: ``""`` when it is ours to build in, else why not (a folder of the same
    name that another user created first, e.g. in a shared ``/tmp``, is never used)."""
    missing = [p for p in (folder, *folder.parents) if not p.exists()]
    try:
        for p in reversed(missing):
            os.mkdir(p, 0o700)
    except FileExistsError:
        pass  # another process of ours made it meanwhile: checked below like any other
    except OSError as e:
        return f"{folder}: {e.strerror or e}"
    return folder_problem(folder)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def write_checksum(path: Path) -> None:
    """Write ``<path>.sha256`` (``sha256sum`` format), atomically, readable by all, writable by the owner."""
    sidecar = path.with_name(path.name + CHECKSUM_SUFFIX)
    tmp = sidecar.with_name(f".{sidecar.name}.{os.getpid()}.tmp")
    tmp.write_text(f"{_sha256(path)}  {path.name}\n")
    tmp.chmod(0o644)
    os.replace(tmp, sidecar)


def library_problem(path: Path) -> str:
    """Why the library at ``path`` must not be loaded ("" if it may): its folder or it or its checksum
    file could have been written by another user, or its content is not the checksum's (a phrase to
    follow the library's name)."""
    sidecar = path.with_name(path.name + CHECKSUM_SUFFIX)
    problem = folder_problem(path.parent)
    try:
        for p in (path, sidecar):
            st = p.stat()
            if not stat.S_ISREG(st.st_mode):
                return f"{p.name} is not a regular file"
            problem = problem or _owner_problem(p, st, sticky_ok=False)
        if problem:
            return problem
        want = sidecar.read_text().split()[:1]
        got = _sha256(path)
    except FileNotFoundError as e:
        return f"{Path(e.filename).name if e.filename else path.name} is missing"
    except (OSError, UnicodeDecodeError) as e:
        return str(getattr(e, "strerror", None) or e)
    if want != [got]:
        return f"does not match its checksum ({path.stat().st_size} bytes: truncated or changed)"
    return ""
