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
  process with SIGBUS inside ``dlopen``; a changed one would run other code;
* it defines the functions the caller will look up, read from its ELF dynamic symbol table before it is
  opened (:func:`elf_symbols`): a library of another build is never loaded, so none of its code (its
  constructors) runs. A library in another format (macOS's Mach-O) is checked after loading instead.

Each check returns ``""`` when the path passes, else the reason, one line. Without POSIX owners (Windows)
only the checksum is checked.
"""

from __future__ import annotations

import hashlib
import os
import stat
import struct
from collections.abc import Iterable
from pathlib import Path

__all__ = [
    "CHECKSUM_SUFFIX",
    "private_folder",
    "folder_problem",
    "library_problem",
    "write_checksum",
    "elf_symbols",
]

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


def library_problem(path: Path, symbols: Iterable[str] = ()) -> str:
    """Why the library at ``path`` must not be loaded ("" if it may): its folder or it or its checksum
    file could have been written by another user, its content is not the checksum's, or (an ELF library)
    it does not define all of ``symbols`` (a phrase to follow the library's name)."""
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
        if want != [got]:
            return f"does not match its checksum ({path.stat().st_size} bytes: truncated or changed)"
        defined = elf_symbols(path.read_bytes()) if symbols else None
    except FileNotFoundError as e:
        return f"{Path(e.filename).name if e.filename else path.name} is missing"
    except (OSError, UnicodeDecodeError) as e:
        return str(getattr(e, "strerror", None) or e)
    except ValueError as e:  # an ELF file whose tables do not read
        return f"not a shared library this kit can read ({e})"
    missing = [name for name in symbols if defined is not None and name not in defined]
    return f"another build: it lacks {', '.join(missing)}" if missing else ""


_SHT_DYNSYM, _SHN_UNDEF = 11, 0


def elf_symbols(data: bytes) -> set[str] | None:
    """The names an ELF file defines in its dynamic symbol table (what ``dlsym`` can find), read without
    loading it; None when ``data`` is not ELF.

    Raises:
        ValueError: an ELF file whose section or symbol tables lie outside it (cut short) or make no sense.
    """
    if data[:4] != b"\x7fELF":
        return None
    try:
        wide, order = {1: False, 2: True}[data[4]], {1: "<", 2: ">"}[data[5]]
        # ELF header: e_shoff, then e_shentsize and e_shnum; section header: sh_type, sh_offset, sh_size,
        # sh_link, sh_entsize; symbol: st_name and st_shndx (ELF64 / ELF32 layouts).
        shoff, shentsize, shnum = (
            (struct.unpack_from(order + "Q", data, 0x28)[0], *struct.unpack_from(order + "HH", data, 0x3A))
            if wide
            else (struct.unpack_from(order + "I", data, 0x20)[0], *struct.unpack_from(order + "HH", data, 0x2E))
        )
        fmt = order + ("4xI16xQQI12xQ" if wide else "4xI8xIII8xI")  # type, offset, size, link, entsize

        def section(i: int) -> tuple[int, int, int, int, int]:
            if not 0 <= i < shnum:
                raise ValueError(f"section {i} of {shnum}")
            return struct.unpack_from(fmt, data, shoff + i * shentsize)

        names: set[str] = set()
        for i in range(shnum):
            kind, offset, size, link, entsize = section(i)
            if kind != _SHT_DYNSYM:
                continue
            _, str_offset, str_size, _, _ = section(link)
            if entsize < (24 if wide else 16) or offset + size > len(data) or str_offset + str_size > len(data):
                raise ValueError("a symbol table outside the file")
            for at in range(offset, offset + size - entsize + 1, entsize):
                name_at, shndx = struct.unpack_from(order + ("I2xH" if wide else "I10xH"), data, at)
                if shndx != _SHN_UNDEF and name_at < str_size:
                    end = data.find(b"\0", str_offset + name_at, str_offset + str_size)
                    names.add(data[str_offset + name_at : end if end >= 0 else str_offset + str_size].decode())
        return names
    except (KeyError, IndexError, struct.error, UnicodeDecodeError) as e:
        raise ValueError(f"unreadable ELF tables: {e}") from None
