"""Where pagedlab keeps what it downloads or builds: ``$PAGEDLAB_CACHE_DIR``, else ``~/.cache/pagedlab``.

The model (``pagedlab.model.fetch``) and the CPU backend's compiled C kernels
(``pagedlab.kernels.native``, under ``native/``) live there. Standard library only, so every layer
may import it.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["ENV_CACHE_DIR", "default_cache_dir"]

#: Environment variable naming the cache directory.
ENV_CACHE_DIR = "PAGEDLAB_CACHE_DIR"


def default_cache_dir() -> Path:
    """``$PAGEDLAB_CACHE_DIR`` if set, else ``~/.cache/pagedlab``."""
    env = os.environ.get(ENV_CACHE_DIR)
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "pagedlab"
