"""Learner text made safe to write anywhere: UTF-8 encodable, no control characters, one function.

A learner's process can produce any ``str``: lone surrogates (``"\\ud800"``, which no UTF-8 file can
hold), terminal escapes, NULs. Every file ``pagedlab grade`` writes passes learner text through
:func:`printable` (and :func:`printable_data` for JSON), so one learner's output can never stop the
writing of another's.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["printable", "printable_data"]

#: Lone surrogates, C0 controls but tab and newline, DEL, C1 controls, and the line/paragraph separators.
_UNSAFE = re.compile("[\ud800-\udfff\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")


def _escape(m: re.Match[str]) -> str:
    c = ord(m.group(0))
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def printable(text: Any) -> str:
    """``str(text)`` with every character that cannot be written or shown as it is written as its
    Python escape (``\\ud800``, ``\\x1b``); tabs, newlines and every other Unicode character stay."""
    s = text if isinstance(text, str) else str(text)
    return _UNSAFE.sub(_escape, s)


def printable_data(value: Any) -> Any:
    """``value`` (JSON data) with :func:`printable` applied to every string, keys included."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        return {printable(k) if isinstance(k, str) else k: printable_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [printable_data(v) for v in value]
    return value
