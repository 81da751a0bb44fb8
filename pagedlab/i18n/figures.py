"""matplotlib figures in the learner's language: the labs draw them with English titles, axis labels, legends
and annotations (in their code cells, which stay as written); each text passes through the message catalog at
the one point where a figure is rendered, ``FigureCanvasBase.print_figure`` (Jupyter's inline backend,
``savefig``), once :func:`install` ran: :func:`pagedlab.i18n.set_language` installs
:func:`pagedlab.i18n.messages.tr` for a language other than English. A text without an entry stays as drawn, and
so does every text while the language is English (``tr`` returns it unchanged)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

__all__ = ["install", "translate_figure"]

_translate: Callable[[str], str] | None = None


def translate_figure(fig: Any, translate: Callable[[str], str]) -> int:
    """Replace each text of ``fig`` (titles, axis labels, legend entries, annotations) by ``translate(text)``.
    Returns how many texts changed."""
    from matplotlib.text import Text  # lazy: matplotlib only where a figure is drawn

    changed = 0
    for artist in fig.findobj(Text):
        text = artist.get_text()
        if text and any(c.isalpha() for c in text):
            new = translate(text)
            if new != text:
                artist.set_text(new)
                changed += 1
    return changed


def install(translate: Callable[[str], str]) -> None:
    """Pass every figure's texts through ``translate`` as it is rendered (the wrapper is put in place once; a
    later call replaces the function)."""
    global _translate
    first = _translate is None
    _translate = translate
    if not first:
        return
    from matplotlib.backend_bases import FigureCanvasBase  # lazy: matplotlib only where a figure is drawn

    original = FigureCanvasBase.print_figure

    @functools.wraps(original)
    def print_figure(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _translate is not None:
            translate_figure(self.figure, _translate)
        return original(self, *args, **kwargs)

    FigureCanvasBase.print_figure = print_figure  # type: ignore[method-assign]
