"""The files ``pagedlab grade`` writes: grades.csv, feedback HTML, all_learners.json, Gradescope results, logs.

Learner-facing files (feedback, gradescope/*/results.json) show hidden tests only as "hidden test N:
passed/failed" - never their title, message, picture or the learner's output while they ran.
Everything that comes from a learner's process is escaped before it goes into HTML.
"""

from __future__ import annotations

import contextlib
import csv
import html
import io
import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pagedlab.grading import registry
from pagedlab.grading.checking import MARK, WORD
from pagedlab.grading.text import printable, printable_data
from pagedlab.viz.pictures import side_by_side

__all__ = ["COMBINED_NAME", "feedback_html", "gradescope_dict", "split_points", "write_all", "write_text_atomic"]

#: Every learner's results in one file (a dict learner -> Gradescope-style dict; not itself a
#: Gradescope ``results.json``, hence the name).
COMBINED_NAME = "all_learners.json"


def _test_name(ex_id: str, o: Any, hidden_index: dict[int, int]) -> str:
    if o.hidden:
        return f"{ex_id}: hidden test {hidden_index[id(o)]}"
    return f"{ex_id}: {o.title}"


def _hidden_numbers(er: Any) -> dict[int, int]:
    out, k = {}, 0
    for o in er.outcomes:
        if o.hidden:
            k += 1
            out[id(o)] = k
    return out


def split_points(points: float, n: int) -> list[float]:
    """``points`` split into ``n`` shares rounded to 4 decimals whose sum is ``points`` to 1e-9.

    The last share takes the rounding remainder (1 point over 3 tests: 0.3333, 0.3333, 0.3334),
    so a Gradescope total equals the sum of its tests' ``max_score``.

    Raises:
        ValueError: ``n`` < 1 or ``points`` < 0.
    """
    if n < 1 or points < 0:
        raise ValueError(f"cannot split {points} points into {n} tests")
    share = round(points / n, 4)
    return [share] * (n - 1) + [round(points - share * (n - 1), 4)]


def _test_output(o: Any) -> str:
    """What a learner reads for one test: hidden tests say passed/failed and nothing else."""
    if o.hidden:
        return "hidden test: " + ("passed" if o.passed else "failed")
    return str(WORD.get(o.status, o.status)) + ("\n" + o.message if o.message else "")


def _exercise_tests(eid: str, er: Any) -> list[dict[str, Any]]:
    """Gradescope ``tests`` entries of one exercise (max_scores sum to its points)."""
    if not er.outcomes:
        return [
            {
                "name": f"{eid}",
                "score": 0.0,
                "max_score": er.max_score,
                "status": "failed",
                "output": er.error or "missing",
                "visibility": "visible",
            }
        ]
    hidden_no = _hidden_numbers(er)
    tests = []
    withheld = getattr(er, "withheld", "")
    for o, share in zip(er.outcomes, split_points(er.max_score, len(er.outcomes))):
        ok = (o.passed or o.status == "internal") and not withheld  # a test broken on the reference costs nobody
        # --scoring all-or-nothing: a passed test earns its share only when the exercise earned its points
        earned = ok and er.score > 0
        note = f"\n{withheld}" if withheld else ""
        if ok and not earned:
            note += "\n(all or nothing: this exercise's points need every one of its tests to pass)"
        tests.append(
            {
                "name": _test_name(eid, o, hidden_no),
                "score": share if earned else 0.0,
                "max_score": share,
                "status": "passed" if ok else "failed",
                "output": _test_output(o) + note,
                "visibility": "after_published" if o.hidden else "visible",
            }
        )
    return tests


def _flags(res: Any) -> dict[str, list[str]]:
    """exercise id -> its flags (for the instructor), only exercises with some."""
    return {eid: list(er.flags) for eid, er in sorted(res.exercises.items()) if er.flags}


def _hidden_why(res: Any) -> list[tuple[str, str]]:
    """(exercise id, why one of its hidden tests failed), for the instructor only (``ExerciseResult.hidden_why``)."""
    return [(eid, why) for eid, er in sorted(res.exercises.items()) for why in getattr(er, "hidden_why", [])]


def _instructor_test(res: Any) -> list[dict[str, Any]]:
    """A 0-point test that only instructors see on Gradescope (visibility "hidden"): the flags, and the learner
    process's exit status and last output (none when there is nothing to say). The output is there even when
    all went well: it holds what the report keeps from learners (the end-to-end run's own error text)."""
    flags = _flags(res)
    lines = [f"{eid}: {f}" for eid, fl in flags.items() for f in fl] + [
        f"{eid}: {why}" for eid, why in _hidden_why(res)
    ]
    if not lines and res.status == "ok" and not str(getattr(res, "log", "") or "").strip():
        return []
    text = "\n".join([f"status: {res.status}", *lines])
    if getattr(res, "log", ""):
        text += "\n--- the learner process's output (end) ---\n" + res.log[-3000:]
    return [
        {
            "name": "instructor: flags and log",
            "score": 0.0,
            "max_score": 0.0,
            "status": "passed",
            "output": text[:20000],
            "visibility": "hidden",
        }
    ]


def _e2e_test(res: Any) -> list[dict[str, Any]]:
    """The end-to-end test as a Gradescope test (none when it did not run; max_score = its points)."""
    e2e = getattr(res, "e2e", None)
    if e2e is None or e2e.status == "not run":
        return []
    return [
        {
            "name": "end-to-end: your parts in the engine",
            "score": e2e.score,
            "max_score": e2e.points,
            "status": "passed" if e2e.passed else "failed",
            "output": "\n".join([e2e.line, *e2e.details]),
            "visibility": "visible",
        }
    ]


def gradescope_dict(res: Any) -> dict[str, Any]:
    """One learner's results in the Gradescope autograder ``results.json`` format.

    ``score`` is the sum of the tests' scores (so it always agrees with them); ``output`` holds
    the messages about the submission's files (never text from a hidden test).
    """
    tests = [t for eid, er in sorted(res.exercises.items()) for t in _exercise_tests(eid, er)] + _e2e_test(res)
    tests += _instructor_test(res)
    return {
        "score": round(sum(t["score"] for t in tests), 4),
        "output": "; ".join(res.messages)[:5000],
        "stdout_visibility": "hidden",
        "tests": tests,
        "extra_data": {
            "learner": res.learner.name,
            "student_id": getattr(res.learner, "student_id", ""),
            "file": res.learner.source,
            "status": res.status,
            "e2e": res.e2e.line if getattr(res, "e2e", None) is not None else "",
            "reference": sorted(eid for eid, er in res.exercises.items() if getattr(er, "reference", "")),
            "flags": _flags(res),
        },
    }


def feedback_html(res: Any) -> str:  # noqa: C901 - one section per result kind
    """A self-contained HTML page of one learner's results."""
    e = html.escape
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>pagedlab feedback - {e(res.learner.name)}</title>",
        "<style>body{font-family:system-ui,Arial,sans-serif;max-width:1000px;margin:2em auto;color:#1f2430}"
        "pre{white-space:pre-wrap;background:#f6f7f9;padding:.6em;border-radius:6px}"
        "li{margin:.2em 0}.ex{border-top:1px solid #ddd;margin-top:1.2em;padding-top:.6em}"
        ".flag{color:#a15c00}</style></head><body>",
        f"<h1>Feedback for {e(res.learner.name)}</h1>",
        f"<p><b>Score: {res.score:g} / {res.max_score:g}</b>"
        + (f" &nbsp; (status: {e(res.status)})" if res.status != "ok" else "")
        + "</p>",
    ]
    if res.messages:
        parts.append("<ul>" + "".join(f"<li>{e(m)}</li>" for m in res.messages) + "</ul>")
    if getattr(res, "e2e", None) is not None:
        r = res.e2e
        mark = {"passed": "✅", "failed": "❌"}.get(r.status, "•")
        pts = f" ({r.score:g} / {r.points:g})" if r.points else ""
        parts.append(f"<p data-e2e='{e(r.status)}'>{mark} {e(r.line)}{pts}</p>")
        if r.details:
            parts.append("<ul>" + "".join(f"<li>{e(d)}</li>" for d in r.details) + "</ul>")
    for eid, er in sorted(res.exercises.items()):
        try:
            ex = registry.get(eid)
            title = f"{eid}: <code>{e(ex.name)}</code> - {e(ex.summary)}"
        except registry.UnknownExerciseError:
            title = e(eid)
        parts.append(
            f"<div class='ex' data-exercise='{e(eid)}'><h2>{title}</h2>"
            f"<p>{er.score:g} / {er.max_score:g}" + (f" &nbsp; from {e(er.notebook)}" if er.notebook else "") + "</p>"
        )
        for f in er.flags:
            parts.append(f"<p class='flag'>⚠ {e(f)}</p>")
        if getattr(er, "withheld", ""):
            parts.append(f"<p class='flag' data-withheld='1'>⚠ {e(er.withheld)}</p>")
        for note in er.notes:
            parts.append(f"<p>{e(note)}</p>")
        if not er.found:
            parts.append(f"<p>❌ {e(er.error or 'missing')}</p></div>")
            continue
        hidden_no = _hidden_numbers(er)
        first = next((o for o in er.outcomes if not o.passed and not o.hidden), None)
        parts.append("<ul style='list-style:none;padding-left:.5em'>")
        for o in er.outcomes:
            name = f"hidden test {hidden_no[id(o)]}" if o.hidden else e(o.title)
            why = "failed" if o.hidden else WORD.get(o.status, o.status)
            word = "" if o.passed else f" <span style='color:#888'>({e(why)})</span>"
            status = ("passed" if o.passed else "failed") if o.hidden else o.status
            parts.append(f"<li data-status='{e(status)}'>{MARK.get(status, '❌')} {name}{word}")
            if first is not None and o is first and o.message:
                parts.append(f"<pre>{e(o.message)}</pre>")
                parts.append(side_by_side(o.picture, o.expected_picture))
            parts.append("</li>")
        parts.append("</ul></div>")
    parts.append(
        "<p style='color:#888'>Generated by <code>pagedlab grade</code>. Hidden tests show only whether "
        "they passed.</p></body></html>"
    )
    return "".join(parts)


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically: a temporary file in the same folder, then ``os.replace``
    (a reader sees the old file or the new one, never a part; a stopped run leaves no half-written
    file). Characters UTF-8 cannot hold (lone surrogates) are written as their escapes."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace", newline="") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise


def _json(data: Any) -> str:
    return json.dumps(printable_data(data), indent=1, ensure_ascii=False)


def _file_name(name: str) -> str:
    """A learner's name as a file name: printable, no path separator."""
    return printable(name).replace("/", "_").replace("\\", "_") or "_"


def _csv_text(header: list[str], rows: list[list[str]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(header)
    w.writerows([[printable(c) for c in row] for row in rows])
    return buf.getvalue()


def _log_text(lr: Any, info: dict[str, Any], r: Any) -> str:
    return (
        f"learner: {lr.name}\nsource: {lr.source}\nnotebooks: {[str(p) for p in lr.notebooks]}\n"
        f"exit status: {info.get('rc')}  timed out: {info.get('timed_out')}  seconds: {info.get('seconds')}\n"
        f"status: {r.status}\n"
        + "".join(f"{eid}: {why}\n" for eid, why in _hidden_why(r))
        + f"--- output of the learner process ---\n{info.get('stdout', '')}\n"
    )


def _write_learner(out_dir: Path, r: Any, lr: Any, info: dict[str, Any]) -> None:
    """One learner's gradescope/, feedback/ and logs/ files; a failure is written in their place."""
    name = _file_name(r.learner.name)
    for path, make in (
        (out_dir / "gradescope" / name / "results.json", lambda: _json(gradescope_dict(r))),
        (out_dir / "feedback" / f"{name}.html", lambda: printable(feedback_html(r))),
        (out_dir / "logs" / f"{_file_name(lr.name)}.txt", lambda: printable(_log_text(lr, info, r))),
    ):
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            text = make()
        except Exception as e:  # noqa: BLE001 - one learner's odd output must not stop the others' files
            text = f"pagedlab grade could not write this file ({type(e).__name__}: {e}); see grades.csv"
        write_text_atomic(path, text)


def write_all(out_dir: Path, results: Sequence[Any], exercise_ids: list[str], runs: Sequence[Any]) -> None:
    """Write grades.csv, all_learners.json, gradescope/, feedback/ and logs/ under ``out_dir``.

    Every file is written atomically (:func:`write_text_atomic`) and every piece of learner text
    through :func:`~pagedlab.grading.text.printable`: no learner's output can stop another's.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "feedback").mkdir(exist_ok=True)
    (out_dir / "logs").mkdir(exist_ok=True)
    header = (
        ["learner", "student_id", "file", "score", "max_score", "percent", "status"]
        + list(exercise_ids)
        + ["end-to-end", "reference", "flags", "messages", "hidden_failures"]
    )
    rows = []
    for r in results:
        pct = 100.0 * r.score / r.max_score if r.max_score else 0.0
        flags = sorted({fl for er in r.exercises.values() for fl in er.flags})
        msgs = list(r.messages) + [f"{eid}: {er.error}" for eid, er in sorted(r.exercises.items()) if er.error]
        reference = " ".join(sorted(eid for eid, er in r.exercises.items() if getattr(er, "reference", "")))
        rows.append(
            [r.learner.name, getattr(r.learner, "student_id", ""), str(r.learner.source)]
            + [f"{r.score:g}", f"{r.max_score:g}", f"{pct:.1f}", r.status]
            + [f"{r.exercises[eid].score:g}" if eid in r.exercises else "0" for eid in exercise_ids]
            + [r.e2e.line if getattr(r, "e2e", None) is not None else ""]
            + [reference, "; ".join(flags), " | ".join(m.replace("\n", " ") for m in msgs)[:2000]]
            + [" | ".join(f"{eid}: {why}".replace("\n", " ") for eid, why in _hidden_why(r))[:4000]]
        )
    write_text_atomic(out_dir / "grades.csv", _csv_text(header, rows))
    combined = {
        "generated_by": "pagedlab grade",
        "exercises": list(exercise_ids),
        "learners": {r.learner.name: gradescope_dict(r) for r in results},
    }
    write_text_atomic(out_dir / COMBINED_NAME, _json(combined))
    for (lr, _lines, info), r in zip(runs, results):
        _write_learner(out_dir, r, lr, info)
