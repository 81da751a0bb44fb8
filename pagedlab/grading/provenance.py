"""Is a learner's exercise object the kit's own implementation? (the grader's "reference hand-in" flag)

The kit ships its reference of every exercise: the library object (``registry.Exercise.reference``) and the
solution cell (``exercises/solutions/*.py``). A submission can hand either in instead of its own code, by
``use_reference``, by importing it or reaching it as a module attribute, by subclassing it, or by executing
the shipped solution file. :class:`Provenance` recognises each of these on the object itself, whatever route
produced it:

* **the same object** as a reference (``use_reference``, an import, a module attribute);
* **a subclass** of a reference class (methods inherited from the kit);
* **the same code**: every function of the reference (a class: every method, inherited ones included, found
  through the learner's class as Python finds them) has a function of that name in the learner's object with
  identical code - bytecode, constants (nested functions and comprehensions compared the same way), the names
  it uses and its local variable names; only the file name and line numbers may differ, so an ``exec`` of the
  shipped file or a pasted copy matches, and a learner's own code matches only if it is that code;
* **a wrapper**: a function of the learner's object whose globals or closure name a reference object;
* **reached at run time** (:class:`RunWatch`): whatever route a submission takes to the reference while its
  tests run (a kit function's ``__globals__`` or closure, ``__wrapped__``, the registry, a delegating class
  that fetches it when called), the reference's own code runs. CPython's profiler (C-level, ``cProfile``)
  records every code object that runs in the learner's process while it serves the driver; the driver asks
  after each exercise's tests whether a code object of that exercise's reference (its own functions and the
  functions nested in them) was among them. Not for exercises whose tests run in the learner's process
  (``runs_in_learner_process``: the kit's own drivers run there).

It runs in the learner's process (that is where the objects are), and the references' fingerprints are taken
before the learner's cells run. Like the run-time audit it reports to the grader and can be hidden from by a
submission that defeats the guard rails; it never raises points, it only flags (and withholds the exercise's
points when the instructor says so: ``pagedlab grade --reference-earns-points no``).
"""

from __future__ import annotations

import inspect
import types
from typing import Any

from pagedlab.grading import registry

__all__ = ["FLAG_PREFIX", "Provenance", "RunWatch", "code_key", "functions_of"]

#: Every flag of this module starts with this (the grader recognises reference hand-ins by it).
FLAG_PREFIX = "hands in the kit's reference implementation"


def code_key(code: types.CodeType) -> tuple[Any, ...]:
    """What makes two code objects "the same code": all but the file name, name and line numbers."""
    consts = tuple(
        code_key(c) if isinstance(c, types.CodeType) else (type(c).__name__, repr(c)) for c in code.co_consts
    )
    return (
        code.co_code,
        consts,
        code.co_names,
        code.co_varnames,
        code.co_freevars,
        code.co_cellvars,
        code.co_argcount,
        code.co_posonlyargcount,
        code.co_kwonlyargcount,
        code.co_flags & 0x3FF,  # the kind of function (generator, varargs ...), not the __future__ flags
    )


def _function(value: Any) -> types.FunctionType | None:
    """The Python function behind ``value`` (a method, static/class method, a wrapper, Triton's ``JITFunction``)."""
    for _ in range(8):
        if isinstance(value, types.FunctionType):
            inner = getattr(value, "__wrapped__", None)
            return _function(inner) or value if inner is not None and inner is not value else value
        if isinstance(value, (staticmethod, classmethod, types.MethodType)):
            value = value.__func__
        elif isinstance(getattr(value, "fn", None), types.FunctionType):  # triton.JITFunction
            value = value.fn
        else:
            return None
    return None


def functions_of(obj: Any) -> dict[str, types.FunctionType]:
    """name -> function of ``obj``: a function is ``{"": itself}``; a class, every Python function reachable
    through it as an attribute (its own, inherited ones, properties' getters and setters), object's excluded."""
    if not isinstance(obj, type):
        fn = _function(obj)
        return {"": fn} if fn is not None else {}
    out: dict[str, types.FunctionType] = {}
    for name in dir(obj):
        try:
            value = inspect.getattr_static(obj, name)
        except AttributeError:
            continue
        parts = [value.fget, value.fset, value.fdel] if isinstance(value, property) else [value]
        for i, part in enumerate(parts):
            fn = _function(part)
            if fn is not None:
                out[name if i == 0 else f"{name}.{('fget', 'fset', 'fdel')[i]}"] = fn
    return out


class Provenance:
    """The references of some exercises, fingerprinted now; :meth:`check` compares a learner's object to them.

    Args:
        exercise_ids: the exercises whose references to take (unknown ids are ignored).
    """

    def __init__(self, exercise_ids: Any) -> None:
        self._refs: dict[str, list[tuple[str, Any, dict[str, tuple[Any, ...]]]]] = {}
        for eid in exercise_ids:
            try:
                ex = registry.get(str(eid))
            except registry.UnknownExerciseError:
                continue
            found: list[tuple[str, Any]] = []
            for where, load in (
                ("library", ex.get_reference),
                ("solution file", lambda ex=ex: registry.snippet_object(ex.id)),
            ):
                try:
                    obj = load()
                except Exception:  # noqa: BLE001 - a reference that cannot load cannot be matched
                    continue
                if all(obj is not o for _w, o in found):
                    found.append((where, obj))
            self._refs[ex.id] = [
                (w, o, {k: code_key(f.__code__) for k, f in functions_of(o).items()}) for w, o in found
            ]

    def own_code(self, exercise_id: str) -> dict[int, str]:
        """``id(code object) -> label`` of every code object the references of ``exercise_id`` define: their own
        functions (a class: those defined in its body, not ones inherited from other kit classes) and the
        functions and comprehensions nested in them. The references hold the code objects alive."""
        out: dict[int, str] = {}
        for where, ref, _keys in self._refs.get(exercise_id, []):
            qual = str(getattr(ref, "__qualname__", ""))
            for name, fn in functions_of(ref).items():
                own = fn.__qualname__ == qual or fn.__qualname__.startswith(qual + ".")
                if qual and own and fn.__module__ == getattr(ref, "__module__", None):
                    label = f"{qual}.{name}" if name else qual
                    for code in _codes(fn.__code__):
                        out.setdefault(id(code), f"{label} ({where})")
        return out

    def check(self, exercise_id: str, obj: Any) -> str:
        """A flag (starting with :data:`FLAG_PREFIX`) when ``obj`` is a reference of ``exercise_id``, else ``""``."""
        try:
            return self._check(self._refs.get(exercise_id, []), obj)
        except Exception:  # noqa: BLE001 - an object whose attributes misbehave cannot be compared
            return ""

    @classmethod
    def _check(cls, refs: list[tuple[str, Any, dict[str, tuple[Any, ...]]]], obj: Any) -> str:
        for where, ref, _keys in refs:
            if obj is ref:
                return f"{FLAG_PREFIX}: the object is the kit's own ({where}; use_reference, an import or an attribute)"
            if isinstance(obj, type) and isinstance(ref, type) and issubclass(obj, ref):
                return f"{FLAG_PREFIX}: a subclass of the kit's {ref.__name__} ({where})"
        mine = {k: code_key(f.__code__) for k, f in functions_of(obj).items()}
        for where, _ref, keys in refs:
            if keys and all(mine.get(k) == v for k, v in keys.items()):
                return f"{FLAG_PREFIX}: its code is identical to the kit's ({where}: same bytecode and names)"
        return cls._wrapped(obj, refs)

    @staticmethod
    def _wrapped(obj: Any, refs: list[tuple[str, Any, dict[str, tuple[Any, ...]]]]) -> str:
        """A flag when a function of ``obj`` names a reference object in its globals or closure."""
        targets = {id(o): (w, o) for w, o, _k in refs}
        for name, fn in functions_of(obj).items():
            names = _all_names(fn.__code__)
            cells = [c.cell_contents for c in (fn.__closure__ or ()) if _has_contents(c)]
            values = [fn.__globals__.get(n) for n in names] + cells
            for v in values:
                if id(v) in targets:
                    where, ref = targets[id(v)]
                    label = getattr(ref, "__name__", "it")
                    return f"{FLAG_PREFIX}: {name or 'the function'} calls the kit's {label} ({where})"
        return ""


class RunWatch:
    """Which references' code ran in this (the learner's) process since the last look.

    Args:
        provenance: the references' fingerprints (:class:`Provenance`), taken before the learner's cells ran.
    """

    def __init__(self, provenance: Provenance) -> None:
        import cProfile  # lazy: only the learner's process of pagedlab grade profiles

        self._provenance = provenance
        self._profiler = cProfile.Profile()

    def start(self) -> None:
        """Record from now on (in this thread: the one that serves the driver)."""
        self._profiler.enable()

    def forget(self) -> None:
        """Forget what ran so far (the driver calls it before an exercise's tests)."""
        self._profiler.clear()

    def ran(self, exercise_id: str) -> str:
        """A flag (starting with :data:`FLAG_PREFIX`) when code of ``exercise_id``'s reference ran since the
        last :meth:`forget`, else ``""``."""
        codes = self._provenance.own_code(str(exercise_id))
        hits = sorted({codes[id(e.code)] for e in self._profiler.getstats() if id(e.code) in codes})
        if not hits:
            return ""
        return f"{FLAG_PREFIX}: its tests ran the kit's own code ({', '.join(hits[:3])}), reached at run time"


def _codes(code: types.CodeType) -> list[types.CodeType]:
    """``code`` and every code object nested in it (functions, lambdas, comprehensions)."""
    out = [code]
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            out += _codes(c)
    return out


def _all_names(code: types.CodeType) -> set[str]:
    out = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            out |= _all_names(c)
    return out


def _has_contents(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises
    except ValueError:
        return False
    return True
