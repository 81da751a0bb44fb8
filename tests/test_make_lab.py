"""``make lab`` as a learner runs it: JupyterLab on labs/, without nbgrader's instructor extensions.

``make setup`` installs the ``[test]`` extra, which brings nbgrader; ``make lab`` puts ``lab-config/`` on
``JUPYTER_CONFIG_PATH`` so nbgrader's server extensions stay unloaded and its JupyterLab extension is disabled
(``lab-config/README.md``). The test starts the real target (set-up already done by ``make test``) and asks the
running server.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "pagedlab-make-lab-test"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, ""


@contextlib.contextmanager
def make_lab(tmp_path: Path, *make_vars: str) -> Iterator[tuple[str, Path]]:
    """``make lab`` with a free port and a known token; yields ``(base URL, log path)``; stops its process group."""
    if not (ROOT / ".venv" / "bin" / "jupyter").exists():
        pytest.skip("no .venv with jupyter: `make setup` first (make test does it)")
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTER")}
    env.update(
        CI="1",  # --no-browser
        JUPYTER_CONFIG_DIR=str(tmp_path / "config"),
        JUPYTER_DATA_DIR=str(tmp_path / "data"),
        JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"),
        JUPYTERLAB_SETTINGS_DIR=str(tmp_path / "settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "workspaces"),
    )
    args = [f"PORT={port}", f"LAB_ARGS=--IdentityProvider.token={TOKEN} --ip=127.0.0.1 --ServerApp.port_retries=0"]
    log_path = tmp_path / "make_lab.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            ["make", "--no-print-directory", "lab", *args, *make_vars],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 120
            while _status(base) != 200:
                assert proc.poll() is None, f"make lab exited with {proc.returncode}: {log_path.read_text()[-2000:]}"
                assert time.monotonic() < deadline, f"make lab did not answer in 120 s: {log_path.read_text()[-2000:]}"
                time.sleep(0.5)
            yield base, log_path
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)


def _status(base: str) -> int:
    try:
        return _get(f"{base}/api/status?token={TOKEN}")[0]
    except OSError:
        return 0


def _page_config(base: str) -> dict[str, object]:
    status, html = _get(f"{base}/lab?token={TOKEN}")
    assert status == 200, status
    found = re.search(r'<script id="jupyter-config-data" type="application/json">(.*?)</script>', html, re.S)
    assert found, "no page config in /lab"
    return json.loads(found.group(1))


def test_make_lab_serves_the_labs_without_nbgrader(tmp_path: Path) -> None:
    with make_lab(tmp_path) as (base, log_path):
        status, listing = _get(f"{base}/api/contents?token={TOKEN}")
        assert status == 200
        names = {e["name"] for e in json.loads(listing)["content"]}
        assert {p.name for p in (ROOT / "labs").glob("*.ipynb")} <= names and "bugs.md" in names, names
        assert _get(f"{base}/formgrader?token={TOKEN}")[0] == 404  # nbgrader's server extension not loaded
        assert "@jupyter/nbgrader" in _page_config(base).get("disabledExtensions", []), _page_config(base)
        time.sleep(1)
    assert "nbgrader" not in log_path.read_text(), log_path.read_text()[-3000:]


def test_lab_config_empty_leaves_nbgrader_on_for_an_instructor(tmp_path: Path) -> None:
    """The switch works both ways (and the first test is not passing because nbgrader is missing)."""
    pytest.importorskip("nbgrader", reason="nbgrader is not installed (the [test] extra brings it)")
    with make_lab(tmp_path, "LAB_CONFIG=") as (base, _log):
        assert _get(f"{base}/formgrader?token={TOKEN}")[0] != 404
        assert "@jupyter/nbgrader" not in _page_config(base).get("disabledExtensions", [])
