"""The C kernels built with AddressSanitizer and UBSan, running the fuzz cases of test_native_fuzz.py (issue 26).

A read or write out of bounds, a signed overflow, a misaligned pointer, that the plain build may survive
without a sign, is reported here and fails the run. gcc's ``libasan`` is preloaded into a child python
(the sanitizer's runtime must come first in the process); ``PAGEDLAB_NATIVE_SANITIZE`` makes
``pagedlab.kernels.native`` build its library with ``-fsanitize=address,undefined`` (a library of its own
name beside the plain one). CI runs this file (marker ``asan``: ``PAGEDLAB_FUZZ_EXAMPLES`` cases per op, 60
by default, about a minute on 2 cores with the build); ``make asan`` runs it with more cases
(``ASAN_EXAMPLES``, default 500). A planted overflow (a bounds check taken out of a copy of the source)
is reported: the harness sees what it is there to see.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pagedlab.kernels import native
from tests.kernels import test_native_fuzz as fuzz_cases

pytestmark = [pytest.mark.no_interpreter_needed, pytest.mark.asan]
ROOT = Path(__file__).resolve().parents[2]
FUZZ = Path(__file__).with_name("test_native_fuzz.py")


def sanitized_env(logs: Path, **extra: str) -> dict[str, str]:
    """The environment of a child python whose C kernels are built with ASan and UBSan, reporting into files
    ``<logs>.<pid>`` (pytest's capture would swallow a report on stderr: the sanitizer ends the process); skips
    without gcc's libasan (``gcc -print-file-name`` echoes the bare name when it has none)."""
    if shutil.which("gcc") is None:
        pytest.skip("no gcc on this machine: the AddressSanitizer build uses gcc's libasan")
    libasan = subprocess.run(["gcc", "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
    if not os.path.isabs(libasan) or not os.path.exists(libasan):
        pytest.skip(f"gcc has no libasan.so ({libasan!r}): install gcc's sanitizer runtime (Debian: libasan8)")
    env = {k: v for k, v in os.environ.items() if k != native.ENV_NATIVE}
    env |= {
        native.ENV_SANITIZE: "address,undefined",
        "CC": "gcc",
        "LD_PRELOAD": libasan,
        # Python and torch keep memory until exit by design: leak reports would be noise.
        "ASAN_OPTIONS": f"detect_leaks=0:halt_on_error=1:log_path={logs}",
        "UBSAN_OPTIONS": f"print_stacktrace=1:halt_on_error=1:log_path={logs}",
        "PAGEDLAB_FUZZ_EXAMPLES": os.environ.get("PAGEDLAB_FUZZ_EXAMPLES", "60"),
    }
    return env | extra


def sanitizer_reports(logs: Path, output: str = "") -> str:
    """What AddressSanitizer or UBSan reported (in the files ``<logs>.*`` or ``output``), "" when nothing."""
    text = "".join(p.read_text(errors="replace") for p in sorted(logs.parent.glob(logs.name + ".*"))) + output
    return text if re.search(r"ERROR: AddressSanitizer|runtime error:", text) else ""


def test_the_fuzz_cases_run_clean_under_address_sanitizer(tmp_path: Path) -> None:
    env = sanitized_env(tmp_path / "asan")
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", str(FUZZ)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    output = done.stdout + done.stderr
    assert not (report := sanitizer_reports(tmp_path / "asan", output)), report[-6000:]
    assert done.returncode == 0, output[-6000:]
    # every fuzz test the file holds (the bf16 cases included), as pytest collects it without the sanitizers
    listed = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only", str(FUZZ)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    ).stdout
    runs = sum(1 for line in listed.splitlines() if "::test_" in line)
    assert runs >= sum(len(getattr(fuzz_cases, n)) + 1 for n in dir(fuzz_cases) if n.endswith("_BREAKS")), listed
    assert re.search(rf"\b{runs} passed\b", output), output[-2000:]  # every fuzz run passed: none skipped
    code = "from pagedlab.kernels import native; lib = native.load(); print(lib._name if lib else '')"
    name = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert b"libasan.so" in Path(name.stdout.strip()).read_bytes()  # the library those cases ran: sanitized


PLANTED_OVERFLOW = """
import sys, torch
from pathlib import Path
from pagedlab.kernels import native
from pagedlab.kernels.paged_kv import PagedKV
native.SOURCES = tuple(Path(p) for p in sys.argv[1:])
kc = torch.zeros(4, 4, 1, 16)
kv = PagedKV(kc, kc, torch.tensor([[0, 1, 2, 3]], dtype=torch.int32), torch.tensor([16], dtype=torch.int32))
try:
    native.paged_decode_attention(torch.zeros(1, 1, 16), kv, 0.25, max_seq_len=3, num_threads=1)
except Exception as e:
    print(type(e).__name__, e)
"""


def test_a_planted_overflow_is_reported(tmp_path: Path) -> None:
    """Mutation: without the ``len > max_seq_len`` check a 16-key sequence fills a 3-row buffer."""
    copies = []
    for src in native.SOURCES:
        text = src.read_text()
        if src.name == "paged_attention_cpu.c":
            check = "    if (len > c->max_seq_len) return ABOVE_MAX_LEN;\n"
            assert check in text
            text = text.replace(check, "")
        copies.append(tmp_path / src.name)
        copies[-1].write_text(text)
    env = sanitized_env(tmp_path / "planted", PAGEDLAB_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-c", PLANTED_OVERFLOW, *map(str, copies)], capture_output=True,
                          text=True, env=env, timeout=300)  # fmt: skip
    report = sanitizer_reports(tmp_path / "planted", done.stderr)
    assert done.returncode != 0 and "ERROR: AddressSanitizer: heap-buffer-overflow" in report, done.stderr[-4000:]
    assert "WRITE of size 8" in report and "rows_from_table" in report, report[-4000:]
    # ... and the source as it is refuses the same call, naming the sequence (its sanitized build: the cache's).
    env = sanitized_env(tmp_path / "as-is")
    done = subprocess.run([sys.executable, "-c", PLANTED_OVERFLOW, *map(str, native.SOURCES)], capture_output=True,
                          text=True, env=env, timeout=300)  # fmt: skip
    assert done.returncode == 0 and not sanitizer_reports(tmp_path / "as-is", done.stderr), done.stderr[-4000:]
    assert "KernelInputError sequence 0: seq_len=16 is above the max_seq_len" in done.stdout
