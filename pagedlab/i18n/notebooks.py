"""The notebooks' translation catalogs: ``solutions/<lang>/<notebook>.po`` beside the English source.

Format: gettext ``.po`` (read and written with Babel, which the kit already installs; Poedit, Weblate
and ``msgmerge`` read it too). One entry per markdown cell, and per code cell with comments, printed
text or docstrings: msgctxt = the cell's nbformat id (stable across edits), msgid = the cell's English
source, msgstr = its translation. The English text itself is the key, which is stronger than a hash of it: when an English cell changes, its entry no longer matches
and the translation counts as **stale** (it is not used; the English cell is shown until the entry is
updated), and :func:`update` keeps the old translation marked ``#, fuzzy`` with the old English as
``#| msgid`` so the translator sees what changed. A cell with no entry or an empty msgstr is **missing**;
an entry whose cell is gone is **obsolete** (:func:`update` drops it).

A code cell's translation changes its comments, the text it prints and its docstrings, nothing else
(:mod:`pagedlab.i18n.code_text`): its code, exercise markers, names, keys and compared values stay as written.
One that changes more is **unfaithful**: it is not used (the English cell runs) and the status lists it.
"""

from __future__ import annotations

import copy
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pagedlab.i18n import code_text
from pagedlab.i18n.messages import LANGUAGES, I18nError

__all__ = ["CatalogStatus", "cells", "read", "write", "status", "update", "translate_notebook", "catalog_path"]

#: Cell types whose source is translated (code cells: only those with comments, printed text or docstrings).
TRANSLATED_TYPES = ("markdown", "code")
#: Cells made by a generator, not written by an author: their text follows a setting (the links of
#: ``pagedlab.routes``, the setup cell of ``pagedlab.colab``), so a translation would go stale with the
#: setting. They stay as generated.
GENERATED_TAGS = frozenset({"pagedlab-routes", "pagedlab-setup"})


def _translatable(cell: dict[str, Any]) -> bool:
    tags = cell.get("metadata", {}).get("tags", [])
    if cell.get("cell_type") not in TRANSLATED_TYPES or GENERATED_TAGS.intersection(tags):
        return False
    if cell.get("cell_type") == "code":
        return code_text.has_text(_source(cell))
    return bool(_source(cell).strip())


def unfaithful(english: str, translated: str, cell_type: str) -> list[str]:
    """Why the translation of a ``cell_type`` cell cannot be used (a code cell's translation may change only
    comments, printed text and docstrings: :func:`pagedlab.i18n.code_text.differences`); empty when it can."""
    if cell_type != "code":
        return []
    problems = code_text.differences(english, translated)
    why = code_text.compiles(translated)
    return problems + ([f"does not compile: {why}"] if why else [])


def _source(cell: dict[str, Any]) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src)


def cells(nb: dict[str, Any], where: str = "notebook") -> list[tuple[str, str]]:
    """``(cell id, English source)`` of each translatable cell of ``nb``, in order (empty cells, and code
    cells with nothing to translate, left out).

    Raises:
        I18nError: a translatable cell without an id, or two cells with one id (nbformat 4.5 gives each an id).
    """
    out, seen = [], set()
    for n, cell in enumerate(nb.get("cells", [])):
        cid = cell.get("id")
        if cid in seen:
            raise I18nError(f"{where}: cell {n} repeats the id {cid!r}; give each cell its own id")
        seen.add(cid)
        if not _translatable(cell):
            continue
        if not cid:
            raise I18nError(f"{where}: {cell.get('cell_type')} cell {n} has no id; save the notebook as nbformat 4.5")
        out.append((str(cid), _source(cell)))
    return out


def catalog_path(solution: Path, lang: str) -> Path:
    """``solutions/<lang>/<stem>.po`` for ``solutions/<stem>.ipynb``."""
    return solution.parent / lang / f"{solution.stem}.po"


@dataclass
class Entry:
    cell_id: str
    english: str  # the English source the translation was made from
    text: str  # the translation ("" = none)
    fuzzy: bool = False
    previous: str = ""  # the English before it changed (fuzzy entries)


def _previous(comments: list[str]) -> str:
    """The old English of a fuzzy entry from its ``#| msgid "..."`` lines (Babel keeps them as user comments)."""
    from babel.messages.pofile import unescape  # lazy: start-up time (Babel, ~30 ms; only when a catalog is read)

    parts, inside = [], False
    for c in comments:
        if c.startswith("| msgid "):
            inside, c = True, "| " + c[len("| msgid ") :]
        if inside and c.startswith('| "'):
            parts.append(unescape(c[2:].strip()))
        elif inside:
            break
    return "".join(parts)


def read(path: Path) -> dict[str, Entry]:
    """The entries of a notebook catalog, by cell id (``{}`` if the file does not exist).

    Raises:
        I18nError: not a readable ``.po`` file, or two entries for one cell.
    """
    if not path.is_file():
        return {}
    # lazy: start-up time (Babel, ~30 ms; only when a catalog is read)
    from babel.messages.pofile import PoFileError, read_po

    try:
        cat = read_po(io.StringIO(path.read_text(encoding="utf-8")), abort_invalid=True)
    except (PoFileError, UnicodeDecodeError, OSError) as e:
        raise I18nError(f"{path}: not a readable .po catalog ({e})") from e
    out: dict[str, Entry] = {}
    for msg in cat:
        if not msg.id:
            continue  # the header
        if not msg.context:
            raise I18nError(f"{path}: the entry for {str(msg.id)[:40]!r}... has no msgctxt (the cell id)")
        if msg.context in out:
            raise I18nError(f"{path}: two entries for cell {msg.context!r}")
        prev = msg.previous_id[0] if msg.previous_id else _previous(msg.user_comments)
        out[msg.context] = Entry(msg.context, str(msg.id), str(msg.string or ""), msg.fuzzy, prev)
    return out


def write(path: Path, entries: list[Entry], lang: str, notebook: str) -> None:
    """Write ``entries`` (in cell order) as a ``.po`` catalog."""
    from babel.messages.catalog import Catalog  # lazy: start-up time (Babel, ~30 ms; only when a catalog is written)
    from babel.messages.pofile import write_po  # lazy: start-up time (Babel, ~30 ms; only when a catalog is written)

    cat = Catalog(
        locale=lang,
        project="pagedlab",
        header_comment=f"# {notebook}: its markdown cells, and its code cells' comments, printed text and\n"
        f"# docstrings, in {lang}, keyed by cell id (pagedlab.i18n.notebooks).\n"
        f"# Update with `pagedlab translate update {lang}`; list stale and missing cells with `pagedlab translate status`.",
    )
    for e in entries:
        cat.add(
            e.english,
            e.text,
            context=e.cell_id,
            flags=("fuzzy",) if e.fuzzy else (),
            previous_id=e.previous or (),
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    write_po(buf, cat, width=0, omit_header=False, include_previous=True, sort_output=False)
    path.write_bytes(buf.getvalue())


@dataclass
class CatalogStatus:
    """What a notebook's catalog lacks: cell ids whose translation is missing, stale, obsolete, or unfaithful
    (a code cell's translation that changes more than comments and printed text)."""

    notebook: str
    cells: int = 0
    translated: int = 0
    missing: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    obsolete: list[str] = field(default_factory=list)
    unfaithful: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.missing or self.stale or self.obsolete or self.unfaithful)


def status(solution: Path, lang: str) -> CatalogStatus:
    """Compare ``solution``'s markdown cells with its ``lang`` catalog."""
    nb = json.loads(solution.read_text(encoding="utf-8"))
    entries = read(catalog_path(solution, lang))
    st = CatalogStatus(solution.name)
    current = cells(nb, str(solution))
    types = {str(c.get("id")): str(c.get("cell_type")) for c in nb.get("cells", [])}
    for cid, english in current:
        st.cells += 1
        e = entries.get(cid)
        if e is None or not e.text:
            st.missing.append(cid)
        elif e.fuzzy or e.english != english:
            st.stale.append(cid)
        elif unfaithful(english, e.text, types[cid]):
            st.unfaithful.append(cid)
        else:
            st.translated += 1
    ids = {cid for cid, _ in current}
    st.obsolete = [cid for cid in entries if cid not in ids]
    return st


def update(solution: Path, lang: str) -> CatalogStatus:
    """Rewrite ``solution``'s ``lang`` catalog to follow the English: new cells get an empty entry, a cell
    whose English changed keeps its old translation marked fuzzy (with the old English as ``#| msgid``),
    entries of removed cells are dropped. Returns the status after the update."""
    nb = json.loads(solution.read_text(encoding="utf-8"))
    path = catalog_path(solution, lang)
    old = read(path)
    new = []
    for cid, english in cells(nb, str(solution)):
        e = old.get(cid)
        if e is None:
            new.append(Entry(cid, english, ""))
        elif e.english == english:
            new.append(e)
        else:
            new.append(Entry(cid, english, e.text, fuzzy=bool(e.text), previous=e.english if e.text else ""))
    write(path, new, lang, solution.name)
    return status(solution, lang)


#: The code cell put before a translated notebook's first code cell: the learner's language, chosen once.
LANGUAGE_CELL = (
    'from pagedlab.i18n import set_language\n\nset_language("{lang}")  # check(), pictures, self-checks: {name}'
)


def translate_notebook(nb: dict[str, Any], entries: dict[str, Entry], lang: str) -> tuple[dict[str, Any], list[str]]:
    """A copy of ``nb`` with each translated cell replaced by its current translation and a first code cell
    that sets the language (:data:`LANGUAGE_CELL`), and the ids of the cells left in English (no
    translation, a stale one, or an unfaithful code cell: neither is ever shown)."""
    out = copy.deepcopy(nb)
    english_left = []
    for cell in out.get("cells", []):
        if not _translatable(cell):
            continue
        e = entries.get(str(cell.get("id")))
        if (
            e is None
            or not e.text
            or e.fuzzy
            or e.english != _source(cell)
            or unfaithful(e.english, e.text, str(cell.get("cell_type")))
        ):
            english_left.append(str(cell.get("id")))
            continue
        cell["source"] = e.text.splitlines(keepends=True)
    code_at = next((n for n, c in enumerate(out["cells"]) if c.get("cell_type") == "code"), len(out["cells"]))
    name = LANGUAGES[lang].split(" (")[0]
    out["cells"].insert(
        code_at,
        {
            "cell_type": "code",
            "id": f"lang-{lang}",
            "metadata": {"tags": ["language"]},
            "execution_count": None,
            "outputs": [],
            "source": LANGUAGE_CELL.format(lang=lang, name=name).splitlines(keepends=True),
        },
    )
    return out, english_left
