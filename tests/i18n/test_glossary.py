"""docs/glossary.md is the Chinese edition's vocabulary: the catalogs never use a term's avoided variants, and a
translated cell whose English names a glossary term uses the Chinese edition's word for it."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from pagedlab.i18n import code_text, notebooks

REPO = Path(__file__).resolve().parents[2]
GLOSSARY = REPO / "docs" / "glossary.md"


def glossary() -> list[dict[str, object]]:
    """The rows of the term table (six columns)."""
    rows = []
    for line in GLOSSARY.read_text(encoding="utf-8").splitlines():
        cols = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cols) != 6 or cols[0].startswith(("讲义", "---")) or set(cols[0]) <= {"-"}:
            continue
        seed, en, zh, code, lab, avoid = cols
        rows.append(
            {
                "seed": seed,
                "en": en,
                "zh": zh,
                "code": code,
                "lab": lab,
                "avoid": [a.strip() for a in avoid.split(";") if a.strip()],
            }
        )
    return rows


ROWS = glossary()


def _zh_texts() -> list[tuple[str, str, str]]:
    """(where, English, Chinese) of every translation in the repository's catalogs; of a code cell, its comments
    and printed text (:func:`pagedlab.i18n.code_text.prose`: the code around them stays English)."""
    from babel.messages.pofile import read_po

    out = []
    for po in sorted((REPO / "solutions" / "zh").glob("*.po")):
        nb = json.loads((REPO / "solutions" / f"{po.stem}.ipynb").read_text(encoding="utf-8"))
        code = {c.get("id") for c in nb["cells"] if c["cell_type"] == "code"}
        for cid, e in notebooks.read(po).items():
            if e.text and cid in code:
                out.append((f"{po.name}:{cid}", code_text.prose(e.english), code_text.prose(e.text)))
            elif e.text:
                out.append((f"{po.name}:{cid}", e.english, e.text))
    cat = read_po(io.StringIO((REPO / "pagedlab" / "i18n" / "zh.po").read_text(encoding="utf-8")))
    out += [(f"zh.po:{str(m.id)[:30]}", str(m.id), str(m.string)) for m in cat if m.id and m.string]
    return out


TEXTS = _zh_texts()


def test_glossary_table_is_complete():
    seeds = {r["seed"] for r in ROWS}
    for term in ("显存碎片", "块表", "写时复制", "连续批处理", "分块预填充", "抢占", "换出", "重算", "前缀缓存"):
        assert term in seeds, term
    for r in ROWS:
        assert r["zh"] and r["en"] and re.fullmatch(r"\d\d", str(r["lab"])), r
        assert not [a for a in r["avoid"] if str(r["zh"]) in a and a.startswith(str(r["zh"]))], r


@pytest.mark.parametrize("row", ROWS, ids=lambda r: str(r["en"]))
def test_no_competing_translation_of_a_glossary_term(row):
    bad = [(where, a) for where, _en, zh in TEXTS for a in row["avoid"] if a in zh]
    assert not bad, f"use {row['zh']!r} for {row['en']!r}, not: {bad[:5]}"


def _prose(text: str) -> str:
    """Markdown without code spans, code blocks, math and link targets (where English names stay English)."""
    text = re.sub(r"```.*?```", " ", text, flags=re.S)
    text = re.sub(r"``.*?``", " ", text, flags=re.S)  # a docstring's code (reStructuredText)
    text = re.sub(r"`[^`]*`", " ", text)
    text = re.sub(r"\$[^$]*\$", " ", text)
    return re.sub(r"\]\([^)]*\)", "]", text)


@pytest.mark.parametrize("row", ROWS, ids=lambda r: str(r["en"]))
def test_translations_use_the_glossary_term(row):
    # "swap it into the table" (lab 03: a copied block replaces a table entry) is not the preemption's swap
    pattern = re.compile(rf"\b{re.escape(str(row['en']))}(s|es)?\b(?! it into the table)", re.I)
    wrong = [
        where
        for where, en, zh in TEXTS
        if pattern.search(_prose(en)) and str(row["zh"]) not in zh and str(row["en"]) not in zh
    ]
    assert not wrong, f"{row['en']!r} is {row['zh']!r} in the Chinese edition; not used in {wrong[:6]}"
