"""Run one test driver on one object, under a time limit, and return its transcript."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

from pagedlab.grading.recorder import Recorder, time_limit_entry

__all__ = ["TimeLimitExceeded", "reference_transcript", "run_driver", "time_limit"]


class TimeLimitExceeded(BaseException):
    """Raised inside a driver that ran past its time limit (a BaseException, so that a learner's
    ``except Exception:`` cannot swallow it)."""


def _can_alarm() -> bool:
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise :class:`TimeLimitExceeded` in this thread after ``seconds`` (Unix main thread only;
    elsewhere no limit). The alarm repeats every 0.5 s until the block exits, so a bare
    ``except:`` that swallows it once does not defeat it."""
    if not _can_alarm() or seconds is None or seconds <= 0:
        yield
        return

    def on_alarm(signum: int, frame: Any) -> None:
        raise TimeLimitExceeded()

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds, 0.5)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0, 0)
        signal.signal(signal.SIGALRM, old)


def run_driver(
    test: Any, obj: Any, timeout: float | None = None, plain: bool = False, catch_all: bool = False
) -> list[dict[str, Any]]:
    """Run ``test.drive(obj, rec)``; exceptions from the code under test end the transcript.

    Args:
        test: a :class:`~pagedlab.grading.registry.Test`.
        obj: the learner's object or the reference.
        timeout: seconds (default ``test.timeout``).
        plain: drop callable hints (what a learner process sends back).
        catch_all: also record ``KeyboardInterrupt`` (in the grader's learner process nobody presses
            Ctrl-C, so it can only come from the learner's code); in a notebook it stops check().
    """
    rec = Recorder()
    limit = test.timeout if timeout is None else timeout
    try:
        with time_limit(limit):
            try:
                test.drive(obj, rec)
            except TimeLimitExceeded:
                raise
            except KeyboardInterrupt as e:
                if not catch_all:
                    raise
                rec.record_exception(e)
            except BaseException as e:  # noqa: BLE001 - SystemExit from learner code included
                rec.record_exception(e)
            else:
                rec.finish()
    except TimeLimitExceeded:
        rec.entries.append(time_limit_entry(limit))
    return rec.plain_entries() if plain else rec.entries


_ref_cache: dict[tuple[str, str, bool], list[dict[str, Any]]] = {}
_ref_lock = threading.Lock()


def reference_transcript(exercise: Any, test: Any) -> list[dict[str, Any]]:
    """The reference's transcript of ``test`` (computed once per process)."""
    key = (exercise.id, test.title, test.hidden)
    with _ref_lock:
        if key not in _ref_cache:
            _ref_cache[key] = run_driver(test, exercise.get_reference(), timeout=max(60.0, test.timeout))
        return _ref_cache[key]


def forget_hidden_references() -> None:
    """Drop cached reference transcripts of hidden tests (after :func:`registry.unload_hidden_tests`)."""
    with _ref_lock:
        for key in [k for k in _ref_cache if k[2]]:
            del _ref_cache[key]
