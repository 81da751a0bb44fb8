"""The layers point one way (docs/architecture.md): a module never imports a higher layer, and no
two modules import each other, directly or round a loop.

Every ``import`` / ``from ... import`` statement of every module in ``pagedlab/`` and ``kernels/``
(``pagedlab.kernels``) is read with ``ast`` - also the ones inside functions and under
``TYPE_CHECKING``, and string imports (``importlib.import_module("pagedlab....")`` /
``__import__`` with a literal) - and its target's layer compared with the importer's.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Layer of each top-level module or subpackage of ``pagedlab``, lowest first. A module may import
#: its own layer and any lower one.
LAYERS: dict[str, int] = {
    "errors": 0,
    "exceptions": 0,
    "config": 0,
    "sampling_params": 0,
    "outputs": 0,
    "request": 0,
    "trace": 0,
    "inputs": 0,  # prompt types (TextPrompt, TokensPrompt), next to sampling_params
    "data": 0,  # paths of the bundled data files; imports only errors
    "paths": 0,  # the cache directory (model, built C kernels); standard library only
    "routes": 0,  # the repository URL (pyproject [project.urls]) and the Colab/Binder links made from it
    "vllm_version": 0,  # the one place naming the vLLM the kit follows (constants only)
    "vllm_env": 0,  # the environment of every process started for real vLLM (standard library only)
    "i18n": 0,  # the learner's language and the catalogs (standard library, Babel, matplotlib's fonts)
    "containment": 0,  # running untrusted code in its own process (rpc, Landlock/seccomp, guard, limits, reaper)
    "core": 1,
    "sched": 2,
    "kernels": 3,
    "model": 4,
    "parts": 4,  # the plug-in layer (slots, guards): imports core, sched, kernels; the engine imports it
    "engine": 5,
    "": 5,  # "" is the package root, ``pagedlab/__init__.py`` (the public API: LLM, ...)
    "sim": 6,
    "viz": 6,
    "analysis": 6,
    "twin": 6,  # the kit and real vLLM on one workload: uses the engine, like sim
    "demo": 7,
    "doctor": 7,
    "colab": 7,  # colab: notebook setup (model fetch), like doctor
    "grading": 8,  # the grader: check(), the batch grader, containment; knows no exercise
    "course": 9,  # the exercises, their solution cells, lab building: registers into grading's registry
    "cli": 10,
    "vllm_compat": 10,  # the ``vllm`` import shim sits with the CLI, above everything it re-exports
}
#: The only modules outside ``pagedlab.grading`` that may import it (besides the course, which registers into it).
GRADING_USERS = {"pagedlab.cli"}


def _modules() -> dict[str, Path]:
    mods: dict[str, Path] = {}
    for base, prefix in ((ROOT / "pagedlab", "pagedlab"), (ROOT / "kernels", "pagedlab.kernels")):
        for path in base.rglob("*.py"):
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            mods[".".join([prefix, *parts])] = path
    return mods


MODULES = _modules()


def _is_package(module: str) -> bool:
    return MODULES[module].name == "__init__.py"


def imported_modules(module: str, tree: ast.AST) -> set[str]:
    """The ``pagedlab`` modules ``module`` imports (relative imports resolved; ``from pagedlab import x``
    names the submodule ``x`` when there is one, else the package root)."""
    package = module if _is_package(module) else module.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _string_import(node) is not None:
            out.add(_string_import(node) or "")
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for a in node.names:
                sub = f"{base}.{a.name}"
                out.add(sub if sub in MODULES else base)
    return {m for m in out if m == "pagedlab" or m.startswith("pagedlab.")}


def _string_import(call: ast.Call) -> str | None:
    """The module a call ``importlib.import_module("x")`` / ``import_module("x")`` / ``__import__("x")``
    with a literal name imports, else None."""
    f = call.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    if name not in ("import_module", "__import__") or not call.args:
        return None
    arg = call.args[0]
    return arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else None


def import_graph(trees: dict[str, ast.AST]) -> dict[str, set[str]]:
    """Module -> the ``pagedlab`` modules it imports (the package root's edges included)."""
    return {m: imported_modules(m, t) - {m} for m, t in trees.items()}


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every module ``start`` imports, directly or through others."""
    seen: set[str] = set()
    todo = list(graph.get(start, ()))
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo.extend(graph.get(m, ()))
    return seen


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other round a loop (strongly connected components of
    more than one module), each sorted."""
    reach = {m: _reachable(graph, m) for m in graph}
    groups = {tuple(sorted({m} | {n for n in reach[m] if m in reach.get(n, set())})) for m in graph}
    return sorted(list(g) for g in groups if len(g) > 1)


def layer_of(module: str) -> tuple[str, int]:
    """``(top-level part, layer)`` of a ``pagedlab`` module."""
    top = module.split(".")[1] if "." in module else ""
    if top not in LAYERS:
        raise AssertionError(f"{module}: no layer assigned; add {top!r} to LAYERS in {__file__}")
    return top, LAYERS[top]


def layer_violations(module: str, tree: ast.AST) -> list[str]:
    """Messages for every import of ``module`` that points up, or into ``grading`` from outside it."""
    top, rank = layer_of(module)
    out = []
    for target in sorted(imported_modules(module, tree)):
        t_top, t_rank = layer_of(target)
        if t_top == "grading" and top not in ("grading", "course") and module not in GRADING_USERS:
            out.append(
                f"{module} imports {target}: only pagedlab.grading and the CLI may import the grader "
                "(and the course, which registers its exercises into it)"
            )
        elif t_rank > rank:
            out.append(
                f"{module} ({top or 'pagedlab'}, layer {rank}) imports {target} "
                f"({t_top or 'pagedlab'}, layer {t_rank}): lower layers never import higher ones"
            )
    return out


def test_every_module_has_a_layer_and_imports_only_downwards() -> None:
    assert len(MODULES) > 80 and "pagedlab.kernels.ops" in MODULES and "pagedlab.core.block_pool" in MODULES
    problems = []
    for module, path in sorted(MODULES.items()):
        problems += layer_violations(module, ast.parse(path.read_text(), str(path)))
    assert problems == [], "\n".join(problems)


def test_no_module_imports_itself_round_a_loop() -> None:
    trees = {m: ast.parse(p.read_text(), str(p)) for m, p in MODULES.items()}
    circles = import_circles(import_graph(trees))
    assert circles == [], "import circles:\n" + "\n".join(" <-> ".join(c) for c in circles)


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Top-level part of ``pagedlab`` (``core``, ``viz``, ... ``""`` for the package root) -> the other parts
    its modules import (function-level and string imports counted, as in :func:`imported_modules`)."""
    out: dict[str, set[str]] = {}
    for module, targets in graph.items():
        top = layer_of(module)[0]
        out.setdefault(top, set()).update(t for t in (layer_of(x)[0] for x in targets) if t != top)
    return out


def test_no_package_imports_itself_round_a_loop() -> None:
    """Packages of one layer may import each other sideways, but never both ways (``viz`` -> ``twin`` ->
    ``viz`` would be one package split in two)."""
    trees = {m: ast.parse(p.read_text(), str(p)) for m, p in MODULES.items()}
    graph = import_graph(trees)
    circles = import_circles(package_graph(graph))
    why = [
        f"{m} imports {t}"
        for m, ts in sorted(graph.items())
        for t in sorted(ts)
        if any({layer_of(m)[0], layer_of(t)[0]} <= set(c) and layer_of(m)[0] != layer_of(t)[0] for c in circles)
    ]
    assert circles == [], "package circles: " + "; ".join(" <-> ".join(c) for c in circles) + "\n" + "\n".join(why)


def test_the_package_circle_finder_sees_a_function_level_import() -> None:
    trees = {
        "pagedlab.viz.gantt": ast.parse("from pagedlab.twin.records import Trace"),
        "pagedlab.twin.labs": ast.parse("def show():\n    from pagedlab.viz.gantt import render_batch_gantt"),
        "pagedlab.twin.records": ast.parse("import json"),
        "pagedlab.analysis.lab02": ast.parse("from pagedlab.viz import render_block_pool"),
        "pagedlab.viz": ast.parse("def f():\n    from pagedlab.analysis.lab02 import tail_waste"),
        "pagedlab.sim.cost_model": ast.parse("from pagedlab.core.block_pool import BlockPool"),
    }
    graph = import_graph(trees)
    assert import_circles(graph) == [["pagedlab.analysis.lab02", "pagedlab.viz"]]  # modules: one circle
    assert import_circles(package_graph(graph)) == [["analysis", "twin", "viz"]]  # packages: twin joins it
    del trees["pagedlab.twin.labs"], trees["pagedlab.viz"]
    assert import_circles(package_graph(import_graph(trees))) == []


def test_the_circle_finder_sees_function_level_and_string_imports() -> None:
    trees = {
        "pagedlab.engine.arg_utils": ast.parse(
            'import importlib\nimportlib.import_module("pagedlab.engine.llm_engine")'
        ),
        "pagedlab.engine.llm_engine": ast.parse("from pagedlab.engine.arg_utils import EngineArgs"),
        "pagedlab.model.llama": ast.parse("def f():\n    from pagedlab.model.cpu_linear import unpack_linears"),
        "pagedlab.model.cpu_linear": ast.parse("from pagedlab.model.llama import LlamaForCausalLM"),
        "pagedlab.core.block_pool": ast.parse("from pagedlab.core import hashing"),
    }
    assert import_circles(import_graph(trees)) == [
        ["pagedlab.engine.arg_utils", "pagedlab.engine.llm_engine"],
        ["pagedlab.model.cpu_linear", "pagedlab.model.llama"],
    ]
    loop = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert import_circles(loop) == [["a", "b", "c"]]


@pytest.mark.parametrize(
    "module,source,message",
    [
        ("pagedlab.core.block_pool", "from pagedlab.sched.scheduler import Scheduler", "lower layers never"),
        ("pagedlab.core.block_pool", "def f():\n    import pagedlab.engine.llm_engine", "lower layers never"),
        ("pagedlab.request", "from pagedlab import LLM", "imports pagedlab (pagedlab, layer 5)"),
        (
            "pagedlab.analysis.lab01",
            "from pagedlab.grading.registry import get",
            "only pagedlab.grading and the CLI",
        ),
        ("pagedlab.grading.plug", "from pagedlab.course.exercises.lab07 import tree_state", "(grading, layer 8)"),
        ("pagedlab.viz.pool", "from ..grading import check", "imports pagedlab.grading: only"),
        ("pagedlab.kernels.ops", "from pagedlab.model import attention", "imports pagedlab.model.attention"),
        ("pagedlab.core", "from .. import engine", "imports pagedlab.engine"),
        (
            "pagedlab.core.block_pool",
            'import importlib\nimportlib.import_module("pagedlab.sched.scheduler")',
            "lower layers never",
        ),
        ("pagedlab.parts.slots", "from pagedlab.engine.llm_engine import LLMEngine", "(parts, layer 4)"),
    ],
)
def test_the_checker_catches_an_upward_import(module: str, source: str, message: str) -> None:
    problems = layer_violations(module, ast.parse(source))
    assert len(problems) == 1 and message in problems[0], problems


@pytest.mark.parametrize(
    "module,source",
    [
        ("pagedlab.engine.llm_engine", "from pagedlab.core.kv_cache_manager import KVCacheManager"),
        ("pagedlab.sched.scheduler", "from pagedlab.request import Request\nfrom . import policy"),
        ("pagedlab.cli", "from pagedlab.grading import grade"),
        ("pagedlab.grading.kit", "from pagedlab.analysis.kit import Seq"),
        ("pagedlab.model.attention", "import torch\nfrom pagedlab.kernels import ops"),
    ],
)
def test_the_checker_accepts_downward_and_sideways_imports(module: str, source: str) -> None:
    assert layer_violations(module, ast.parse(source)) == []


def test_the_grader_names_the_course_only_at_its_one_entry_point() -> None:
    """``pagedlab.grading`` imports nothing from ``pagedlab.course`` (the layer rule) and names it in one place
    only: ``registry.DEFAULT_COURSE``, the module the registry imports on first use (docs/architecture.md)."""
    from pagedlab.grading import registry

    assert registry.DEFAULT_COURSE == "pagedlab.course.exercises"
    named = [
        f"{m}:{n}"
        for m, p in sorted(MODULES.items())
        if m.startswith("pagedlab.grading")
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if "pagedlab.course" in line or "pagedlab/course" in line
    ]
    assert {x.split(":")[0] for x in named} == {"pagedlab.grading.registry"}, named


def test_the_containment_layer_imports_nothing_of_pagedlab_but_itself() -> None:
    """Generic: it knows no grader and no exercise (docs/architecture.md), and fits its budget."""
    mods = {m: p for m, p in MODULES.items() if m.startswith("pagedlab.containment")}
    assert {"pagedlab.containment.rpc", "pagedlab.containment.kernel", "pagedlab.containment.guard"} <= set(mods)
    outside = {
        f"{m} imports {t}"
        for m, p in mods.items()
        for t in imported_modules(m, ast.parse(p.read_text(), str(p)))
        if not t.startswith("pagedlab.containment")
    }
    assert outside == set(), sorted(outside)


def test_a_module_without_a_layer_is_reported() -> None:
    with pytest.raises(AssertionError, match="no layer assigned; add 'plugins'"):
        layer_of("pagedlab.plugins.x")


# --------------------------------------------------------------------------------- lazy imports
#: Imports inside functions still without a reason, per file: none. A new one fails the test: move it to the
#: module top (where the layers allow it) or give it a ``# lazy: <reason>`` comment.
LAZY_PENDING: dict[str, int] = {}


def unexplained_lazy_imports(source: str) -> list[int]:
    """Line numbers of the ``import`` statements inside functions of ``source`` with no ``# lazy:``
    comment on their first line or the line above (a ``TYPE_CHECKING`` block is not a function)."""
    lines = source.splitlines()
    tree = ast.parse(source)
    found: set[int] = set()
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            for node in ast.walk(fn):
                if isinstance(node, ast.Import | ast.ImportFrom):
                    found.add(node.lineno)
    return sorted(
        n for n in found if "# lazy:" not in lines[n - 1] and not (n > 1 and lines[n - 2].strip().startswith("# lazy:"))
    )


def test_an_import_inside_a_function_says_why_it_is_lazy() -> None:
    """Issue 34 item 4: an import inside a function buys an optional dependency or start-up time, and says
    which in a one-line ``# lazy: <reason>`` comment (same line or the line above); others go to the top."""
    got: dict[str, int] = {}
    where: list[str] = []
    for path in sorted(MODULES.values()):
        rel = path.relative_to(ROOT).as_posix()
        bad = unexplained_lazy_imports(path.read_text(encoding="utf-8"))
        if bad:
            got[rel] = len(bad)
            where += [f"{rel}:{n}" for n in bad]
    assert got == LAZY_PENDING, (
        "imports inside functions without a '# lazy: <reason>' comment differ from LAZY_PENDING "
        f"(move them to the module top, or say why they are lazy): {got} at {where[:40]}"
    )


def test_the_lazy_rule_sees_a_bare_import_and_accepts_a_reason() -> None:
    source = (
        "import os\n"
        "def f():\n"
        "    import json\n"
        "    import torch  # lazy: start-up time\n"
        "    # lazy: optional dependency\n"
        "    from vllm import LLM\n"
        "    def g():\n"
        "        from pagedlab import core\n"
        "class C:\n"
        "    def m(self):\n"
        "        import sys  # a comment, not a reason\n"
    )
    assert unexplained_lazy_imports(source) == [3, 8, 11]
