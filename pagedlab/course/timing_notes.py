"""The labs' timing notes ("up to N s on a 2-core machine"), checked against what a run measures.

A lab tells the learner how long its slow cells take, so that nobody stops a cell that is still working. Such a
note is a claim about a machine, so it is not typed and forgotten: the cell it is about carries the figure in its
metadata (``"pagedlab": {"up_to_s": N}``), the markdown before it says "up to N s", and every nbval run of the
solutions (``make test``, on CI's two cores) measures the cell and fails when the note is wrong
(``solutions/conftest.py``):

- the cell took longer than N s (the note promises too little), or
- on CI (``CI=true``: the machine the figures are set for), it took less than N / ``SLACK`` s (the note is so
  loose it says nothing). A faster machine than CI's only makes "up to N s" truer, so elsewhere this is not
  checked.

``tests/test_notebook_facts.py`` checks the notes statically: every "up to N s" in a lab's prose names the figure
of the next code cell that carries one, every such cell has its note, and no note gives a typed range instead.
"""

from __future__ import annotations

import re
from typing import Any

#: the metadata key (under ``"pagedlab"``) of a code cell's time limit, in seconds
KEY = "up_to_s"
#: a note may be at most this many times the measured time (noise on a shared 2-core machine: 2x either way)
SLACK = 4.0
#: how a note says it in the prose (English and the Chinese edition's catalogs)
NOTE = re.compile(r"up to (\d+) s\b|最多 (\d+) 秒")
#: a typed range of seconds or minutes: the form the notes had before they were checked
TYPED_RANGE = re.compile(r"\b\d+ (?:to|-|–) \d+ (?:seconds|minutes|s)\b")


def claims(nb: dict[str, Any]) -> dict[str, int]:
    """Cell id -> its note's seconds, for every code cell of ``nb`` (a notebook as JSON) that carries one."""
    out = {}
    for cell in nb["cells"]:
        value = cell.get("metadata", {}).get("pagedlab", {}).get(KEY)
        if cell["cell_type"] == "code" and value is not None:
            out[cell["id"]] = value
    return out


def note_problems(nb: dict[str, Any]) -> list[str]:
    """What is wrong with ``nb``'s timing notes: a note whose figure is not the next claimed cell's, a claimed cell
    without a note in the markdown since the previous code cell with a claim, a typed range, a bad figure."""
    problems = []
    pending: list[tuple[str, int]] = []  # (markdown cell id, figure) not yet matched to a cell
    for cell in nb["cells"]:
        text = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if cell["cell_type"] == "markdown":
            for m in TYPED_RANGE.finditer(text):
                problems.append(f"cell {cell['id']}: {m.group(0)!r} is a typed range: say 'up to N s' with {KEY}")
            pending += [(cell["id"], int(m.group(1) or m.group(2))) for m in NOTE.finditer(text)]
            continue
        value = cell.get("metadata", {}).get("pagedlab", {}).get(KEY)
        if value is None:
            continue
        if not isinstance(value, int) or value <= 0:
            problems.append(f"cell {cell['id']}: {KEY} must be a positive whole number of seconds, got {value!r}")
        figures = [n for _, n in pending]
        if figures != [value]:
            problems.append(
                f"cell {cell['id']} has {KEY}={value}: the prose before it must say 'up to {value} s' once, "
                f"it says {figures or 'nothing'}"
            )
        pending = []
    problems += [f"cell {cid}: 'up to {n} s' is about no later code cell with {KEY}" for cid, n in pending]
    return problems


def check(claimed_s: float, measured_s: float, too_loose: bool = True) -> str | None:
    """None when a cell that took ``measured_s`` fits its note of ``claimed_s``; else what is wrong.
    ``too_loose``: also fail a note over ``SLACK`` times the measured time (on CI's machine)."""
    if measured_s > claimed_s:
        return f"took {measured_s:.1f} s, over its note's {claimed_s:g} s"
    if too_loose and claimed_s > SLACK * measured_s:
        return f"took {measured_s:.1f} s: its note's {claimed_s:g} s is over {SLACK:g}x that (too loose to help)"
    return None
