"""Build the kit's wheel once per test session, from a clean copy of this checkout (shared by the wheel and
documented-install tests, so the suite builds it once)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: What the wheel is built from (pyproject.toml's packages and package-dir, plus README and LICENSE).
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "pagedlab", "kernels", "data", "labs")


def copy_sources(dest: Path) -> Path:
    """A clean copy of what the wheel is built from (pip builds in-tree, and a stale build/ would leak in)."""
    dest.mkdir(parents=True)
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(ROOT / name, dest / name)
    return dest


def build_wheel(tmp: Path) -> Path:
    """``pip wheel`` of a clean copy of the sources into ``tmp/dist``; returns the wheel's path."""
    src = copy_sources(tmp / "src")
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp / "dist"),
            str(src),
        ],
        cwd=tmp,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    return next((tmp / "dist").glob("pagedlab-*.whl"))
