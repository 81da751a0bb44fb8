"""``pagedlab doctor`` on each documented install, done for real (issue 22, item 6).

tests/test_doctor.py simulates these installs by hiding packages from the doctor; here each one is made as the
docs say, in a clean venv (``python -m venv``, pip with ``-c requirements.lock``; pip's cache and the machine's
wheel folders are reused, so nothing is downloaded where the wheels are local), from the kit's wheel built once
per session (tests/_kitwheel.py, shared with tests/test_wheel_install.py). Two installs (a venv install is the
slow part; ``--no-compile`` skips byte-compiling torch), three checks:

* **pip + [lab]**: ``pip install -c requirements.lock ".[lab]"`` from a clone - the instructor guide's JupyterHub
  command, and what README's ``pip install "pagedlab[lab] @ git+<url>"`` does (a build from the source tree).
  Checked twice: as a learner's own machine (``pagedlab labs copy``, the model in a writable cache), and as a
  **JupyterHub** learner (another ``$HOME``, the guide's one read-only model cache in ``$PAGEDLAB_CACHE_DIR``,
  ``pagedlab labs copy ~/labs``);
* **Colab** (README, "Open in Colab"; ``pagedlab/colab.py``): Colab's own torch, transformers and ipywidgets are
  there first, then the setup cell's plain ``pip install <kit>`` (here the wheel, no extra), ``pagedlab labs copy``.

In each, ``pagedlab doctor`` must exit 0 and name the extras that are not installed ([test], [triton]) only as
"info" lines with their pip command: no line for pytest, nbval, triton or chromium, no FAIL, no ``make setup``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pagedlab.model.fetch import ENV_CACHE_DIR, model_path
from tests._kitwheel import ROOT, copy_sources

pytestmark = [pytest.mark.slow, pytest.mark.model, pytest.mark.timeout(1800)]

#: Checks an install without the [test] or [triton] extra must not show (their features are not in use).
EXTRA_ONLY = ("pytest", "nbval", "triton", "chromium", "playwright")


def _env(home: Path, **extra: str) -> dict[str, str]:
    """This environment without this checkout's venv or Python paths."""
    drop = {"PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", ENV_CACHE_DIR, "PAGEDLAB_DATA_DIR"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if ".venv" not in p)
    env["HOME"] = str(home)
    env["PIP_CACHE_DIR"] = os.environ.get("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip"))
    env.update(extra)
    return env


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: int = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False, timeout=timeout)


def _pip(venv: Path, cwd: Path, env: dict[str, str], *reqs: str) -> None:
    lock = str(ROOT / "requirements.lock")
    cmd = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-compile", "-c", lock, *reqs]
    out = _run(cmd, cwd, env)
    assert out.returncode == 0, f"pip install {' '.join(reqs)}:\n{out.stdout[-2000:]}{out.stderr[-3000:]}"


def _model_cache(where: Path, *, read_only: bool) -> Path:
    """A model cache holding this machine's model file (and its verified-hash note)."""
    where.mkdir(parents=True)
    for p in model_path().parent.glob(model_path().name + "*"):
        shutil.copy2(p, where / p.name)
    if read_only:
        where.chmod(0o555)
    return where


def _venv(tmp: Path, kind: str, wheel: Path) -> Path:
    """A clean venv holding the install ``kind`` ("lab" or "colab") as its docs say."""
    venv = tmp / f"venv-{kind}"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    env = _env(tmp)
    if kind == "lab":
        clone = copy_sources(tmp / "clone")
        shutil.copy2(ROOT / "requirements.lock", clone / "requirements.lock")
        _pip(venv, clone, env, ".[lab]")
    elif kind == "colab":
        _pip(venv, tmp, env, "torch", "transformers", "ipywidgets")  # Colab's own, installed before the kit
        _pip(venv, tmp, env, str(wheel))  # the setup cell: `pip install -q <KIT_SOURCE>`, no extra
    else:
        raise ValueError(f"unknown install {kind!r}")
    return venv


@pytest.fixture(scope="module")
def venvs(tmp_path_factory: pytest.TempPathFactory, kit_wheel: Path) -> dict[str, Path]:
    if not model_path().is_file():
        pytest.skip("the model is not cached here (`pagedlab fetch-model`)")
    tmp = tmp_path_factory.mktemp("installs")
    return {kind: _venv(tmp, kind, kit_wheel) for kind in ("lab", "colab")}


@pytest.mark.parametrize("kind", ["own machine", "hub", "colab"])
def test_doctor_passes_on_each_documented_install_done_for_real(
    kind: str, tmp_path: Path, venvs: dict[str, Path]
) -> None:
    venv = venvs["colab" if kind == "colab" else "lab"]
    home = tmp_path / "home"
    home.mkdir()
    env = _env(home, **{ENV_CACHE_DIR: str(_model_cache(tmp_path / "model-cache", read_only=kind == "hub"))})
    pagedlab = str(venv / "bin" / "pagedlab")
    copied = _run([pagedlab, "labs", "copy", str(home / "labs")], home, env)
    assert copied.returncode == 0, copied.stdout + copied.stderr
    labs = sorted(p.name for p in (ROOT / "labs").glob("*.ipynb"))
    assert sorted(p.name for p in (home / "labs").glob("*.ipynb")) == labs

    where = _run([str(venv / "bin" / "python"), "-c", "import pagedlab; print(pagedlab.__file__)"], home, env)
    assert where.stdout.startswith(str(venv)), where.stdout + where.stderr  # the install's kit, not this checkout

    doc = _run([pagedlab, "doctor"], home / "labs", env)
    out = doc.stdout + doc.stderr
    assert doc.returncode == 0, out
    assert "FAIL" not in out and "make setup" not in out, out
    for extra in ("test", "triton"):
        assert f"info  [{extra}]" in out and f"pip install 'pagedlab[{extra}]'" in out, out
    named = {line.split()[1] for line in doc.stdout.splitlines() if len(line.split()) > 1 and line.startswith("  ")}
    assert not named & set(EXTRA_ONLY), out
    assert str(env[ENV_CACHE_DIR]) in out, out  # the cache checked is the one this install was given
