"""``use_reference(component)``: carry on with the kit's implementation when stuck on an exercise.

::

    from pagedlab.grading import use_reference
    use_reference("free_queue")        # FreeKVCacheBlockQueue now names the reference class
    refs = use_reference("cow")          # two exercises: {"fork": ..., "append_token": ...}

The reference objects are installed under their learner-facing names in the calling namespace
(the notebook's globals), so the following cells - and the next exercises - run on them. The
function also returns them: the object itself for a single exercise, else ``{name: object}``.

Components: every exercise id (``"02.free_queue"``), every learner-facing name
(``"FreeKVCacheBlockQueue"``), and the group names the exercises declare (``Exercise.components``:
``"cow"`` for 03.fork and 03.append_token, ``"scheduler"``, ``"radix"``...). :func:`components`
derives the table from the registry; ``print(components())`` shows it.

A submission that hands in a reference object is flagged by ``pagedlab grade``.
"""

from __future__ import annotations

import sys
from typing import Any

from pagedlab.grading import registry

__all__ = ["use_reference", "components", "yours_or_reference"]


def components() -> dict[str, list[str]]:
    """Component name -> exercise ids it installs."""
    out: dict[str, list[str]] = {}
    for ex in registry.all_exercises():
        for key in (ex.id, ex.name, *ex.components):
            out.setdefault(key, [])
            if ex.id not in out[key]:
                out[key].append(ex.id)
    return out


def use_reference(component: str, namespace: dict[str, Any] | None = None, *, quiet: bool = False) -> Any:
    """Install and return the reference implementation of ``component`` (see the module docstring).

    Args:
        component: an exercise id, a learner-facing name, or a group name.
        namespace: where to install (default: the caller's globals, i.e. the notebook).
        quiet: do not print what was installed.

    Raises:
        KeyError: unknown component (the message lists them).
    """
    table = components()
    if component not in table:
        groups = sorted(k for k in table if "." not in k)
        raise KeyError(f"unknown component {component!r}; use one of: {', '.join(groups)} (or an exercise id)")
    objs = {}
    for eid in table[component]:
        ex = registry.get(eid)
        objs[ex.name] = ex.get_reference()
    ns = namespace if namespace is not None else sys._getframe(1).f_globals
    ns.update(objs)
    if not quiet:
        print(
            f"Using the kit's reference {', '.join(objs)} ({component}). Your own version is no longer "
            "the one these names refer to; re-run your exercise cell to switch back."
        )
    return next(iter(objs.values())) if len(objs) == 1 else objs


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
    # lazy: start-up time (checking loads viz), kept out of the learner's process
    from pagedlab.grading.checking import check

    name = getattr(obj, "__name__", component)
    res = check(obj, exercise_id, show=False, pictures=False)
    if res.passed:
        print(f"(using your {name})")
        return obj
    print(
        f"(your {name} does not pass its checks yet, so this cell uses the kit's reference; "
        f"finish the exercise and re-run to use yours)"
    )
    ref = use_reference(exercise_id or component, namespace={}, quiet=True)
    if isinstance(ref, dict):
        ref = ref.get(name, next(iter(ref.values())))
    return ref
