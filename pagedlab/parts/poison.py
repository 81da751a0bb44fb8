"""Poisoned allocations: memory a learner's code allocates and never writes holds garbage that shows, every time.

``torch.empty`` returns whatever the allocator hands back: often zeros (fresh pages), sometimes old values. A
tile built with ``torch.empty`` whose masked rows are never written, or "zeroed" by multiplying with a 0/1
mask, therefore passes most runs and fails some (16 of 20 in one measurement). Under
:func:`poisoned_allocations` every uninitialised allocation is filled deterministically instead: NaN for
floating-point tensors (``0 * NaN`` is NaN, so multiplying by a mask does not hide it), the dtype's largest
value for integers (an index out of any range), True for bools - so such code fails on every run.

The exercises that take torch tensors call the learner's code under it (``check()`` in the notebook); in
``pagedlab grade`` the learner's process installs it for good (:func:`install`) before any learner cell runs;
in the engine, lab 08's PyTorch tile load runs under it behind its guard (``parts/kernel.py``).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["install", "poison", "poisoned_allocations", "uninstall"]

#: (owner, attribute) of every torch allocation that does not initialise its memory.
_ALLOCATIONS = (
    ("torch", "empty"),
    ("torch", "empty_like"),
    ("torch", "empty_strided"),
    ("torch.Tensor", "new_empty"),
    ("torch.Tensor", "new_empty_strided"),
)
_ORIGINAL = "__pagedlab_unpoisoned__"


def poison(t: Any) -> Any:
    """Fill tensor ``t`` in place with this module's garbage for its dtype; return it."""
    import torch  # lazy: start-up time (torch takes seconds to import)

    if not isinstance(t, torch.Tensor) or t.device.type == "meta":
        return t
    if t.is_floating_point() or t.is_complex():
        t.fill_(float("nan"))
    elif t.dtype == torch.bool:
        t.fill_(True)
    else:
        t.fill_(torch.iinfo(t.dtype).max)
    return t


def _poisoning(alloc: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(alloc)
    def poisoned(*args: Any, **kwargs: Any) -> Any:
        return poison(alloc(*args, **kwargs))

    setattr(poisoned, _ORIGINAL, alloc)
    return poisoned


def _owners() -> list[tuple[Any, str]]:
    import torch  # lazy: start-up time (torch takes seconds to import)

    return [(torch if owner == "torch" else torch.Tensor, name) for owner, name in _ALLOCATIONS]


def install() -> bool:
    """Poison every uninitialised torch allocation from now on; False when it already was."""
    done = False
    for owner, name in _owners():
        alloc = getattr(owner, name)
        if not hasattr(alloc, _ORIGINAL):
            setattr(owner, name, _poisoning(alloc))
            done = True
    return done


def uninstall() -> None:
    """Give torch its own allocations back."""
    for owner, name in _owners():
        alloc = getattr(owner, name)
        if hasattr(alloc, _ORIGINAL):
            setattr(owner, name, getattr(alloc, _ORIGINAL))


@contextlib.contextmanager
def poisoned_allocations() -> Iterator[None]:
    """Poison every uninitialised torch allocation inside the ``with`` block (nested blocks and an
    :func:`install` already done are left as they were)."""
    installed = install()
    try:
        yield
    finally:
        if installed:
            uninstall()
