"""``check()``'s report in the learner's language: the hook :func:`pagedlab.grading.checking._show` calls.

:func:`localized` returns a copy of the result whose learner-facing texts (exercise summary, each test's
title, the first failure's message and hint line by line, the broken invariant, the error) went through
the message catalog; :func:`frame` translates the fixed words the report puts around them ("All 5 tests
passed.", "[hidden test]", ...). The result a notebook or test holds keeps the English.
"""

from __future__ import annotations

import copy
from typing import Any

from pagedlab.i18n.messages import frame as _frame
from pagedlab.i18n.messages import get_language, tr, tr_lines

__all__ = ["localized", "frame"]


def localized(res: Any) -> Any:
    """A copy of a ``CheckResult`` with its texts in the language in use (``res`` itself in English)."""
    if get_language() == "en":
        return res
    out = copy.copy(res)
    out.summary = tr(res.summary)
    out.error = tr_lines(res.error)
    outs = []
    for o in res.outcomes:
        o2 = copy.copy(o)
        o2.title = tr(o.title)
        o2.message = tr_lines(o.message) if o.message else o.message
        if getattr(o, "invariant", ""):
            o2.invariant = tr_lines(o.invariant)
        outs.append(o2)
    out.outcomes = outs
    return out


def frame(rendered: str) -> str:
    """The fixed words of a rendered report (text or HTML) in the language in use."""
    return _frame(rendered)
