"""What Triton's interpreter hides in a tile-load helper, read from the helper's source.

On CPU the lab 08 Triton tests run in the interpreter, where a block-table load past the table's end
reads whatever memory follows (no fault), a masked ``tl.load`` without ``other`` happens to give 0,
and no test cache is large enough for ``block_id * stride_block`` to overflow int32. On a GPU the
first is an illegal memory access, the second undefined values, the third a wrong address once the
cache holds more than 2**31 elements (a few GiB: any real KV cache). No value a CPU test can
observe tells them apart, so these checks read the helper's code instead (``JITFunction.src``):

* every ``tl.load`` whose pointer involves the block-table argument has a ``mask``;
* every masked ``tl.load`` whose pointer involves the cache argument has an ``other``;
* every product with ``stride_block`` has a factor converted to ``tl.int64`` first (``.to(tl.int64)``
  or ``tl.cast``, directly or through a name bound to it);
* no mask (a ``tl.load``'s ``mask=``, or the mask returned) is converted to another type: a mask is the
  comparison's bool (``int1``) block. The interpreter takes any nonzero lane as True; Triton 3.7's
  ``tl.store`` refuses another type outright ("Mask must have boolean scalar type") and its ``tl.load``
  hands the mask to the compiler's masked load, which is built for ``i1`` masks.

The arguments are found by position (the cache pointer first, the block-table pointer second,
``stride_block`` sixth), so a helper that renamed them is read the same way.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from typing import Any

__all__ = ["CHECKS", "raises_not_implemented", "source_findings"]

#: (what the check is called in a test, the hint when it fails)
CHECKS: dict[str, str] = {
    "the block-table load is masked": (
        "load the block ids with mask= (and other=0): a lane past seq_len would otherwise read past the end of "
        "the block table - an illegal memory access on a GPU, which the interpreter does not notice"
    ),
    "every masked cache load gives other=0.0": (
        "a masked tl.load of the cache needs other=0.0: without it a masked lane's value is undefined on a GPU "
        "(the interpreter happens to return 0, so the CPU tests cannot see it)"
    ),
    "block ids are widened to int64 before the address arithmetic": (
        "convert the block ids with .to(tl.int64) before multiplying by stride_block: in int32, "
        "block_id * stride_block overflows once the cache holds more than 2**31 elements (a few GiB, any real "
        "GPU cache) and the lane reads the wrong address"
    ),
    "every mask is a bool (int1) block": (
        "keep the mask as the comparison's bool (mask = pos < seq_len): a mask converted to an integer type "
        "(.to(tl.int32)) passes the interpreter, which takes any nonzero lane as True, but Triton's compiler "
        "expects an int1 mask (tl.store refuses any other: 'Mask must have boolean scalar type'), and the "
        "returned mask is documented as bool"
    ),
}


def _source(load_tile: Any) -> str | None:
    src = getattr(load_tile, "src", None)
    if isinstance(src, str):
        return src
    try:
        return inspect.getsource(getattr(load_tile, "fn", load_tile))
    except (OSError, TypeError):
        return None


def _is_tl_load(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "load"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "tl"
    )


def _arg(call: ast.Call, index: int, name: str) -> ast.AST | None:
    """``tl.load``'s argument ``name`` (positional ``index``), or None when it is not given."""
    if len(call.args) > index:
        return call.args[index]
    return next((k.value for k in call.keywords if k.arg == name), None)


def _uses(node: ast.AST | None, names: set[str]) -> bool:
    return node is not None and any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(node))


def _aliases(fn: ast.FunctionDef, name: str) -> set[str]:
    """``name`` and every local bound from an expression that uses it (``table = block_table_ptr + ...``)."""
    names = {name}
    for _ in range(4):  # a few rounds reach chains of assignments
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign) and _uses(node.value, names):
                names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def _is_widening(node: ast.AST, widened: set[str]) -> bool:
    """``x.to(tl.int64)``, ``tl.cast(x, tl.int64)``, or a name bound to one of them."""
    if isinstance(node, ast.Name):
        return node.id in widened
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("to", "cast"):
        return any(
            isinstance(a, ast.Attribute) and a.attr == "int64" for a in [*node.args, *(k.value for k in node.keywords)]
        )
    return False


def _ids_widened(fn: ast.FunctionDef, stride_block: str) -> bool:
    """Every product with ``stride_block`` has a widened factor (when there is none, any ``tl.int64`` will do)."""
    widened: set[str] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and _is_widening(node.value, widened):
            widened |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    products = [
        n
        for n in ast.walk(fn)
        if isinstance(n, ast.BinOp)
        and isinstance(n.op, ast.Mult)
        and any(isinstance(side, ast.Name) and side.id == stride_block for side in (n.left, n.right))
    ]
    if not products:
        return any(isinstance(n, ast.Attribute) and n.attr == "int64" for n in ast.walk(fn))
    return all(_is_widening(n.left, widened) or _is_widening(n.right, widened) for n in products)


def _is_conversion(node: ast.AST, converted: set[str]) -> bool:
    """``x.to(T)`` / ``tl.cast(x, T)`` with ``T`` other than ``tl.int1``, a name bound to one, or a
    subscript of either (``mask[:, None]``)."""
    if isinstance(node, ast.Subscript):
        return _is_conversion(node.value, converted)
    if isinstance(node, ast.Name):
        return node.id in converted
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("to", "cast"):
        types = [a for a in [*node.args, *(k.value for k in node.keywords)] if isinstance(a, ast.Attribute)]
        return any(t.attr != "int1" for t in types)
    return False


def _masks_are_bool(fn: ast.FunctionDef, loads: list[ast.Call]) -> bool:
    """No load's ``mask=`` and no returned mask (the return tuple's second element) is a conversion."""
    converted: set[str] = set()
    for _ in range(3):
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign) and _is_conversion(node.value, converted):
                converted |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    masks = [m for c in loads if (m := _arg(c, 1, "mask")) is not None]
    masks += [
        n.value.elts[1]
        for n in ast.walk(fn)
        if isinstance(n, ast.Return) and isinstance(n.value, ast.Tuple) and len(n.value.elts) == 2
    ]
    return not any(_is_conversion(m, converted) for m in masks)


def raises_not_implemented(load_tile: Any) -> bool:
    """Whether the helper's code still raises ``NotImplementedError`` (the lab's stub)."""
    src = _source(load_tile) or ""
    try:
        tree = ast.parse(textwrap.dedent(src))
    except SyntaxError:
        return False
    return any(isinstance(n, ast.Raise) and "NotImplementedError" in ast.unparse(n) for n in ast.walk(tree))


def source_findings(load_tile: Any) -> dict[str, bool | str]:
    """For each check of :data:`CHECKS`: True when the helper's source passes it, False when it does not,
    or a string saying why the source could not be read."""
    src = _source(load_tile)
    try:
        tree = ast.parse(textwrap.dedent(src)) if src else None
    except SyntaxError:
        tree = None
    fn = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)), None) if tree else None
    if fn is None or len(fn.args.args) < 6:
        why = "the helper's source could not be read (define it in a cell with @triton.jit)"
        return dict.fromkeys(CHECKS, why)
    cache, table = (_aliases(fn, a.arg) for a in fn.args.args[:2])
    loads = [n for n in ast.walk(fn) if isinstance(n, ast.Call) and _is_tl_load(n)]
    cache_loads = [c for c in loads if _uses(_arg(c, 0, "pointer"), cache)]
    table_loads = [c for c in loads if _uses(_arg(c, 0, "pointer"), table) and c not in cache_loads]
    widened = _ids_widened(fn, fn.args.args[5].arg)
    names = list(CHECKS)
    return {
        names[0]: all(_arg(c, 1, "mask") is not None for c in table_loads),
        names[1]: all(_arg(c, 2, "other") is not None for c in cache_loads if _arg(c, 1, "mask") is not None),
        names[2]: widened,
        names[3]: _masks_are_bool(fn, loads),
    }
