"""Reading the texts a notebook's code hands to the kit, for the i18n coverage tests (figures, quiz widgets)."""

from __future__ import annotations

import ast


def template(node: ast.AST) -> str | None:
    """A string literal as it is, an f-string as a catalog template (``{a}``, ``{b}``, ... for its formatted
    values, in order), anything else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        names = iter("abcdefgh")
        return "".join(str(v.value) if isinstance(v, ast.Constant) else "{" + next(names) + "}" for v in node.values)
    return None
