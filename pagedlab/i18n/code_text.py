"""What a translation of a notebook's code cell may change: its comments, the text it prints and its docstrings,
nothing else.

A translated code cell (an entry of ``solutions/<lang>/<notebook>.po``, :mod:`pagedlab.i18n.notebooks`) must be
the English cell up to:

* **comments**, except the ones code reads (exercise markers ``### BEGIN SOLUTION`` ..., ``# EXERCISE <id>``,
  ``# noqa``, ``# type:``): those stay exactly as written;
* **printed text**: string literals and f-strings that are arguments of ``print()`` (directly, joined with ``+``,
  as a branch of ``a if c else b``, or the items of a ``"sep".join(...)``). In a printed text only the literal
  text and the fields that are themselves string literals (a table header's ``{'GPU blocks':>10s}``, whose width
  the translator adjusts for double-width characters) may change; every other field (expression, ``!r``, format
  spec) stays, though it may move within the text (Chinese word order), also between the pieces of implicitly
  joined literals. Subscripts (``d["key"]``), dictionary keys and every other string stay;
* **docstrings** of the functions and classes a cell defines (an exercise's specification, kept in its stub):
  still a plain string literal with the same prefix.

:func:`differences` compares the Python token streams (:mod:`tokenize`) of the two cells with this in mind and
says what else differs; a translation that differs elsewhere is not used (the English cell is).
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator

__all__ = ["differences", "has_text", "compiles", "prose"]

#: Comments that code reads (labs build, linters): never translated.
KEPT_COMMENT = re.compile(r"#\s*(?:#+\s*(?:BEGIN|END)\b|EXERCISE\b|noqa\b|type:|pragma\b|fmt:)")
_WORD = re.compile(r"[A-Za-z]{2,}")
#: (type, text, (row, column)) of a token; (start, end) of a piece of code.
Token = tuple[int, str, tuple[int, int]]
Span = tuple[tuple[int, int], tuple[int, int]]


def _python(source: str) -> str:
    """``source`` with IPython's syntax (``%magic``, ``!shell``) turned into Python, as Jupyter runs it."""
    from IPython.core.inputtransformer2 import TransformerManager  # lazy: IPython's import (~0.3 s), only when checked

    return str(TransformerManager().transform_cell(source))


def _tokens(source: str) -> list[Token]:
    """``(type, text, start)`` of ``source``'s tokens; an f-string (Python 3.12's FSTRING_START ... FSTRING_END)
    becomes one STRING token as in Python 3.11. Raises :class:`SyntaxError` (or tokenize's error) when unreadable."""
    lines = io.StringIO(source).readlines()  # as tokenize reads them
    out: list[Token] = []
    depth, start = 0, (0, 0)
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == getattr(tokenize, "FSTRING_START", -1):
            depth += 1
            if depth == 1:
                start = tok.start
            continue
        if depth:
            if tok.type == getattr(tokenize, "FSTRING_END", -1):
                depth -= 1
                if not depth:
                    (l0, c0), (l1, c1) = start, tok.end
                    text = (
                        lines[l0 - 1][c0:c1]
                        if l0 == l1
                        else lines[l0 - 1][c0:] + "".join(lines[l0 : l1 - 1]) + lines[l1 - 1][:c1]
                    )
                    out.append((tokenize.STRING, text, start))
            continue
        out.append((tok.type, tok.string, tok.start))
    return out


def _shown(node: ast.expr) -> Iterator[ast.expr]:
    """The string literals and f-strings of a ``print()`` argument that it shows as text."""
    if isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str)):
        yield node
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        yield from _shown(node.left)
        yield from _shown(node.right)
    elif isinstance(node, ast.IfExp):
        yield from _shown(node.body)
        yield from _shown(node.orelse)
    elif (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "join"
        and isinstance(node.func.value, ast.Constant)
    ):
        for arg in node.args:
            if isinstance(arg, ast.GeneratorExp | ast.ListComp):
                yield from _shown(arg.elt)


def _printed_spans(source: str) -> list[Span]:
    """Where the text a translation may change lies (start, end) in ``source``: the string literals and f-strings
    that ``print()`` shows, and docstrings; as tokenize counts: row, and column in characters (the syntax tree
    counts UTF-8 bytes)."""
    lines = io.StringIO(source).readlines()  # as tokenize reads them

    def at(row: int, byte: int) -> tuple[int, int]:
        return row, (len(lines[row - 1].encode("utf-8")[:byte].decode("utf-8")) if row <= len(lines) else byte)

    return [
        (at(s.lineno, s.col_offset), at(s.end_lineno or s.lineno, s.end_col_offset or 0))
        for s, _doc in _translatable_nodes(ast.parse(source))
    ]


def _docstring_starts(source: str) -> set[int]:
    """The rows where a docstring starts (a docstring is the only string literal on its first row)."""
    return {s.lineno for s, doc in _translatable_nodes(ast.parse(source)) if doc}


def _translatable_nodes(tree: ast.AST) -> Iterator[tuple[ast.expr, bool]]:
    """``(node, is a docstring)`` of each printed text and docstring of ``tree``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
            for arg in node.args:
                yield from ((s, False) for s in _shown(arg))
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and ast.get_docstring(node):
            doc = node.body[0]
            assert isinstance(doc, ast.Expr)
            yield doc.value, True


def _fields(literal: str) -> list[str]:
    """An f-string's fields that are not string literals (as ``ast.dump``; none for a plain string)."""
    node = ast.parse(literal, mode="eval").body
    fields = []
    if isinstance(node, ast.JoinedStr):
        for v in node.values:
            if isinstance(v, ast.FormattedValue):
                if isinstance(v.value, ast.Constant) and isinstance(v.value.value, str):
                    continue  # a header's text: translated, its width adjusted
                fields.append(ast.dump(v))
    return fields


def _code_tokens(source: str) -> Iterator[Token]:
    """The tokens that make the code: comments (but the kept ones) and blank-line tokens left out."""
    for t in _tokens(source):
        if t[0] == tokenize.NL or (t[0] == tokenize.COMMENT and not KEPT_COMMENT.match(t[1])):
            continue
        yield t


def _prefix(literal: str) -> str:
    m = re.match(r"[A-Za-z]*", literal)
    return m.group(0).lower() if m else ""


def _printed_text(en_part: list[Token], zh_part: list[Token], docstring: bool = False) -> str | None:
    """Why ``zh_part`` cannot stand for the printed text ``en_part`` (implicitly joined literals), or None. Its
    fields may move between its pieces and within a piece (word order), never change."""
    es, (_, zs, zpos) = en_part[0][1], zh_part[0]
    if [t for t, _, _ in zh_part] != [tokenize.STRING] * len(en_part):
        return f"line {zpos[0]}: the printed text {es!r} is not {len(en_part)} string literal(s) there"
    if docstring and _prefix(es) != _prefix(zs):
        return f"line {zpos[0]}: the docstring {zs!r} has another prefix than the English {es!r}"
    try:
        en_fields = sorted(f for _, s, _ in en_part for f in _fields(s))
        zh_fields = sorted(f for _, s, _ in zh_part for f in _fields(s))
    except SyntaxError as e:
        return f"line {zpos[0]}: {zs!r} does not parse: {e}"
    return None if en_fields == zh_fields else f"line {zpos[0]}: {zs!r} changes a field ({{...}}) of {es!r}"


def differences(english: str, translated: str) -> list[str]:
    """What ``translated`` changes of the English code cell ``english`` besides comments and printed text
    (empty: a faithful translation). Each item names the line and the tokens."""
    try:
        en_py, zh_py = _python(english), _python(translated)
        en_tokens, zh_tokens = list(_code_tokens(en_py)), list(_code_tokens(zh_py))
        spans = _printed_spans(en_py)
        docstrings = _docstring_starts(en_py)
    except (SyntaxError, tokenize.TokenError, ValueError) as e:
        return [f"does not parse: {e}"]
    out: list[str] = []
    n = 0
    while n < min(len(en_tokens), len(zh_tokens)) and len(out) < 5:
        (et, es, epos), (zt, zs, zpos) = en_tokens[n], zh_tokens[n]
        span = next((sp for sp in spans if sp[0] <= epos < sp[1]), None)
        if et == tokenize.STRING and span is not None:
            k = n
            while k < len(en_tokens) and en_tokens[k][0] == tokenize.STRING and span[0] <= en_tokens[k][2] < span[1]:
                k += 1
            why = _printed_text(en_tokens[n:k], zh_tokens[n:k], docstring=epos[0] in docstrings)
            out += [why] if why else []
            n = k
            continue
        n += 1
        if (et, es) != (zt, zs):
            shown = ", a string print() does not show" if et == zt == tokenize.STRING else ""
            out.append(f"line {zpos[0]}: {zs!r} replaces {es!r}{shown}")
    if not out and len(en_tokens) != len(zh_tokens):
        out.append(f"{len(zh_tokens)} code tokens where the English has {len(en_tokens)}")
    return out


def compiles(source: str) -> str | None:
    """None if the cell compiles (as Jupyter runs it), else why not."""
    try:
        compile(_python(source), "<cell>", "exec")
    except SyntaxError as e:
        return f"line {e.lineno}: {e.msg}"
    return None


def has_text(source: str) -> bool:
    """Whether a code cell has anything a translation may change: a comment with words (not a kept one),
    printed text or a docstring with words."""
    try:
        py = _python(source)
        toks = _tokens(py)
        spans = _printed_spans(py)
    except (SyntaxError, tokenize.TokenError, ValueError):
        return False
    for t, s, pos in toks:
        if t == tokenize.COMMENT and not KEPT_COMMENT.match(s) and _WORD.search(s):
            return True
        if t == tokenize.STRING and any(a <= pos < b for a, b in spans) and _WORD.search(_literal_text(s)):
            return True
    return False


def _literal_text(literal: str) -> str:
    """The text of a string literal or f-string without its fields' expressions."""
    node = ast.parse(literal, mode="eval").body
    if isinstance(node, ast.JoinedStr):
        return " ".join(
            str(v.value)
            if isinstance(v, ast.Constant)
            else str(v.value.value)
            if isinstance(v, ast.FormattedValue) and isinstance(v.value, ast.Constant)
            else ""
            for v in node.values
        )
    return str(node.value) if isinstance(node, ast.Constant) else ""


def prose(source: str) -> str:
    """The words of a code cell a translation may change: its comments (not the kept ones), its printed
    text (without the fields' expressions) and docstrings, one a line; for the glossary checks."""
    try:
        py = _python(source)
        toks = _tokens(py)
        spans = _printed_spans(py)
    except (SyntaxError, tokenize.TokenError, ValueError):
        return ""
    out = []
    for t, s, pos in toks:
        if t == tokenize.COMMENT and not KEPT_COMMENT.match(s):
            out.append(s.lstrip("#").strip())
        elif t == tokenize.STRING and any(a <= pos < b for a, b in spans):
            out.append(_literal_text(s))
    return "\n".join(x for x in out if x)
