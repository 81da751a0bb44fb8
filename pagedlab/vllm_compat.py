"""Run a script written for vLLM on pagedlab, unchanged: ``pagedlab run-vllm SCRIPT [ARGS...]``.

The runner installs, in its own process only, a meta-path finder that makes ``import vllm`` and the
submodules vLLM scripts import resolve to the kit (table ``PROVIDED``), then runs the script as
``__main__``. No module named ``vllm`` is ever installed, and other processes are unaffected. The
names follow vLLM 0.32.0 (``pagedlab.vllm_version``), ``vllm.exceptions`` included: a refusal the kit raises
(``InvalidRequestError``) is that module's ``VLLMValidationError``. A vLLM module the kit does not provide fails to import
with a message naming it and listing what is provided; a model other than the bundled SmolLM2 fails
with a message naming the model the kit serves, unless ``--model-override`` maps it::

    pagedlab run-vllm --model-override meta-llama/Llama-3.2-1B-Instruct examples/generate.py
    python -m pagedlab.vllm_compat --model-override '*' script.py --max-tokens 16
"""

from __future__ import annotations

import argparse
import importlib
import importlib.abc
import importlib.machinery
import os
import runpy
import sys
import types
from collections.abc import Sequence
from typing import Any

from pagedlab.errors import ConfigError

#: vLLM module -> the pagedlab module whose public names it exposes.
PROVIDED: dict[str, str] = {
    "vllm.sampling_params": "pagedlab.sampling_params",
    "vllm.inputs": "pagedlab.inputs",
    "vllm.outputs": "pagedlab.outputs",
    "vllm.logprobs": "pagedlab.outputs",
    "vllm.engine.arg_utils": "pagedlab.engine.arg_utils",
    "vllm.engine.llm_engine": "pagedlab.engine.llm_engine",
    "vllm.v1.engine.llm_engine": "pagedlab.engine.llm_engine",
    "vllm.entrypoints.llm": "pagedlab.engine.llm",
    "vllm.v1.metrics.reader": "pagedlab.engine.metrics",
    # vLLM 0.32's exception classes; the kit's InvalidRequestError is its VLLMValidationError
    "vllm.exceptions": "pagedlab.exceptions",
}
#: Where ``FlexibleArgumentParser`` lives: vLLM 0.32 (``pagedlab.vllm_version``) has it only in
#: ``vllm.utils.argparse_utils``; ``vllm.utils`` had it up to vLLM 0.11 and keeps it here for older scripts.
ARGPARSE_MODULES = ("vllm.utils", "vllm.utils.argparse_utils")
#: vLLM packages provided only as parents of the modules above (plus ``vllm.utils``).
PACKAGES = ("vllm.engine", "vllm.entrypoints", "vllm.v1", "vllm.v1.engine", "vllm.v1.metrics")
#: What ``from vllm import X`` gives: name -> (pagedlab module, attribute).
TOP_LEVEL: dict[str, tuple[str, str]] = {
    "LLM": ("pagedlab.engine.llm", "LLM"),
    "LLMEngine": ("pagedlab.engine.llm_engine", "LLMEngine"),
    "EngineArgs": ("pagedlab.engine.arg_utils", "EngineArgs"),
    "SamplingParams": ("pagedlab.sampling_params", "SamplingParams"),
    "RequestOutput": ("pagedlab.outputs", "RequestOutput"),
    "CompletionOutput": ("pagedlab.outputs", "CompletionOutput"),
    "TextPrompt": ("pagedlab.inputs", "TextPrompt"),
    "TokensPrompt": ("pagedlab.inputs", "TokensPrompt"),
    "PromptType": ("pagedlab.inputs", "PromptType"),
}


def provided_modules() -> list[str]:
    """Every ``vllm`` module name the runner provides, sorted."""
    return sorted({"vllm", *ARGPARSE_MODULES, *PACKAGES, *PROVIDED})


class UnprovidedVLLMModuleError(ModuleNotFoundError):
    """A script imported a vLLM module pagedlab does not provide."""


def unprovided(fullname: str) -> UnprovidedVLLMModuleError:
    """The error for importing a vLLM module the kit does not provide (names it and what is provided)."""
    # No ``name=``: ``from vllm import X`` then reports this message instead of Python's generic
    # "cannot import name" (the import system swallows a ModuleNotFoundError named vllm.X).
    return UnprovidedVLLMModuleError(
        f"pagedlab's vLLM compatibility layer does not provide {fullname!r} (the script imports it). "
        f"Provided: {', '.join(provided_modules())}; top-level names: {', '.join(TOP_LEVEL)}"
    )


def _missing_attr(modname: str, names: Sequence[str]) -> Any:
    def __getattr__(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError(
            f"{modname}.{name} is not provided by pagedlab's vLLM compatibility layer; "
            f"{modname} provides: {', '.join(sorted(n for n in names if not n.startswith('_')))}"
        )

    return __getattr__


def build_module(fullname: str) -> types.ModuleType:
    """A fresh module named ``fullname`` exposing the kit's names (kit modules are not renamed).

    Raises:
        UnprovidedVLLMModuleError: ``fullname`` is not in ``provided_modules()``.
    """
    mod = types.ModuleType(fullname, f"pagedlab's stand-in for {fullname} (pagedlab.vllm_compat)")
    if fullname == "vllm":
        for name, (where, attr) in TOP_LEVEL.items():
            setattr(mod, name, getattr(importlib.import_module(where), attr))
        mod.__dict__["__version__"] = "pagedlab-compat"
        mod.__path__ = []
    elif fullname in ARGPARSE_MODULES:
        # lazy: start-up time (arg_utils imports torch; run-vllm parses its arguments without it)
        from pagedlab.engine.arg_utils import FlexibleArgumentParser

        mod.__dict__["FlexibleArgumentParser"] = FlexibleArgumentParser
        if fullname == "vllm.utils":
            mod.__path__ = []
    elif fullname in PACKAGES:
        mod.__path__ = []
    elif fullname in PROVIDED:
        src = importlib.import_module(PROVIDED[fullname])
        mod.__dict__.update({k: v for k, v in vars(src).items() if not k.startswith("__")})
    else:
        raise unprovided(fullname)
    mod.__dict__["__getattr__"] = _missing_attr(fullname, list(vars(mod)))
    return mod


class _Loader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return build_module(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        return None


class VLLMFinder(importlib.abc.MetaPathFinder):
    """Resolves ``vllm`` and ``vllm.*`` to pagedlab stand-ins (installed by ``install()``)."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != "vllm" and not fullname.startswith("vllm."):
            return None
        if fullname not in provided_modules():
            raise unprovided(fullname)
        is_pkg = fullname in ("vllm", "vllm.utils", *PACKAGES)
        return importlib.machinery.ModuleSpec(fullname, _Loader(), is_package=is_pkg)


def install(model_overrides: dict[str, str] | None = None) -> VLLMFinder:
    """Make ``import vllm`` resolve to the kit in this process; returns the finder (see ``uninstall``).

    Args:
        model_overrides: script model name -> model pagedlab loads (``"*"`` matches any name).
    """
    # lazy: start-up time (arg_utils imports torch; run-vllm parses its arguments without it)
    from pagedlab.engine import arg_utils

    arg_utils.MODEL_OVERRIDES.clear()
    arg_utils.MODEL_OVERRIDES.update(model_overrides or {})
    for name in [m for m in sys.modules if m == "vllm" or m.startswith("vllm.")]:
        del sys.modules[name]
    finder = VLLMFinder()
    sys.meta_path.insert(0, finder)
    return finder


def uninstall(finder: VLLMFinder) -> None:
    """Undo ``install``: remove the finder, the stand-in modules and the model overrides."""
    # lazy: start-up time (arg_utils imports torch; run-vllm parses its arguments without it)
    from pagedlab.engine import arg_utils

    if finder in sys.meta_path:
        sys.meta_path.remove(finder)
    for name in [m for m in sys.modules if m == "vllm" or m.startswith("vllm.")]:
        del sys.modules[name]
    arg_utils.MODEL_OVERRIDES.clear()


def parse_overrides(items: Sequence[str]) -> dict[str, str]:
    """``["SRC", "SRC=DST", "*"]`` -> ``{SRC: DST}``; a bare ``SRC`` maps to the bundled model.

    Raises:
        ConfigError: an empty name.
    """
    # lazy: start-up time (arg_utils imports torch; run-vllm parses its arguments without it)
    from pagedlab.engine.arg_utils import BUNDLED_MODEL

    out: dict[str, str] = {}
    for item in items:
        src, _, dst = item.partition("=")
        if not src.strip():
            raise ConfigError(f"--model-override {item!r}: expected NAME or NAME=MODEL")
        out[src.strip()] = dst.strip() or BUNDLED_MODEL
    return out


def run_script(script: str, args: Sequence[str], model_overrides: dict[str, str] | None = None) -> int:
    """Run ``script`` as ``__main__`` with ``sys.argv = [script, *args]`` and vLLM resolved to the kit.

    Returns:
        The script's exit status (0 when it ends normally, ``SystemExit``'s code otherwise).
    Raises:
        FileNotFoundError: no such script. Anything the script raises propagates.
    """
    if not os.path.isfile(script):
        raise FileNotFoundError(f"no such script: {script}")
    finder = install(model_overrides)
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [script, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
        uninstall(finder)
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``pagedlab run-vllm`` options."""
    parser.add_argument(
        "--model-override",
        action="append",
        default=[],
        metavar="NAME[=MODEL]",
        help="serve the script's model NAME with MODEL (default: the bundled "
        "HuggingFaceTB/SmolLM2-135M-Instruct); '*' matches any name; repeatable",
    )
    parser.add_argument("script", help="a Python script written for vLLM")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the script's own arguments")


def main(args: argparse.Namespace) -> int:
    """``pagedlab run-vllm``: run the script and return its exit status; a missing vLLM module (1) or
    script (2) is reported in one line, as are pagedlab's own errors (1, by ``pagedlab.cli``)."""
    try:
        return run_script(args.script, args.args, parse_overrides(args.model_override))
    except UnprovidedVLLMModuleError as e:
        print(f"pagedlab run-vllm: {e}", file=sys.stderr)
        return 1
    except FileNotFoundError as e:
        if not os.path.isfile(args.script):
            print(f"pagedlab run-vllm: {e}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    from pagedlab.cli import main as cli_main

    sys.exit(cli_main(["run-vllm", *sys.argv[1:]]))
