"""Predict-then-run and self-check widgets (pagedlab.viz.quiz), headless: pure grading and kernel-side clicks."""

from __future__ import annotations

import re

import pytest

from pagedlab.analysis.self_checks import SELF_CHECKS, _rotate, lab_self_check
from pagedlab.viz import quiz
from pagedlab.viz.quiz import (
    Feedback,
    Question,
    feedback_html,
    grade_choice,
    grade_number,
)


def _hooks(html: str) -> dict[str, str]:
    return dict(re.findall(r'data-([a-z-]+)="([^"]*)"', html))


def test_grade_choice_right_wrong_and_unanswered() -> None:
    choices = ("flat", "10x", "100x")
    assert grade_choice(choices, None, 1, "why") == Feedback("waiting", None, "Pick an answer.")
    right = grade_choice(choices, 1, 1, "linear search")
    assert right.correct is True and right.state == "revealed" and "10x" in right.text and "linear" in right.text
    wrong = grade_choice(choices, 2, 1, "linear search")
    assert wrong.correct is False and "you chose 100x" in wrong.text and "it is 10x" in wrong.text
    with pytest.raises(ValueError, match="picked=3"):
        grade_choice(choices, 3, 1, "")
    with pytest.raises(ValueError, match="answer=-1"):
        grade_choice(choices, 0, -1, "")


@pytest.mark.parametrize(
    "guess, actual, ok, how",
    [
        (10.0, 10.0, True, "close enough"),
        (15.0, 10.0, True, "close enough"),  # boundary: |15 - 10| == 0.5 * 10
        (15.01, 10.0, False, "1.5x too high"),
        (2.5, 10.0, False, "4.0x too low"),
        (0.0, 10.0, False, "too low"),
        (-1.0, 2.0, False, "too low"),
    ],
)
def test_grade_number_tolerance_and_factor(guess: float, actual: float, ok: bool, how: str) -> None:
    fb = grade_number(guess, actual, rel_tol=0.5, unit="µs")
    assert fb.correct is ok and fb.state == "revealed"
    assert f"({how})" in fb.text and "µs" in fb.text


def test_grade_number_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="rel_tol"):
        grade_number(1, 1, rel_tol=-0.1)
    with pytest.raises(ValueError, match="finite"):
        grade_number(float("nan"), 1)


def test_feedback_html_carries_state_and_verdict_hooks() -> None:
    assert _hooks(feedback_html(Feedback("revealed", True, "a < b"))) == {"state": "revealed", "correct": "true"}
    assert _hooks(feedback_html(Feedback("waiting", None, "x"))) == {"state": "waiting", "correct": ""}
    assert "a &lt; b" in feedback_html(Feedback("revealed", False, "a < b"))


def test_question_validates_its_answer() -> None:
    with pytest.raises(ValueError, match="at least two"):
        Question("q", ("only",), 0, "")
    with pytest.raises(ValueError, match="answer 2"):
        Question("q", ("a", "b"), 2, "")


def test_choice_prediction_revealed_only_after_lock_in() -> None:
    p = quiz.predict("How does remove scale?", ["flat", "10x", "100x"])
    assert "pl-predict" in p._dom_classes
    result = p.reveal("10x", explain="it searches.", measured="measured 9.8x")  # Run All: before any click
    assert p.actual == 1 and _hooks(result.value)["state"] == "waiting"
    assert "10x" not in result.value  # nothing given away
    assert p.lock() is False and p.prediction is None  # nothing picked yet
    p.input.index = 2
    p.lock_button.click()
    assert p.prediction == 2 and p.input.disabled and p.lock_button.disabled
    for html in (p.feedback.value, p.result.value):
        assert _hooks(html) == {"state": "revealed", "correct": "false"}
        assert "it is 10x" in html and "it searches." in html and "measured 9.8x" in html
    p.input.index = 1  # the front end is disabled; a forced change does not re-grade
    p.lock()
    assert p.prediction == 2


def test_number_prediction_locked_then_revealed() -> None:
    p = quiz.predict("Blocks in the pool?", unit="blocks")
    p.input.value = "not a number"
    assert p.lock() is False and "Enter a prediction" in p.feedback.value
    p.input.value = "30,000"
    assert p.lock() is True and p.prediction == 30000.0
    assert _hooks(p.feedback.value)["state"] == "locked" and "30000 blocks" in p.feedback.value
    p.reveal(30720, explain="60 GiB / 2 MiB.")
    assert _hooks(p.result.value) == {"state": "revealed", "correct": "true"}
    assert "60 GiB / 2 MiB." in p.result.value


def test_prediction_reveal_rejects_mismatched_results() -> None:
    with pytest.raises(ValueError, match="not one of the choices"):
        quiz.predict("q", ["a", "b"]).reveal("c", "")
    with pytest.raises(ValueError, match="index"):
        quiz.predict("q", ["a", "b"]).reveal(2, "")
    with pytest.raises(ValueError, match="asks for a number"):
        quiz.predict("q").reveal("a", "")
    with pytest.raises(ValueError, match="two choices"):
        quiz.predict("q", ["a"])


def test_self_check_gives_instant_feedback_and_keeps_score() -> None:
    qs = [Question("Q1", ("x", "y"), 1, "e1"), Question("Q2", ("x", "y", "z"), 0, "e2")]
    sc = quiz.self_check(qs)
    assert "pl-selfcheck" in sc._dom_classes
    assert (_hooks(sc.score.value)["right"], _hooks(sc.score.value)["answered"]) == ("0", "0")
    sc.inputs[1].index = 2  # what a click does
    assert _hooks(sc.feedbacks[1].value)["correct"] == "false" and "e2" in sc.feedbacks[1].value
    assert _hooks(sc.feedbacks[0].value)["state"] == "waiting"
    assert sc.answer(0, 1).correct is True
    assert _hooks(sc.feedbacks[0].value)["correct"] == "true"
    hooks = _hooks(sc.score.value)
    assert (hooks["right"], hooks["answered"], hooks["total"]) == ("1", "2", "2")
    sc.answer(1, 0)  # a second click re-grades
    assert _hooks(sc.score.value)["right"] == "2"
    with pytest.raises(ValueError, match="at least one"):
        quiz.self_check([])


def test_rotate_keeps_each_answer_right() -> None:
    qs = [Question("a", ("r", "w1", "w2"), 0, ""), Question("b", ("w", "r", "w2"), 1, "")]
    out = _rotate(qs)
    assert [q.choices[q.answer] for q in out] == ["r", "r"]
    assert out[0] == qs[0] and out[1].choices == ("r", "w2", "w")


@pytest.mark.parametrize("lab", [f"{i:02d}" for i in range(10)])
def test_every_lab_has_five_to_eight_questions(lab: str) -> None:
    qs = SELF_CHECKS[lab]
    assert 5 <= len(qs) <= 8
    assert len({q.prompt for q in qs}) == len(qs)
    assert len({q.answer for q in qs}) >= 2  # the right answer is not always the same button
    assert lab_self_check(lab).results()[0].state == "waiting"
    with pytest.raises(KeyError, match="no self-check"):
        lab_self_check("99")


def test_closest_choice_by_ratio_and_by_difference() -> None:
    scaling = {"flat": 1.0, "linear": 10.0, "quadratic": 100.0}
    assert quiz.closest_choice(1.04, scaling) == "flat"
    assert quiz.closest_choice(22.4, scaling) == "linear"  # log distance: 22.4/10 < 100/22.4
    assert quiz.closest_choice(3.0, scaling) == "flat" and quiz.closest_choice(3.2, scaling) == "linear"
    assert quiz.closest_choice(40.0, scaling, log=False) == "linear"  # |40-10| < |40-100|
    with pytest.raises(ValueError, match="at least one"):
        quiz.closest_choice(1.0, {})
    with pytest.raises(ValueError, match="positive"):
        quiz.closest_choice(0.0, scaling)


_TOML = '[["01"]]\nprompt = "p"\nchoices = ["a", "b"]\nanswer = 1\nexplain = "e"\n'


def test_self_checks_load_from_toml() -> None:
    from pagedlab.analysis.self_checks import load_written

    assert load_written(_TOML) == {"01": [Question("p", ("a", "b"), 1, "e")]}
    assert load_written(_TOML + _TOML.replace('"p"', '"q"')) == {
        "01": [Question("p", ("a", "b"), 1, "e"), Question("q", ("a", "b"), 1, "e")]
    }


@pytest.mark.parametrize(
    "src,message",
    [
        ('[["01"]\nprompt = "p"', "self_checks.toml"),  # malformed TOML
        (_TOML.replace('explain = "e"\n', ""), "wants exactly the keys"),
        (_TOML + "hint = 'h'\n", "wants exactly the keys"),
        (_TOML.replace('["a", "b"]', "[1, 2]"), "list of strings"),
        (_TOML.replace("answer = 1", "answer = true"), "answer an int"),
        (_TOML.replace("answer = 1", "answer = 2"), r"lab 01, question 0: answer 2"),
        (_TOML.replace('["a", "b"]', '["a"]').replace("answer = 1", "answer = 0"), "two choices"),
        ('["01"]\nprompt = "p"\n', "array of tables"),
    ],
    ids=["toml", "missing-key", "extra-key", "choices-type", "answer-bool", "answer-range", "one-choice", "table"],
)
def test_self_checks_reject_a_malformed_question(src: str, message: str) -> None:
    from pagedlab.analysis.self_checks import load_written

    with pytest.raises(ValueError, match=message):
        load_written(src)
