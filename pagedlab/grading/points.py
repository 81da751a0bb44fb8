"""Per-exercise points chosen by the instructor (``--points``), for ``pagedlab grade``, the
Gradescope bundle and ``pagedlab labs build --format nbgrader|otter``.

Each exercise is worth its registry ``points`` (1) unless the instructor says otherwise, with
``--points`` given once or more, each value either

* ``ID=P`` (or several, comma-separated: ``02.free_queue=3,02.slot_mapping=2``), or
* a TOML file: ``"02.free_queue" = 3`` lines at the top level, or under a ``[points]`` table.

Later values win. An unknown exercise id, a negative, infinite or non-numeric P, or an unreadable
file is a :class:`PointsError` naming it.

How an exercise earns its points (``--scoring``, the same rule on every route):

* ``all-or-nothing`` (the default, as nbgrader and otter grade natively): all of its points when
  every one of its tests passed, else 0;
* ``partial``: its points split evenly across its tests, each passed test earning its share.
"""

from __future__ import annotations

import argparse
import math
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pagedlab.errors import PagedLabError
from pagedlab.grading import registry

__all__ = [
    "DEFAULT_SCORING",
    "SCORING",
    "PointsError",
    "add_points_argument",
    "add_scoring_argument",
    "exercise_score",
    "parse_points",
    "parse_scoring",
    "points_of",
]

#: ``--scoring`` values (see the module docstring); the default is the first.
SCORING = ("all-or-nothing", "partial")
DEFAULT_SCORING = SCORING[0]


class PointsError(PagedLabError, ValueError):
    """A ``--points`` value that cannot be used (the message names it)."""


def _number(eid: str, value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise PointsError(f"{where}: points of {eid} must be a number, got {value!r}")
    try:
        p = float(value)
    except ValueError:
        raise PointsError(f"{where}: points of {eid} must be a number, got {value!r}") from None
    if not math.isfinite(p) or p < 0:
        raise PointsError(f"{where}: points of {eid} must be a finite number >= 0, got {value!r}")
    return p


def _from_file(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise PointsError(f"--points {path}: cannot read it ({e.strerror or e})") from e
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise PointsError(f"--points {path}: not a TOML file ({e})") from e
    table = data.get("points", data) if isinstance(data.get("points"), dict) else data
    return dict(table)


def _pairs(spec: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        eid, sep, value = item.partition("=")
        if not sep or not eid.strip():
            raise PointsError(f"--points {spec!r}: expected ID=P (e.g. 02.free_queue=3) or a .toml file")
        out[eid.strip()] = value.strip()
    return out


def parse_points(specs: Iterable[str] | None) -> dict[str, float]:
    """Exercise id -> points from ``--points`` values (see the module docstring); {} for none.

    Raises:
        PointsError: an unknown exercise id, a bad number, an unreadable or invalid file.
    """
    known = {ex.id for ex in registry.all_exercises()}
    out: dict[str, float] = {}
    for spec in specs or ():
        path = Path(spec)
        is_file = "=" not in spec or path.suffix == ".toml"
        raw = _from_file(path) if is_file else _pairs(spec)
        for eid, value in raw.items():
            if eid not in known:
                raise PointsError(
                    f"--points {spec}: {eid!r} is not an exercise of this course (exercises: {', '.join(sorted(known))})"
                )
            out[eid] = _number(eid, value, f"--points {spec}")
    return out


def points_of(exercise_id: str, points: Mapping[str, float] | None = None) -> float:
    """The points ``exercise_id`` is worth: the instructor's (``points``) or the registry's."""
    if points and exercise_id in points:
        return float(points[exercise_id])

    return float(registry.get(exercise_id).points)


def add_points_argument(parser: argparse.ArgumentParser) -> None:
    """The ``--points`` option (repeatable; read it with :func:`parse_points`)."""
    parser.add_argument(
        "--points",
        metavar="ID=P|FILE.toml",
        action="append",
        default=None,
        help="points of an exercise (default 1 each): ID=P, comma-separated pairs, or a TOML file "
        '("02.free_queue" = 3 lines); repeatable, later values win',
    )


def parse_scoring(value: str | None) -> str:
    """``value`` checked as a ``--scoring`` value (None: :data:`DEFAULT_SCORING`).

    Raises:
        PointsError: a value not in :data:`SCORING`.
    """
    if value is None:
        return DEFAULT_SCORING
    if value not in SCORING:
        raise PointsError(f"--scoring {value!r}: expected one of {', '.join(SCORING)}")
    return value


def exercise_score(max_score: float, earned: list[bool], scoring: str = DEFAULT_SCORING) -> float:
    """What an exercise worth ``max_score`` scores when its tests earned ``earned`` (one bool per test).

    ``all-or-nothing``: ``max_score`` when every test earned (and there is one), else 0; ``partial``:
    ``max_score`` times the share of tests that earned. Rounded to 4 decimals.

    Raises:
        PointsError: an unknown ``scoring``.
    """
    parse_scoring(scoring)
    if not earned:
        return 0.0
    if scoring == "partial":
        return round(max_score * sum(earned) / len(earned), 4)
    return round(max_score, 4) if all(earned) else 0.0


def add_scoring_argument(parser: argparse.ArgumentParser) -> None:
    """The ``--scoring`` option (read it with :func:`parse_scoring`)."""
    parser.add_argument(
        "--scoring",
        choices=SCORING,
        default=DEFAULT_SCORING,
        help="how an exercise earns its points: all-or-nothing (default; as nbgrader and otter) gives them "
        "only when every test passed, partial splits them evenly across its tests",
    )
