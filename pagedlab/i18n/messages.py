"""The learner's language and the message catalog the kit's learner-facing text passes through.

The language is chosen once per process: :func:`set_language` (e.g. in a lab's first cell) or the
``PAGEDLAB_LANG`` environment variable (``make lab LANG=zh`` sets it for the kernels); default English.

The catalog for language ``xx`` is ``xx.po`` beside this module: gettext ``.po`` read with Babel, each
entry's msgid the English text as the kit prints it. A msgid with ``{name}`` placeholders is a template:
``"{k} of {n} tests passed."`` matches any text of that shape and its msgstr receives the values
(each value is itself looked up, so a translated exercise summary inside a template comes out
translated). A msgctxt of ``frame`` marks a template matched *inside* a longer text (the fixed words
of ``check()``'s report around the parts that are translated whole); its placeholders match a word.
Text with no entry stays English: a missing translation never hides a message.
"""

from __future__ import annotations

import io
import os
import re
from dataclasses import dataclass, field
from functools import cache
from importlib.resources import files

from pagedlab.errors import PagedLabError
from pagedlab.i18n import figures
from pagedlab.i18n.fonts import use_cjk_fonts

__all__ = [
    "LANGUAGES",
    "ENV",
    "I18nError",
    "Catalog",
    "get_language",
    "set_language",
    "normalize_language",
    "tr",
    "tr_lines",
    "catalog",
]

#: Languages the kit speaks: code -> name. English is the source text.
LANGUAGES = {"en": "English", "zh": "简体中文 (Simplified Chinese)"}
#: The environment variable that picks the language when :func:`set_language` was not called.
ENV = "PAGEDLAB_LANG"
FRAME = "frame"
_PLACEHOLDER = re.compile(r"\{([A-Za-z_]\w*)\}")
#: What a line may start with that is not text (indentation, check()'s marks): kept, not translated.
_LEAD = re.compile(r"^[\s✅❌⬜⏱️⚠️🚫⏭️•\-]*")

_chosen: str | None = None


class I18nError(PagedLabError, ValueError):
    """An unknown language code, or a malformed catalog entry."""


def normalize_language(code: str, where: str = "language") -> str:
    """``code`` as one of :data:`LANGUAGES` (``zh_CN`` -> ``zh``). Raises :class:`I18nError` if the kit does not speak it."""
    norm = code.strip().lower().replace("_", "-")
    base = norm.split("-")[0] if norm else ""
    if base not in LANGUAGES:
        raise I18nError(f"{where}: unknown language {code!r}; the kit speaks {', '.join(sorted(LANGUAGES))}")
    return base


def set_language(code: str | None) -> str:
    """Use language ``code`` (``"zh"``, ``"en"``; ``"zh_CN"`` counts as ``"zh"``) for the rest of this process;
    None goes back to ``PAGEDLAB_LANG``. Returns the language now in use.

    Raises:
        I18nError: a language the kit does not speak.
    """
    global _chosen
    _chosen = None if code is None else normalize_language(code, "set_language")
    lang = get_language()
    if lang != "en":
        use_cjk_fonts()
        figures.install(tr)  # the figures' titles, labels and legends (pagedlab.i18n.figures)
    return lang


def get_language() -> str:
    """The language in use: :func:`set_language`'s, else ``PAGEDLAB_LANG``'s, else ``"en"``.

    Raises:
        I18nError: ``PAGEDLAB_LANG`` names a language the kit does not speak.
    """
    if _chosen is not None:
        return _chosen
    env = os.environ.get(ENV, "").strip()
    return normalize_language(env, ENV) if env else "en"


def _pattern(msgid: str, inner: bool) -> re.Pattern[str]:
    parts, pos, names = [], 0, []
    for m in _PLACEHOLDER.finditer(msgid):
        parts.append(re.escape(msgid[pos : m.start()]))
        name = m.group(1)
        if name in names:
            parts.append(f"(?P={name})")
        else:
            names.append(name)
            parts.append(f"(?P<{name}>[\\w.\\-/#]+)" if inner else f"(?P<{name}>.+?)")
        pos = m.end()
    parts.append(re.escape(msgid[pos:]))
    body = "".join(parts)
    return re.compile(body if inner else f"^{body}$")  # a value never spans lines: multi-line text goes line by line


_PAIRS = {")": "(", "]": "[", "}": "{", "）": "（"}


def _balanced(value: str) -> bool:
    """Whether ``value``'s brackets close in order and its backticks pair up (a value cut out of a longer text
    at the wrong ``: `` is not)."""
    if value.count("`") % 2:
        return False
    stack: list[str] = []
    for ch in value:
        if ch in "([{（":
            stack.append(ch)
        elif ch in _PAIRS and (not stack or stack.pop() != _PAIRS[ch]):
            return False
    return not stack


def placeholders(text: str) -> set[str]:
    """The ``{name}`` placeholders in ``text``."""
    return set(_PLACEHOLDER.findall(text))


@dataclass
class Catalog:
    """One language's messages: exact entries, whole-text templates and frame templates."""

    exact: dict[str, str] = field(default_factory=dict)
    #: entries with a msgctxt other than ``frame`` (e.g. ``self-check 05``): (context, msgid) -> msgstr
    in_context: dict[tuple[str, str], str] = field(default_factory=dict)
    templates: list[tuple[re.Pattern[str], str]] = field(default_factory=list)
    frames: list[tuple[re.Pattern[str], str]] = field(default_factory=list)

    @classmethod
    def from_po(cls, text: str, where: str) -> Catalog:
        """The catalog of a ``.po`` text. Fuzzy (stale) and empty entries are left out.

        Raises:
            I18nError: a translation whose placeholders differ from its msgid's.
        """
        from babel.messages.pofile import read_po  # lazy: start-up time (Babel, ~30 ms; only when a catalog is read)

        cat = cls()
        templates: list[tuple[str, str]] = []
        frames: list[tuple[str, str]] = []
        for msg in read_po(io.StringIO(text)):
            if not msg.id or not msg.string or msg.fuzzy:
                continue
            msgid, msgstr = str(msg.id), str(msg.string)
            if placeholders(msgid) != placeholders(msgstr):
                raise I18nError(
                    f"{where}: the translation of {msgid!r} has placeholders {sorted(placeholders(msgstr))}, "
                    f"the English {sorted(placeholders(msgid))}"
                )
            if msg.context == FRAME:
                frames.append((msgid, msgstr))
            elif msg.context:
                cat.in_context[(msg.context, msgid)] = msgstr
            elif placeholders(msgid):
                templates.append((msgid, msgstr))
            else:
                cat.exact[msgid] = msgstr

        # frames: the most specific (most literal text) first; whole-text templates: the tightest match wins
        def literal(mid: str) -> int:
            return len(_PLACEHOLDER.sub("", mid))

        cat.templates = [(_pattern(m, False), s) for m, s in templates]
        cat.frames = [(_pattern(m, True), s) for m, s in sorted(frames, key=lambda t: -literal(t[0]))]
        return cat

    def lookup(self, text: str, context: str | None = None, _depth: int = 0) -> str | None:
        """The translation of the whole of ``text``: the entry of that ``context`` if any, else the entry
        without a context, else the template that matches it most tightly (each value a whole unit - its
        brackets and backticks balanced -, then its largest value the shortest), its values translated the same
        way: ``step 1 (`the case: f(x)`):`` is ``step {n} (`{label}`):``, never ``step {s}: {events}`` with
        ``s`` = ``1 (`the case``."""
        hit = self.in_context.get((context, text)) if context else None
        if hit is None:
            hit = self.exact.get(text)
        if hit is not None or _depth > 3:
            return hit
        best: tuple[tuple[int, int, int], dict[str, str], str] | None = None
        for pat, msgstr in self.templates:
            m = pat.match(text)
            if m:
                sizes = [len(v) for v in m.groupdict().values()]
                torn = sum(not _balanced(v) for v in m.groupdict().values())
                key = (torn, max(sizes, default=0), sum(sizes))  # whole values, the smallest largest, the least in all
                if best is None or key < best[0]:
                    best = (key, m.groupdict(), msgstr)
        if best is None:
            return None
        values = {k: self.lookup(v, None, _depth + 1) or v for k, v in best[1].items()}
        return _PLACEHOLDER.sub(lambda p: values[p.group(1)], best[2])

    def frame(self, text: str) -> str:
        """``text`` with every frame template found in it replaced by its translation."""
        for pat, msgstr in self.frames:
            text = pat.sub(lambda m: _PLACEHOLDER.sub(lambda p: m.group(p.group(1)), msgstr), text)
        return text


@cache
def catalog(lang: str) -> Catalog:
    """The message catalog of ``lang`` (empty for English), read once.

    Raises:
        I18nError: an unknown language, or a malformed catalog.
    """
    lang = normalize_language(lang, "catalog")
    if lang == "en":
        return Catalog()
    res = files("pagedlab.i18n") / f"{lang}.po"
    return Catalog.from_po(res.read_text(encoding="utf-8"), f"pagedlab/i18n/{lang}.po")


def tr(text: str, lang: str | None = None, context: str | None = None) -> str:
    """``text`` in ``lang`` (default: the language in use); unchanged when the catalog has no entry for it.
    ``context``: the msgctxt tried first (short words such as "no" mean different things in different places)."""
    lang = lang or get_language()
    if lang == "en" or not isinstance(text, str) or not text:
        return text
    hit = catalog(lang).lookup(text, context)
    return text if hit is None else hit


def tr_lines(text: str, lang: str | None = None) -> str:
    """``text`` translated whole if the catalog has it, else line by line (each line's indentation and
    leading marks kept), else unchanged."""
    lang = lang or get_language()
    if lang == "en" or not text:
        return text
    whole = catalog(lang).lookup(text)
    if whole is not None:
        return whole
    out = []
    for line in text.split("\n"):
        lead = _LEAD.match(line)
        n = lead.end() if lead else 0
        out.append(line[:n] + tr(line[n:], lang) if line[n:] else line)
    return "\n".join(out)


def frame(text: str, lang: str | None = None) -> str:
    """``text`` with the catalog's frame templates (fixed words around translated parts) translated."""
    lang = lang or get_language()
    return text if lang == "en" else catalog(lang).frame(text)
