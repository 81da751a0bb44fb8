"""The set-up files agree with each other: pyproject pins, requirements.lock, environment.yml,
doctor's expectations, the Makefile targets, .ci/run and the README's two commands."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from pagedlab.doctor import PINNED

ROOT = Path(__file__).resolve().parents[1]


def lock() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, version = line.split("==")
            pins[canonicalize_name(name)] = version
    return pins


def exact_pins(reqs) -> dict[str, str]:
    out = {}
    for r in reqs:
        req = Requirement(r)
        specs = list(req.specifier)
        if len(specs) == 1 and specs[0].operator == "==":
            out[canonicalize_name(req.name)] = specs[0].version
    return out


def test_pyproject_pins_match_the_lock():
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    for extra in ("lab", "test", "triton"):
        reqs += project["optional-dependencies"][extra]
    locked = lock()
    for name, version in exact_pins(reqs).items():
        assert locked.get(name) == version, f"{name}: pyproject {version}, lock {locked.get(name)}"
    assert locked["torch"] == "2.13.0" and locked["triton"] == "3.7.1"


def test_lock_has_no_local_versions_or_the_kit_itself():
    versions = lock().values()
    assert not [v for v in versions if "+" in v]
    assert "pagedlab" not in lock()


def test_environment_yml_pins_match_the_lock():
    yaml = pytest.importorskip("yaml")
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert "python=3.11" in env["dependencies"]
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    reqs = [p for p in pip if not p.startswith("-")]
    locked = lock()
    pins = exact_pins(reqs)
    assert {"torch", "triton", "jupyterlab", "ipywidgets", "nbval", "transformers"} <= set(pins)
    for name, version in pins.items():
        assert locked.get(name) == version, f"{name}: environment.yml {version}, lock {locked.get(name)}"
    assert "-e ." in pip


def test_doctor_expects_the_locked_versions():
    locked = lock()
    for name, version in PINNED.items():
        assert locked.get(canonicalize_name(name)) == version, name


def test_makefile_has_the_targets():
    text = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z][\w-]*):", text, flags=re.M))
    assert {"lab", "demo", "test", "bench", "model", "setup", "clean"} <= targets


def test_ci_script_is_strict_and_runs_make_test():
    path = ROOT / ".ci" / "run"
    text = path.read_text()
    assert os.access(path, os.X_OK)
    assert "set -euo pipefail" in text and "\nmake test\n" in text
    assert "playwright install" not in text.replace("Never `playwright install`", "")


def test_readme_puts_the_two_commands_first():
    text = (ROOT / "README.md").read_text()
    quick = text.index("## Quick start")
    assert text.index("make lab", quick) < text.index("## ", quick + 5)
    assert text.index("make test", quick) < text.index("## ", quick + 5)
