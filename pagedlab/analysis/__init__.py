"""Helpers the lab notebooks use for their widgets and measurements (one module per lab).

They keep the notebooks short: replaying a trace step by step and drawing it (``lab01``),
timing the free queue (``lab02``), counting shared blocks on the real engine (``lab03``).
Nothing here is an exercise: the learner writes those, and these helpers never call the
learner's code, so a lab still runs to the end while an exercise is unfinished.
"""
from __future__ import annotations

from typing import Any

__all__ = ["yours_or_reference"]


def yours_or_reference(obj: Any, component: str, exercise_id: str | None = None) -> Any:
    """``obj`` if it passes its exercise's checks, else the kit's reference implementation.

    A measurement cell calls this so that it runs - on the learner's code when that is
    finished, on the reference otherwise - and says which one it used. Nothing is installed
    in the notebook's namespace (unlike ``use_reference``), so the learner's own name still
    refers to the learner's object.

    Args:
        obj: the learner's function or class.
        component: the ``use_reference`` component to fall back on (``"kv_bytes"``, ``"cow"`` ...).
        exercise_id: the exercise ``obj`` answers, when its name does not say.
    """
    from pagedlab.grading import check, use_reference

    name = getattr(obj, "__name__", component)
    res = check(obj, exercise_id, show=False, pictures=False)
    if res.passed:
        print(f"(using your {name})")
        return obj
    print(f"(your {name} does not pass its checks yet, so this cell uses the kit's reference; "
          f"finish the exercise and re-run to use yours)")
    ref = use_reference(exercise_id or component, namespace={}, quiet=True)
    if isinstance(ref, dict):
        ref = ref.get(name, next(iter(ref.values())))
    return ref
