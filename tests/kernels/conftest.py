"""Kernel tests: Triton kernels against the PyTorch references.

Without a GPU the kernels run under Triton's interpreter, which must be switched on *before triton
is first imported* (Triton's own ``tl.max``/``tl.sum`` are decorated at import time). This file sets
``TRITON_INTERPRET=1`` when it is imported, which is early enough when ``pytest tests/kernels`` runs
alone. For the whole suite run ``TRITON_INTERPRET=1 pytest`` (the Makefile does), because another
test module may import torch._dynamo (and with it triton) before this directory is collected; if
that happened, the kernel tests fail with an explanation instead of a cryptic interpreter error.

On a machine with CUDA (and the variable unset) the same tests run natively on the GPU.
"""

from __future__ import annotations

import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402

from pagedlab.kernels.runtime import interpreter_ready  # noqa: E402  (imports triton)
from pagedlab.kernels.testing import default_device  # noqa: E402

DEVICE = default_device()


@pytest.fixture(autouse=True)
def _kernels_runnable(request):
    """Fail loudly (not a cryptic InterpreterError) if triton was imported before the interpreter was on."""
    if DEVICE == "cpu" and not interpreter_ready() and "no_interpreter_needed" not in request.keywords:
        pytest.fail(
            "triton was imported before TRITON_INTERPRET=1 was set, so the kernels cannot run on CPU in "
            "this process; run the tests as `TRITON_INTERPRET=1 pytest ...`",
            pytrace=False,
        )


def pytest_configure(config):
    config.addinivalue_line("markers", "no_interpreter_needed: kernel test that launches no interpreted kernel")
    config.addinivalue_line("markers", "asan: runs the C kernels built with AddressSanitizer and UBSan (make asan)")
