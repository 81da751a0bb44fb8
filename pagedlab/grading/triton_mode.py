"""How this process runs Triton: decided once, before anything imports triton."""

from __future__ import annotations

import os
import sys

__all__ = ["use_interpreter_without_gpu"]


def use_interpreter_without_gpu() -> bool:
    """Decide now how this process runs Triton, if nothing has imported triton yet: interpreted
    (``TRITON_INTERPRET=1``, then ``import triton``) when no GPU is visible, as the lab's first cell does;
    return whether the Triton kernels can run on CPU in this process.

    The grader's trusted process and the capstone call it before anything there imports triton: triton compiled
    for a GPU on a CPU machine cannot run lab 08's Triton tests, not even on the reference. Importing triton
    here, not later, makes the decision final: the variable is read at that import only, so a later change to
    it (a test restoring ``os.environ``) changes nothing (``pagedlab.kernels.runtime``). An already imported
    triton is left as it is.
    """
    if "triton" not in sys.modules:
        import torch  # lazy: torch takes seconds to import; only the Triton exercises need it

        if not torch.cuda.is_available():
            os.environ.setdefault("TRITON_INTERPRET", "1")
    # lazy: imports triton, which takes the decision; it must come after the variable is set
    from pagedlab.kernels.runtime import kernels_can_run

    return kernels_can_run("cpu")
