"""Where the Triton kernels can run: a CUDA GPU, or the CPU under Triton's interpreter.

``@triton.jit`` decides *when it decorates a function* whether to compile it for a GPU or to
interpret it with numpy: it reads ``TRITON_INTERPRET`` at that moment. Triton's own helpers
(``tl.max``, ``tl.sum``, ``tl.cdiv`` ...) are ``@triton.jit`` functions too, decorated when
``triton`` is first imported, so on CPU the variable must be set **before anything imports
triton** (``torch._dynamo`` and ``torch.compile`` do), not merely before this package::

    import os; os.environ["TRITON_INTERPRET"] = "1"     # very first cell of the notebook
    from pagedlab.kernels import ops

or, from the shell, ``TRITON_INTERPRET=1 pytest``. Measured on triton 3.7.1: setting the variable
after ``import triton`` leaves the kernels half interpreted, and they fail with "Cannot call
@triton.jit'd outside of the scope of a kernel"; :func:`launcher` detects that state and raises
:class:`KernelUnavailableError` with the fix instead.

Which of the two a process runs is decided **once**, when triton is first imported there (Triton's own
helpers are decorated then), and every question this module answers reads that decision, never the
variable as it is later: a test that sets or removes ``TRITON_INTERPRET`` for a while (``monkeypatch``,
``mock.patch.dict(os.environ)`` restoring the dict) cannot turn the kernels off mid-run, and a
``@triton.jit`` function decorated while the variable was away is run as the process runs Triton
(:func:`runnable`). A process that imported triton compiled and sees no GPU cannot run the kernels on
CPU at all: :func:`kernels_can_run` says so, and a launch raises :class:`KernelUnavailableError`.

The interpreter also runs CUDA tensors (it copies them to the host and back at every launch):
that is correct but slow, and a frequent benchmarking mistake (triton #5995), so it warns.
"""

from __future__ import annotations

import os
import warnings
from typing import Any

import torch

from pagedlab.errors import PagedLabError

try:  # Triton is optional: the torch references work without it (macOS, Windows).
    import triton
    from triton.runtime.interpreter import InterpretedFunction

    TRITON_AVAILABLE = True
except ImportError:  # pragma: no cover - exercised only where triton is missing
    triton = None
    InterpretedFunction = None
    TRITON_AVAILABLE = False


def _pin_the_decision() -> None:
    """Make Triton itself keep the decision it took at ``import triton``: its knob ``runtime.interpret`` is read
    again later (by ``@triton.jit`` when it decorates a function, by modules Triton imports on its first launch),
    and would otherwise follow whatever ``TRITON_INTERPRET`` holds then. (Only an interpreted process pins it:
    pinning also writes the variable, and a compiled process must not hand ``TRITON_INTERPRET=0`` to the
    processes it starts.)"""
    if TRITON_AVAILABLE and hasattr(triton, "knobs") and interpreter_ready():
        triton.knobs.runtime.interpret = True


class KernelUnavailableError(PagedLabError, RuntimeError):
    """The Triton kernels cannot run on these tensors (no Triton, or CPU tensors without the interpreter)."""


_HOW_TO = (
    "set TRITON_INTERPRET=1 in the environment before triton is first imported "
    "(e.g. `TRITON_INTERPRET=1 pytest ...`, or os.environ['TRITON_INTERPRET'] = '1' in the first "
    "notebook cell), or use attention_backend='torch' on CPU"
)


def interpreter_requested() -> bool:
    """True when ``TRITON_INTERPRET`` is set to a true value in the environment right now (only what an error
    message says: whether the kernels can run is :func:`interpreter_ready`'s answer)."""
    return os.environ.get("TRITON_INTERPRET", "0").strip().lower() in ("1", "true", "on", "yes")


def is_interpreted(kernel: Any) -> bool:
    """True if ``kernel`` was decorated while the interpreter was on (it is an ``InterpretedFunction``)."""
    return TRITON_AVAILABLE and isinstance(kernel, InterpretedFunction)


def kernels_can_run(device: torch.device | str | torch.Tensor) -> bool:
    """Whether the Triton kernels can run on ``device`` (or a tensor's device) in this process.

    CUDA: Triton installed and a GPU visible. CPU: Triton installed and imported with ``TRITON_INTERPRET=1``
    set (the process's decision, taken once at ``import triton``; the variable's value now does not matter).
    """
    if isinstance(device, torch.Tensor):
        device = device.device
    device = torch.device(device)
    if not TRITON_AVAILABLE:
        return False
    if device.type == "cuda":
        return torch.cuda.is_available()
    return device.type == "cpu" and interpreter_ready()


_WARNED = False


def interpreter_ready() -> bool:
    """True when Triton *and* this package's kernels were set up for the interpreter.

    Both must hold: Triton's standard library (``tl.max`` ...) is decorated at ``import triton``,
    the kernels at ``import pagedlab.kernels.<module>``.
    """
    if not TRITON_AVAILABLE:
        return False
    import triton.language as tl  # lazy: optional dependency (Triton; TRITON_AVAILABLE was checked above)

    return isinstance(tl.cdiv, InterpretedFunction)


def runnable(kernel: Any) -> Any:
    """``kernel`` as this process runs Triton: a ``@triton.jit`` function decorated for a GPU while triton itself
    runs interpreted here (the variable was away when the function was decorated) is wrapped for the
    interpreter, as it would have been decorated; any other kernel is returned as it is."""
    if not TRITON_AVAILABLE or is_interpreted(kernel) or not interpreter_ready():
        return kernel
    fn = getattr(kernel, "fn", None)
    if not isinstance(kernel, triton.runtime.JITFunction) or not callable(fn):
        return kernel
    return InterpretedFunction(fn)


def launcher(kernel: Any, tensor: torch.Tensor) -> Any:
    """Check that ``kernel`` can run on the device of ``tensor`` and return it for ``kernel[grid](...)``.

    Raises:
        KernelUnavailableError: Triton is missing, the device is neither CPU nor CUDA, or the tensors
            are on CPU and the interpreter is off (or was switched on after ``import triton``).
    """
    global _WARNED
    if not TRITON_AVAILABLE:
        raise KernelUnavailableError(
            "Triton is not installed (pip install 'pagedlab[triton]', Linux only); use attention_backend='torch'"
        )
    if tensor.device.type == "cuda":
        if is_interpreted(kernel) and not _WARNED:
            _WARNED = True
            warnings.warn(
                "TRITON_INTERPRET=1 is set, so the kernels run in the slow CPU interpreter even "
                "though the tensors are on CUDA; unset it to time the GPU",
                RuntimeWarning,
                stacklevel=3,
            )
        return kernel
    if tensor.device.type != "cpu":
        raise KernelUnavailableError(f"the Triton kernels run on CUDA or (interpreted) on CPU, not on {tensor.device}")
    kernel = runnable(kernel)
    if is_interpreted(kernel) and interpreter_ready():
        return kernel
    if interpreter_requested():
        raise KernelUnavailableError(
            "TRITON_INTERPRET=1 is set now, but triton (or pagedlab.kernels) was imported before it was set, "
            "so the kernels are compiled for a GPU and cannot take CPU tensors. Set it before anything imports "
            "triton (torch._dynamo does): at the very top of the notebook or in the shell, "
            "e.g. `TRITON_INTERPRET=1 pytest ...`; then restart the kernel/process"
        )
    raise KernelUnavailableError(f"Triton kernels got CPU tensors but the interpreter is off: {_HOW_TO}")


def running_interpreted(kernel: Any, tensor: torch.Tensor) -> bool:
    """Whether a launch of ``kernel`` on ``tensor`` would go through the interpreter (picks tile sizes)."""
    return is_interpreted(runnable(kernel)) or tensor.device.type == "cpu"


def next_power_of_2(n: int) -> int:
    """Smallest power of two >= n (``tl.arange`` needs power-of-two lengths)."""
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


_pin_the_decision()
