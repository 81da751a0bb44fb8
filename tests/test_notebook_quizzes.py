"""Every lab asks at least two predictions before a measurement, reveals each, and ends with its self-check."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "solutions").glob("[0-9][0-9]_*.ipynb"))
PREDICT = re.compile(r"^(\w+) = predict\(", re.MULTILINE)


def predictions(cells: list[str]) -> list[tuple[str, int, int | None]]:
    """``(name, cell asked in, first later cell that reveals it or None)`` for each ``x = predict(...)``."""
    out = []
    for i, src in enumerate(cells):
        for name in PREDICT.findall(src):
            later = [j for j in range(i + 1, len(cells)) if f"{name}.reveal(" in cells[j]]
            out.append((name, i, later[0] if later else None))
    return out


def test_predictions_parser_on_an_example() -> None:
    cells = [
        "p_a = predict('q', ['x', 'y'])\np_b = predict('n?')",
        "measure()",
        "p_a.reveal('x', '')",
        "p_c = predict('q')",
    ]
    assert predictions(cells) == [("p_a", 0, 2), ("p_b", 0, None), ("p_c", 3, None)]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_lab_predicts_before_measuring_and_ends_with_its_self_check(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    code = [c.source if c.cell_type == "code" else "" for c in nb.cells]
    preds = predictions(code)
    assert len(preds) >= 2, f"{path.name}: {len(preds)} predictions, at least 2 wanted"
    for name, asked, revealed in preds:
        assert revealed is not None, f"{path.name}: prediction {name} is never revealed"
        assert revealed > asked + 1, f"{path.name}: {name} is revealed with no measurement between"
    lab = path.name[:2]
    calls = [i for i, src in enumerate(code) if f'lab_self_check("{lab}")' in src]
    assert len(calls) == 1, f'{path.name}: wants exactly one lab_self_check("{lab}"), found {len(calls)}'
    assert calls[0] > max(revealed for _, _, revealed in preds), "the self-check comes after the measurements"
