"""``Guard``: calls one learner part under a time limit and turns every misbehaviour into a
:class:`~pagedlab.errors.ComponentError` naming the slot, the engine step and the invariant."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pagedlab.errors import ComponentError

__all__ = ["ContractError", "Guard"]


class ContractError(Exception):
    """A part's result broke its contract (``pagedlab.parts.contracts.Returns``), seen where no guard is at hand
    (a bridge around the part): :meth:`Guard.call` reports its message as the broken invariant."""


class _TimeUp(BaseException):
    """Raised by the alarm handler inside a learner's part that ran out of time."""


@dataclass
class Guard:
    """Calls one learner part and turns every misbehaviour into a :class:`ComponentError`."""

    slot: str
    step: Callable[[], int]
    time_limit_s: float = 5.0
    render: Callable[[str, dict[str, Any]], str] | None = None

    def fail(self, invariant: str, detail: str = "", state: dict[str, Any] | None = None) -> ComponentError:
        """The error to raise (with a picture of ``state`` when a renderer is set)."""
        picture = ""
        if state is not None and self.render is not None:
            try:
                picture = self.render(self.slot, state)
            except Exception:  # noqa: BLE001 - a picture must never hide the real error
                picture = ""
        return ComponentError(self.slot, self.step(), invariant, detail, picture)

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` under the time limit; any exception becomes a ComponentError."""
        # An outer timer (an enclosing part's limit, pytest-timeout's signal method) keeps running: ours
        # is armed only when it would fire first, and the outer one is re-armed with what it had left.
        outer_left, outer_interval = (0.0, 0.0)
        if hasattr(signal, "getitimer"):
            outer_left, outer_interval = signal.getitimer(signal.ITIMER_REAL)
        use_alarm = (
            self.time_limit_s > 0
            and hasattr(signal, "setitimer")
            and threading.current_thread() is threading.main_thread()
            and (outer_left == 0 or outer_left > self.time_limit_s)
        )
        old: Any = None
        started = time.monotonic()
        if use_alarm:

            def on_alarm(signum: int, frame: object) -> None:
                raise _TimeUp()

            old = signal.signal(signal.SIGALRM, on_alarm)
            signal.setitimer(signal.ITIMER_REAL, self.time_limit_s)
        try:
            result = fn(*args)
            took = time.monotonic() - started
            if self.time_limit_s > 0 and took > self.time_limit_s:  # it caught the alarm (a bare except?)
                raise self.fail(
                    f"it took {took:.1f} s, over the {self.time_limit_s:g} s limit (a bare except: "
                    "around a loop swallows the time-limit signal)"
                )
            return result
        except _TimeUp:
            raise self.fail(f"it did not return within {self.time_limit_s:g} s (an endless loop?)") from None
        except ComponentError:
            raise
        except Exception as e:  # a ContractError: what a bridge saw of the result, not raised by the part
            raise self.fail(str(e) if isinstance(e, ContractError) else f"it raised {type(e).__name__}: {e}") from e
        finally:
            if use_alarm:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, old)
                if outer_left > 0:
                    left = max(outer_left - (time.monotonic() - started), 1e-3)
                    signal.setitimer(signal.ITIMER_REAL, left, outer_interval)

    def expect_type(self, value: Any, types: type | tuple[type, ...], what: str) -> None:
        if not isinstance(value, types):
            names = types.__name__ if isinstance(types, type) else " or ".join(t.__name__ for t in types)
            raise self.fail(f"it returned {type(value).__name__} for {what}, expected {names}")
