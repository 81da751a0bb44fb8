"""Suite-wide settings: the scheduler checks its postconditions after every step in tests."""

import os

os.environ.setdefault("PAGEDLAB_CHECK_INVARIANTS", "1")
