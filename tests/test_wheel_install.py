"""The kit works from a wheel, with no clone: build it, install it outside the repository, then from a scratch
folder copy the labs, run lab 00 headless and serve the packaged prompts (issue 12, "done when").

The scratch venv reuses the dependencies already installed (a ``.pth`` line pointing at this interpreter's
site-packages) and gets only the wheel (``--no-deps``), so the test needs no network. Every command runs
with the scratch folder as cwd and ``PYTHONPATH`` unset, and the test checks that ``pagedlab`` is imported
from the scratch venv, never from this checkout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

from pagedlab.model.fetch import ENV_CACHE_DIR, model_path

ROOT = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.slow]


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: int = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False, timeout=timeout)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory, kit_wheel: Path) -> dict[str, Path]:
    """A venv outside the repo holding only the freshly built pagedlab wheel (deps via .pth)."""
    tmp = tmp_path_factory.mktemp("wheel")
    wheel = kit_wheel
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    site = Path(
        _run(
            [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=tmp, env=dict(os.environ)
        ).stdout.strip()
    )
    deps = sysconfig.get_paths()["purelib"]
    torch_site = Path(__import__("torch").__file__).resolve().parents[1]
    (site / "_deps.pth").write_text(f"{deps}\n{torch_site}\n")
    inst = _run(
        [sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "-q", str(wheel)],
        cwd=tmp,
        env=dict(os.environ),
        timeout=300,
    )
    assert inst.returncode == 0, inst.stderr
    work = tmp / "scratch"
    work.mkdir()
    return {"py": py, "bin": venv / "bin", "site": site, "work": work, "wheel": wheel}


def _env(installed: dict[str, Path], **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PAGEDLAB_DATA_DIR")}
    env["PATH"] = f"{installed['bin']}{os.pathsep}{env.get('PATH', '')}"
    env.update(extra)
    return env


def test_wheel_ships_data_and_labs_and_imports_from_the_venv(installed: dict[str, Path]) -> None:
    code = (
        "import pagedlab, pagedlab.data as d; print(pagedlab.__file__); print(d.path('prompts.jsonl')); "
        "print(d.labs_directory())"
    )
    out = _run([str(installed["py"]), "-c", code], cwd=installed["work"], env=_env(installed))
    assert out.returncode == 0, out.stderr
    pkg, prompts, labs = out.stdout.split()
    site = str(installed["site"])
    assert pkg.startswith(site) and prompts.startswith(site) and labs.startswith(site)
    assert not any(str(ROOT) in p for p in (pkg, prompts, labs))
    shipped = sorted(p.name for p in (installed["site"] / "pagedlab" / "_labs").glob("*.ipynb"))
    assert shipped == sorted(p.name for p in (ROOT / "labs").glob("*.ipynb"))
    data = sorted(p.name for p in (installed["site"] / "pagedlab" / "_data").iterdir())
    assert data == sorted(p.name for p in (ROOT / "data").iterdir() if p.is_file())


def test_labs_copy_then_lab00_runs_headless(installed: dict[str, Path]) -> None:
    if not model_path().exists():
        pytest.skip("model not fetched; run `pagedlab fetch-model`")
    work = installed["work"]
    env = _env(installed, MPLBACKEND="Agg", OMP_WAIT_POLICY="PASSIVE")
    out = _run([str(installed["bin"] / "pagedlab"), "labs", "copy", "labs"], cwd=work, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert sorted(p.name for p in (work / "labs").glob("*.ipynb")) == sorted(
        p.name for p in (ROOT / "labs").glob("*.ipynb")
    )
    script = textwrap.dedent("""
        import sys, nbformat
        from nbclient import NotebookClient
        nb = nbformat.read("labs/00_welcome.ipynb", as_version=4)
        NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": "labs"}}).execute()
        text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
        print(text)
    """)
    run = _run([str(installed["py"]), "-c", script], cwd=work, env=env, timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "pagedlab 0.1.0" in run.stdout and "[q00]" in run.stdout


def test_generate_serves_the_packaged_prompts(installed: dict[str, Path]) -> None:
    if not model_path().exists():
        pytest.skip("model not fetched; run `pagedlab fetch-model`")
    env = _env(installed, OMP_WAIT_POLICY="PASSIVE")
    out = _run(
        [str(installed["bin"] / "pagedlab"), "generate", "--limit", "2", "--max-tokens", "4"],
        cwd=installed["work"],
        env=env,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "[q00] What is the capital of France?" in out.stdout
    assert "requests            2" in out.stdout


def test_installed_wheel_without_the_model_says_fetch_model(installed: dict[str, Path], tmp_path: Path) -> None:
    env = _env(installed, **{ENV_CACHE_DIR: str(tmp_path / "empty-cache")})
    out = _run([str(installed["bin"] / "pagedlab"), "generate", "--limit", "1"], cwd=installed["work"], env=env)
    assert out.returncode != 0
    assert "model file not found" in out.stderr and "pagedlab fetch-model" in out.stderr
    assert "Traceback" not in out.stderr


def test_installed_wheel_with_an_unwritable_cache_names_the_variable(installed: dict[str, Path]) -> None:
    """``fetch-model`` into a cache it cannot create: a clear message that names $PAGEDLAB_CACHE_DIR.

    A folder under /proc cannot be created even by root (chmod would not stop root, and CI runs as root).
    """
    cache = Path(f"/proc/pagedlab-cache-{os.getpid()}")
    env = _env(installed, **{ENV_CACHE_DIR: str(cache), "PIP_NO_INDEX": "1", "PIP_CONFIG_FILE": os.devnull})
    out = _run([str(installed["bin"] / "pagedlab"), "fetch-model"], cwd=installed["work"], env=env)
    assert out.returncode != 0
    assert str(cache) in out.stderr and f"set {ENV_CACHE_DIR} to a writable directory" in out.stderr
    assert "Traceback" not in out.stderr


def test_labs_copy_from_the_wheel_keeps_an_edited_lab(installed: dict[str, Path]) -> None:
    work = installed["work"] / "keep"
    env = _env(installed)
    assert (
        _run([str(installed["bin"] / "pagedlab"), "labs", "copy", str(work)], cwd=installed["work"], env=env).returncode
        == 0
    )
    nb = json.loads((work / "02_block_pool.ipynb").read_text())
    nb["cells"][0]["source"] = ["# my notes\n"]
    edited = json.dumps(nb)
    (work / "02_block_pool.ipynb").write_text(edited)
    again = _run([str(installed["bin"] / "pagedlab"), "labs", "copy", str(work)], cwd=installed["work"], env=env)
    assert again.returncode == 1
    assert "02_block_pool.ipynb" in again.stdout and "kept" in again.stdout
    assert (work / "02_block_pool.ipynb").read_text() == edited


def _fake_dist(folder: Path, name: str, version: str) -> None:
    """Metadata of ``name`` ``version`` in ``folder``: what ``importlib.metadata`` sees after pip installed it."""
    info = folder / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def _doctor(installed: dict[str, Path], dists: Path) -> tuple[dict[str, dict[str, str]], str]:
    env = _env(installed, PYTHONPATH=str(dists))  # the fake dist-infos are found first; the code stays the real one
    js = _run([str(installed["bin"] / "pagedlab"), "doctor", "--quick", "--json"], cwd=installed["work"], env=env)
    text = _run([str(installed["bin"] / "pagedlab"), "doctor", "--quick"], cwd=installed["work"], env=env)
    assert text.returncode == 0, text.stdout + text.stderr
    return {c["name"]: c for c in json.loads(js.stdout)}, text.stdout


def test_doctor_after_a_pip_install_accepts_the_versions_pip_resolved(
    installed: dict[str, Path], tmp_path: Path
) -> None:
    """A plain ``pip install`` resolves pagedlab's ranges (pyproject.toml), not requirements.lock: newer
    transformers and accelerate than the tested pins are installed and work. The doctor says so (no
    warning, no "reinstall pagedlab", which would change nothing), and warns, with the pip command that
    helps, only for a version outside the range."""
    newer = tmp_path / "newer"
    _fake_dist(newer, "transformers", "5.99.0")
    _fake_dist(newer, "accelerate", "1.99.0")
    checks, text = _doctor(installed, newer)
    for dist, v in (("transformers", "5.99.0"), ("accelerate", "1.99.0")):
        assert checks[dist]["status"] == "ok", checks[dist]
        assert (
            checks[dist]["detail"].startswith(f"{v} (pagedlab needs {dist}>=")
            and "tested with" in checks[dist]["detail"]
        )
    assert not any("reinstall pagedlab" in c["fix"] for c in checks.values()), checks
    assert "transformers" not in text.split("\n\n")[-1] and "unavailable" not in text.split("\n\n")[-1]

    older = tmp_path / "older"
    _fake_dist(older, "transformers", "4.30.0")  # below pagedlab's transformers>=4.56
    checks, text = _doctor(installed, older)
    c = checks["transformers"]
    assert c["status"] == "warn" and c["fix"] == "pip install 'transformers>=4.56'", c
    assert "4.30.0: pagedlab needs transformers>=4.56" in c["detail"]
    verdict = text.rstrip().splitlines()[-1]  # (the scratch venv has no labextension files: "widgets" may warn)
    assert verdict.startswith("ready; ") and "transformers" in verdict and "accelerate" not in verdict, text
