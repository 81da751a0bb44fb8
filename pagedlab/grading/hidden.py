"""What the instructor reads about a hidden test that did not pass (``pagedlab grade``'s ``hidden_failures``
column and Gradescope's instructor-only test): the exception, the limit it hit, the seconds it ran, with any
text that repeats the hidden inputs withheld. Learners never see it."""

from __future__ import annotations

import re
from typing import Any

from pagedlab.grading.judge import Outcome
from pagedlab.grading.text import printable

__all__ = ["hidden_failure"]


def hidden_failure(label: str, out: Outcome, entries: Any, seconds: float | None, inputs: str = "") -> str:
    """For the instructor: why a hidden test did not pass - the exception its run ended with (type and
    message; a time or memory limit, or the process's end, says so), else the verdict, and the seconds it ran.

    Text that repeats a number of ``inputs`` (the hidden test's reference transcript, as text) is withheld:
    the learner's code or the judge wrote it from the hidden inputs, which never reach a file."""
    err = next((e for e in reversed(entries) if isinstance(e, dict) and e.get("kind") == "error"), None)
    if not isinstance(entries, list):
        err = None
    if err is not None and err.get("where") == "<skipped>":
        what = "not run: an earlier test of this exercise ran out of time"
    elif err is not None:
        limit = err.get("limit")
        message = _unless_inputs(str(err.get("message", "")), inputs)
        what = f"{err.get('type', '?')}" + (f": {message}" if message else "")
        what += f" (time limit {limit:g} s)" if isinstance(limit, (int, float)) else ""
        what += " (memory limit)" if err.get("type") == "MemoryError" else ""
    else:
        first = (out.message or "").strip().splitlines()[0] if (out.message or "").strip() else ""
        what = f"{out.status}: {_unless_inputs(first, inputs)}"
    took = f" after {seconds:.2f} s" if seconds is not None else ""
    return printable(f"{label}: {what}{took}")[:500]


def _unless_inputs(text: str, inputs: str) -> str:
    """``text``, or a placeholder when it holds a number (2 digits or more) that ``inputs`` holds."""
    numbers = set(re.findall(r"\d{2,}", text))
    if any(re.search(rf"(?<!\d){n}(?!\d)", inputs) for n in numbers):
        return "(text withheld: it repeats the hidden test's inputs)"
    return text
