"""Predict, then run; and an end-of-lab self-check. Core ipywidgets only, never blocking "Run All".

Two widgets:

* :func:`predict` asks a question *before* a measurement, as a choice or a number. The learner's
  answer is recorded when they press "Lock in" (it cannot be changed after). The measurement cell
  then calls :meth:`Prediction.reveal` with the measured result and a one-line explanation; the
  comparison appears (in both cells) once the learner has locked in, never before, so "Run All"
  runs straight through and gives nothing away.
* :func:`self_check` shows 5-8 multiple-choice questions, each with instant feedback on a click,
  and a running score.

The grading is done by pure functions (:func:`grade_choice`, :func:`grade_number`,
:func:`feedback_html`) that the tests call without a front end. Every feedback area is an HTML
widget whose value is ``<div class="pl-quiz-feedback" data-state=... data-correct=...>``, and the
widgets carry the CSS classes ``pl-predict``, ``pl-predict-lock``, ``pl-selfcheck``,
``pl-selfcheck-q`` and ``pl-selfcheck-score``: the stable hooks the browser test plays.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape

import ipywidgets as widgets

from pagedlab.i18n import tr

__all__ = [
    "Feedback",
    "Prediction",
    "Question",
    "SelfCheck",
    "closest_choice",
    "feedback_html",
    "grade_choice",
    "grade_number",
    "predict",
    "self_check",
]


@dataclass(frozen=True)
class Feedback:
    """The verdict on one answer: ``correct`` (None while nothing can be judged yet) and one line."""

    state: str  # "waiting" (no answer yet), "locked" (answer kept, no result yet), "revealed"
    correct: bool | None
    text: str


@dataclass(frozen=True)
class Question:
    """A multiple-choice question: ``choices[answer]`` is right, ``explain`` says why (one or two lines).

    Raises:
        ValueError: fewer than two choices, or ``answer`` is not an index of ``choices``.
    """

    prompt: str
    choices: tuple[str, ...]
    answer: int
    explain: str

    def __post_init__(self) -> None:
        if len(self.choices) < 2:
            raise ValueError(f"a question needs at least two choices, got {len(self.choices)}: {self.prompt!r}")
        if not 0 <= self.answer < len(self.choices):
            raise ValueError(
                f"answer {self.answer} is not an index of the {len(self.choices)} choices of {self.prompt!r}"
            )


def grade_choice(choices: Sequence[str], picked: int | None, answer: int, explain: str) -> Feedback:
    """Judge a choice: ``picked`` and ``answer`` are indices into ``choices`` (``picked=None``: no answer).

    Raises:
        ValueError: an index outside ``choices``.
    """
    for name, idx in (("picked", picked), ("answer", answer)):
        if idx is not None and not 0 <= idx < len(choices):
            raise ValueError(f"{name}={idx} is not an index of the {len(choices)} choices")
    if picked is None:
        return Feedback("waiting", None, "Pick an answer.")
    if picked == answer:
        return Feedback("revealed", True, f"Right: {choices[answer]}. {explain}")
    return Feedback("revealed", False, f"Not quite: you chose {choices[picked]}; it is {choices[answer]}. {explain}")


def grade_number(guess: float, actual: float, rel_tol: float = 0.5, unit: str = "") -> Feedback:
    """Judge a numeric guess: right when ``|guess - actual| <= rel_tol * |actual|``.

    The text says how far off the guess was, as a factor (``3.2x too high``).

    Raises:
        ValueError: ``rel_tol`` is negative, or a value is not finite.
    """
    if rel_tol < 0:
        raise ValueError(f"rel_tol must be >= 0, got {rel_tol}")
    if not (math.isfinite(guess) and math.isfinite(actual)):
        raise ValueError(f"guess and actual must be finite numbers, got {guess} and {actual}")
    u = f" {unit}" if unit else ""
    ok = abs(guess - actual) <= rel_tol * abs(actual)
    if ok:
        how = "close enough"
    elif guess == 0 or actual == 0 or (guess > 0) != (actual > 0):
        how = "too high" if guess > actual else "too low"
    else:
        factor = guess / actual
        how = f"{factor:.1f}x too high" if factor > 1 else f"{1 / factor:.1f}x too low"
    return Feedback("revealed", ok, f"You predicted {guess:g}{u}; measured {actual:.3g}{u} ({how}).")


def closest_choice(value: float, options: Mapping[str, float], log: bool = True) -> str:
    """The option whose value is nearest ``value`` (by ratio when ``log``): turns a measurement into a choice.

    Raises:
        ValueError: no options, or (with ``log``) a non-positive value.
    """
    if not options:
        raise ValueError("closest_choice needs at least one option")
    if log and (value <= 0 or any(v <= 0 for v in options.values())):
        raise ValueError(f"log distance needs positive values, got {value} and {dict(options)}")

    def dist(v: float) -> float:
        return abs(math.log(value / v)) if log else abs(value - v)

    return min(options, key=lambda k: dist(options[k]))


def feedback_html(fb: Feedback) -> str:
    """The feedback ``<div>`` with its ``data-state`` / ``data-correct`` hooks, coloured by verdict; its text in the
    learner's language (:func:`pagedlab.i18n.tr`; the :class:`Feedback` itself keeps the English)."""
    color = {True: "#1b7f3b", False: "#b3261e", None: "#5c6370"}[fb.correct]
    mark = {True: "✔ ", False: "✘ ", None: ""}[fb.correct]
    correct = "" if fb.correct is None else str(fb.correct).lower()
    return (
        f'<div class="pl-quiz-feedback" data-state="{fb.state}" data-correct="{correct}" '
        f'style="color:{color}">{mark}{escape(tr(fb.text))}</div>'
    )


def _parse_number(text: str) -> float | None:
    """``text`` as a finite float (commas, spaces and a trailing "x" or "%" allowed), else None."""
    try:
        value = float(text.strip().rstrip("x%").replace(",", "").replace(" ", ""))
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _buttons(choices: Sequence[str]) -> widgets.ToggleButtons:
    # the labels in the learner's language; answers are read by index, so the English choices stay the key
    tb = widgets.ToggleButtons(options=[tr(c) for c in choices], index=None, style={"button_width": "auto"})
    tb.add_class("pl-quiz-choices")
    return tb


class Prediction(widgets.VBox):
    """A question answered before a measurement; see :func:`predict`."""

    def __init__(self, question: str, choices: Sequence[str] | None, unit: str, rel_tol: float) -> None:
        if choices is not None and len(choices) < 2:
            raise ValueError(f"a prediction needs at least two choices (or None for a number), got {choices!r}")
        self.question, self.choices, self.unit, self.rel_tol = question, choices, unit, rel_tol
        self.prediction: int | float | None = None
        self.actual: int | float | None = None
        self.explain = self.measured = ""
        self.input: widgets.ToggleButtons | widgets.Text = (
            _buttons(choices)
            if choices is not None
            else widgets.Text(
                placeholder=tr(f"a number in {unit}" if unit else "a number"), layout=widgets.Layout(width="220px")
            )
        )
        self.input.add_class("pl-predict-input")
        # width "auto": ipywidgets gives a Button a fixed width and cuts longer text ("Lock in my predic...")
        self.lock_button = widgets.Button(
            description=tr("Lock in my prediction"), button_style="info", layout=widgets.Layout(width="auto")
        )
        self.lock_button.add_class("pl-predict-lock")
        self.lock_button.on_click(lambda _: self.lock())
        self.feedback = widgets.HTML(feedback_html(Feedback("waiting", None, "Predict, lock it in, then run on.")))
        self.result = widgets.HTML(self._result_text())  # shown again in the measurement cell
        super().__init__(
            [
                widgets.HTML(f"<b>{tr('Predict.')}</b> {escape(tr(question))}"),
                self.input,
                self.lock_button,
                self.feedback,
            ]
        )
        self.add_class("pl-predict")

    def lock(self) -> bool:
        """Record the current answer (once). Returns False, with a hint, when nothing is entered."""
        if self.prediction is not None:
            return True
        value: int | float | None
        if isinstance(self.input, widgets.ToggleButtons):
            value = self.input.index
        else:
            value = _parse_number(self.input.value)
        if value is None:
            self.feedback.value = feedback_html(
                Feedback("waiting", None, "Enter a prediction first (a choice, or a number such as 12 or 1e4).")
            )
            return False
        self.prediction = value
        self.input.disabled = self.lock_button.disabled = True
        self._update()
        return True

    def reveal(self, actual: float | str, explain: str, measured: str = "") -> widgets.HTML:
        """Give the measured result: a choice (its index or its text) or a number; returns the result view.

        Raises:
            ValueError: a choice that is not one of the choices, or a number for a choice question.
        """
        if self.choices is not None:
            if isinstance(actual, str):
                if actual not in self.choices:
                    raise ValueError(f"{actual!r} is not one of the choices {list(self.choices)}")
                actual = list(self.choices).index(actual)
            elif not isinstance(actual, int) or not 0 <= actual < len(self.choices):
                raise ValueError(f"actual must be a choice or its index, got {actual!r}")
        elif isinstance(actual, str):
            raise ValueError(f"this prediction asks for a number, got {actual!r}")
        self.actual, self.explain, self.measured = actual, explain, measured
        self._update()
        return self.result

    def verdict(self) -> Feedback:
        """The comparison as it stands (``waiting`` / ``locked`` / ``revealed``)."""
        if self.prediction is None:
            return Feedback("waiting", None, "Predict, lock it in, then run on.")
        if self.actual is None:
            return Feedback(
                "locked", None, f"Prediction recorded: {self._shown(self.prediction)}. Run the measurement below."
            )
        if self.choices is not None:
            fb = grade_choice(self.choices, int(self.prediction), int(self.actual), self.explain)
        else:
            fb = grade_number(float(self.prediction), float(self.actual), self.rel_tol, self.unit)
            fb = Feedback(fb.state, fb.correct, f"{fb.text} {self.explain}")
        return Feedback(fb.state, fb.correct, f"{fb.text} {self.measured}".strip())

    def _shown(self, value: float) -> str:
        return self.choices[int(value)] if self.choices is not None else f"{value:g} {self.unit}".strip()

    def _verdict_html(self) -> str:
        """:meth:`verdict` as shown: once revealed, its sentences (the grade, the explanation, the measurement)
        each in the learner's language (:func:`pagedlab.i18n.tr`), since the catalog holds them one by one."""
        fb = self.verdict()
        if fb.state != "revealed" or self.prediction is None or self.actual is None:
            return feedback_html(fb)
        if self.choices is not None:
            grade = grade_choice(self.choices, int(self.prediction), int(self.actual), "").text.strip()
        else:
            grade = grade_number(float(self.prediction), float(self.actual), self.rel_tol, self.unit).text
        text = " ".join(tr(t) for t in (grade, self.explain, self.measured) if t)
        return feedback_html(Feedback(fb.state, fb.correct, text))

    def _result_text(self) -> str:
        if self.prediction is None:
            return feedback_html(
                Feedback(
                    "waiting", None, "Make your prediction above (and lock it in) to compare it with this measurement."
                )
            )
        return self._verdict_html()

    def _update(self) -> None:
        self.feedback.value = self._verdict_html()
        self.result.value = self._result_text()


def predict(question: str, choices: Sequence[str] | None = None, *, unit: str = "", rel_tol: float = 0.5) -> Prediction:
    """Ask for a prediction before a measurement; call ``.reveal(...)`` on the result after it.

    Args:
        question: what to predict, one sentence.
        choices: the options (a choice question), or None for a number.
        unit: the number's unit, shown beside the box and in the verdict.
        rel_tol: a number within ``rel_tol * |measured|`` counts as right.

    Raises:
        ValueError: fewer than two choices.

    Example::

        p = predict("How does list.remove scale per tenfold pool?", ["flat", "10x", "100x"])
        ...  # the measurement
        p.reveal("10x", explain="it searches the list: linear", measured=f"measured {g:.1f}x")
    """
    return Prediction(question, None if choices is None else tuple(choices), unit, rel_tol)


class SelfCheck(widgets.VBox):
    """End-of-lab questions with instant feedback and a score; see :func:`self_check`."""

    def __init__(self, questions: Sequence[Question], title: str) -> None:
        if not questions:
            raise ValueError("a self-check needs at least one question")
        self.questions = list(questions)
        self.inputs = [_buttons(q.choices) for q in self.questions]
        self.feedbacks = [
            widgets.HTML(feedback_html(Feedback("waiting", None, "Pick an answer."))) for _ in self.questions
        ]
        self.score = widgets.HTML()
        self.score.add_class("pl-selfcheck-score")
        rows: list[widgets.Widget] = [widgets.HTML(f"<b>{escape(tr(title))}</b>")]
        for i, (q, tb, fb) in enumerate(zip(self.questions, self.inputs, self.feedbacks)):
            tb.observe(lambda _change, i=i: self._answer(i), names="index")
            box = widgets.VBox([widgets.HTML(f"{i + 1}. {escape(tr(q.prompt))}"), tb, fb])
            box.add_class("pl-selfcheck-q")
            rows.append(box)
        super().__init__(rows + [self.score])
        self.add_class("pl-selfcheck")
        self._score()

    def answer(self, i: int, picked: int) -> Feedback:
        """Pick choice ``picked`` of question ``i`` (what a click does); returns its feedback."""
        self.inputs[i].index = picked
        return self.results()[i]

    def results(self) -> list[Feedback]:
        """The feedback of every question, in order."""
        return [grade_choice(q.choices, tb.index, q.answer, q.explain) for q, tb in zip(self.questions, self.inputs)]

    def _answer(self, i: int) -> None:
        self.feedbacks[i].value = feedback_html(self.results()[i])
        self._score()

    def _score(self) -> None:
        res = self.results()
        right = sum(f.correct is True for f in res)
        answered = sum(f.correct is not None for f in res)
        self.score.value = (
            f'<div class="pl-quiz-score" data-right="{right}" data-answered="{answered}" '
            f'data-total="{len(res)}">{escape(tr(f"{right} of {len(res)} right ({answered} answered)"))}</div>'
        )


def self_check(questions: Sequence[Question], title: str = "Self-check") -> SelfCheck:
    """The end-of-lab self-check: one row of choice buttons per question, feedback on each click.

    Raises:
        ValueError: no questions.
    """
    return SelfCheck(questions, title)
