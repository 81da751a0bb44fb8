"""Every process the kit starts for real vLLM gets its environment from ``pagedlab.vllm_env.vllm_env``.

The settings themselves (OpenMP passive waiting, no thread binding, a thread count) are checked on
the function and against the installed vLLM 0.32.0 (which reads them); the launch sites by reading
the code: any ``subprocess`` call whose command comes from ``vllm_python()`` must pass ``env=`` built
by ``vllm_env``.
"""

from __future__ import annotations

import ast
import logging
import os
import subprocess
from pathlib import Path

import pytest

from pagedlab.vllm_env import VLLM_CPU_SETTINGS, describe, vllm_env

ROOT = Path(__file__).resolve().parents[1]
#: Where the kit's code starts processes: the package, its benchmarks, tests and the analysis scripts.
SCANNED = ("pagedlab", "benchmarks", "tests", "analysis")
LAUNCHERS = {"run", "Popen", "call", "check_call", "check_output"}


def test_vllm_env_adds_the_shared_machine_settings_and_keeps_what_the_caller_set() -> None:
    env = vllm_env({"PATH": "/bin"})
    assert env["PATH"] == "/bin"
    assert env["OMP_WAIT_POLICY"] == "PASSIVE" and env["VLLM_CPU_OMP_THREADS_BIND"] == "nobind"
    assert env["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    assert env["OMP_NUM_THREADS"] == str(len(os.sched_getaffinity(0)))
    assert set(env) == {"PATH", "OMP_NUM_THREADS", *VLLM_CPU_SETTINGS}
    mine = vllm_env({"OMP_WAIT_POLICY": "ACTIVE", "OMP_NUM_THREADS": "7"}, VLLM_CPU_OMP_THREADS_BIND="0-1")
    assert (mine["OMP_WAIT_POLICY"], mine["OMP_NUM_THREADS"], mine["VLLM_CPU_OMP_THREADS_BIND"]) == (
        "ACTIVE",
        "7",
        "0-1",
    )
    assert vllm_env()["HOME"] == os.environ["HOME"]  # default base: this process's environment


def test_vllm_env_says_what_the_process_gets(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="pagedlab.vllm_env"):
        env = vllm_env({}, OMP_NUM_THREADS="3")
    assert caplog.messages == [describe(env)]
    assert describe(env).startswith(
        "vLLM runs with OMP_WAIT_POLICY=PASSIVE, VLLM_CPU_OMP_THREADS_BIND=nobind, OMP_NUM_THREADS=3, "
        "VLLM_ENABLE_V1_MULTIPROCESSING=0"
    )
    assert "OMP_WAIT_POLICY=(unset)" in describe({})


def test_vllm_env_refuses_a_value_that_is_not_a_string() -> None:
    with pytest.raises(ValueError, match="OMP_NUM_THREADS must be a string, got 2"):
        vllm_env({}, OMP_NUM_THREADS=2)  # type: ignore[arg-type]


def test_installed_vllm_reads_the_settings_as_the_kit_means_them() -> None:
    """vLLM 0.32.0 itself: ``nobind`` skips its thread binding (so OMP_NUM_THREADS stands), in-process core."""
    from pagedlab.vllm_version import VLLM_VERSION, vllm_python

    py = vllm_python()
    if not py.exists():
        if os.environ.get("CI"):
            pytest.fail(f"no vLLM interpreter at {py} (CI runs `make vllm`)")
        pytest.skip(f"no vLLM interpreter at {py} (make vllm)")
    probe = (
        "import inspect, json, vllm, vllm.envs as e\n"
        "from vllm.utils.ompmultiprocessing import OMPProcessManager as M\n"
        "src = inspect.getsource(M._parse_omp_threads_bind_env) + inspect.getsource(M.configure_omp_envs)\n"
        "print(json.dumps([vllm.__version__, e.VLLM_CPU_OMP_THREADS_BIND, e.VLLM_ENABLE_V1_MULTIPROCESSING,\n"
        "                  'self.skip_setup = vllm_mask == \"nobind\"' in src, 'or self.skip_setup:' in src]))\n"
    )
    done = subprocess.run([str(py), "-I", "-c", probe], capture_output=True, text=True, timeout=300, env=vllm_env())
    assert done.returncode == 0, done.stderr[-2000:]
    version, bind, multiprocessing, parsed, skipped = __import__("json").loads(done.stdout.strip().splitlines()[-1])
    assert (version, bind, multiprocessing, parsed, skipped) == (VLLM_VERSION, "nobind", False, True, True)


# --- every launch site -------------------------------------------------------------------------------


def _calls(node: ast.AST, name: str) -> bool:
    """``node`` contains a call of a function named ``name`` (``f(...)`` or ``mod.f(...)``)."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            f = sub.func
            if (isinstance(f, ast.Name) and f.id == name) or (isinstance(f, ast.Attribute) and f.attr == name):
                return True
    return False


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _assignments(tree: ast.AST) -> list[tuple[ast.AST, ast.AST]]:
    """``(target, value)`` of every assignment, ``for`` loop and ``xs.append(v)`` / ``xs.extend(v)`` in ``tree``."""
    pairs: list[tuple[ast.AST, ast.AST]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            pairs += [(t, node.value) for t in node.targets]
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and node.value is not None:
            pairs.append((node.target, node.value))
        elif isinstance(node, ast.For):
            pairs.append((node.target, node.iter))
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            f = node.value.func
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.attr in {"append", "extend"}:
                pairs += [(f.value, a) for a in node.value.args]
    return pairs


def _tainted(pairs: list[tuple[ast.AST, ast.AST]]) -> set[str]:
    """Names assigned from ``vllm_python()``, or from names that were, to a fixed point (any scope)."""
    tainted: set[str] = set()
    while True:
        new = {
            n
            for target, value in pairs
            if _calls(value, "vllm_python") or _names(value) & tainted
            for n in _names(target) - tainted
        }
        if not new:
            return tainted
        tainted |= new


def _subprocess_calls(tree: ast.AST) -> list[ast.Call]:
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "subprocess"
        and node.func.attr in LAUNCHERS
        and node.args
    ]


def vllm_launches(source: str) -> list[tuple[int, bool]]:
    """``(line, uses vllm_env)`` for each ``subprocess`` call in ``source`` whose command comes from
    ``vllm_python()``: directly, or through names assigned (or looped over) from it, in any scope."""
    tree = ast.parse(source)
    pairs = _assignments(tree)
    tainted = _tainted(pairs)
    from_env = {n for target, value in pairs if _calls(value, "vllm_env") for n in _names(target)}
    found = []
    for node in _subprocess_calls(tree):
        if not (_calls(node.args[0], "vllm_python") or _names(node.args[0]) & tainted):
            continue
        env = next((k.value for k in node.keywords if k.arg == "env"), None)
        ok = env is not None and (_calls(env, "vllm_env") or (isinstance(env, ast.Name) and env.id in from_env))
        found.append((node.lineno, ok))
    return sorted(found)


def _scanned_files() -> list[Path]:
    return sorted(p for top in SCANNED if (ROOT / top).is_dir() for p in (ROOT / top).rglob("*.py"))


def test_every_process_started_for_vllm_gets_vllm_env() -> None:
    sites: dict[str, list[tuple[int, bool]]] = {}
    for path in _scanned_files():
        text = path.read_text(encoding="utf-8")
        if "vllm_python" in text and (found := vllm_launches(text)):
            sites[str(path.relative_to(ROOT))] = found
    bad = [f"{f}:{line}" for f, found in sites.items() for line, ok in found if not ok]
    assert not bad, f"these start vLLM's interpreter without env=vllm_env(...) (pagedlab.vllm_env): {bad}"
    # the scan sees the launchers it must: the twin, the labs' script runner, the benchmark and the tests
    for must in ("pagedlab/twin/__init__.py", "pagedlab/twin/labs.py", "benchmarks/bench_vllm.py"):
        assert must in sites, f"{must}: its vLLM launch was not found by the scan"
    assert sum(len(v) for v in sites.values()) >= 14


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import subprocess\nsubprocess.run([str(vllm_python()), '-c', 'x'])", [(2, False)]),
        ("import subprocess\nsubprocess.run([str(vllm_python()), '-c', 'x'], env=vllm_env())", [(2, True)]),
        ("import subprocess\npy = vllm_python()\ncmd = [str(py)]\nsubprocess.Popen(cmd, env=os.environ)", [(4, False)]),
        (
            "import subprocess\npy = vllm_python()\ne = vllm_env(OMP_NUM_THREADS='1')\nsubprocess.run([py], env=e)",
            [(4, True)],
        ),
        (
            "import subprocess\nxs = []\nxs.append(str(vllm_python()))\nfor x in xs:\n    subprocess.run([x])",
            [(5, False)],
        ),
        ("import subprocess, sys\nsubprocess.run([sys.executable, '-c', 'x'])", []),
    ],
)
def test_the_scan_finds_launches_with_and_without_the_environment(
    source: str, expected: list[tuple[int, bool]]
) -> None:
    assert vllm_launches(source) == expected
