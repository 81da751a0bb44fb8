"""The end-of-lab self-check questions, by lab (``"00"`` ... ``"09"``), for :func:`pagedlab.viz.quiz.self_check`.

Drawn from each lab and from the course's source lectures (the self-test lists that close each
section). Claims about vLLM describe vLLM 0.11.0 (v1), about SGLang 0.4.6/0.5.x, unless a question
names another version. Each lab's notebook ends with ``lab_self_check("NN")``. The questions are
data: ``self_checks.toml`` next to this module (shipped in the wheel), read once at import.
"""

from __future__ import annotations

import tomllib
from importlib.resources import files

from pagedlab.i18n import tr
from pagedlab.viz.quiz import Question, SelfCheck, self_check

__all__ = ["SELF_CHECKS", "lab_self_check"]

#: The questions as written, one TOML table array per lab, shipped next to this module.
SOURCE = "self_checks.toml"


def _rotate(questions: list[Question]) -> list[Question]:
    """Question ``i`` with its choices rotated left by ``i``, so the right answer moves between buttons."""
    out = []
    for i, q in enumerate(questions):
        k = i % len(q.choices)
        out.append(Question(q.prompt, q.choices[k:] + q.choices[:k], (q.answer - k) % len(q.choices), q.explain))
    return out


def _question(entry: object, where: str) -> Question:
    """One ``[["NN"]]`` table as a :class:`Question`.

    Raises:
        ValueError: a missing or extra key, a value of the wrong type, or what :class:`Question` rejects.
    """
    keys = ("prompt", "choices", "answer", "explain")
    if not isinstance(entry, dict) or set(entry) != set(keys):
        raise ValueError(f"{where}: wants exactly the keys {', '.join(keys)}; got {entry!r}")
    prompt, choices, answer, explain = (entry[k] for k in keys)
    if not (isinstance(choices, list) and all(isinstance(c, str) for c in choices)):
        raise ValueError(f"{where}: choices must be a list of strings, got {choices!r}")
    if not (isinstance(prompt, str) and isinstance(explain, str) and type(answer) is int):
        raise ValueError(f"{where}: prompt and explain must be strings and answer an int")
    try:
        return Question(prompt, tuple(choices), answer, explain)
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from e


def load_written(text: str) -> dict[str, list[Question]]:
    """The questions of a self-check TOML text, by lab, in file order (not rotated).

    Each lab is an array of tables ``[["NN"]]`` with ``prompt`` (str), ``choices`` (list of str),
    ``answer`` (index into ``choices``) and ``explain`` (str).

    Raises:
        ValueError: malformed TOML, a lab that is not an array of tables, or a malformed question.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"{SOURCE}: {e}") from e
    out: dict[str, list[Question]] = {}
    for lab, entries in data.items():
        if not isinstance(entries, list):
            raise ValueError(f'{SOURCE}: lab {lab} must be an array of tables [["{lab}"]], got {entries!r}')
        out[lab] = [_question(e, f"{SOURCE}, lab {lab}, question {n}") for n, e in enumerate(entries)]
    return out


_WRITTEN: dict[str, list[Question]] = load_written((files("pagedlab.analysis") / SOURCE).read_text(encoding="utf-8"))

SELF_CHECKS: dict[str, list[Question]] = {lab: _rotate(qs) for lab, qs in _WRITTEN.items()}


def lab_self_check(lab: str) -> SelfCheck:
    """The self-check widget of lab ``lab`` (``"00"`` ... ``"09"``).

    Raises:
        KeyError: no questions for that lab.
    """
    if lab not in SELF_CHECKS:
        raise KeyError(f"no self-check for lab {lab!r}; labs with one: {sorted(SELF_CHECKS)}")
    ctx = f"self-check {lab}"  # in the learner's language (pagedlab.i18n); the rotation is the English one
    questions = [
        Question(
            tr(q.prompt, context=ctx),
            tuple(tr(c, context=ctx) for c in q.choices),
            q.answer,
            tr(q.explain, context=ctx),
        )
        for q in SELF_CHECKS[lab]
    ]
    return self_check(questions, title=tr(f"Self-check, lab {lab}: click an answer to see if it is right"))
