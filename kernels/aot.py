"""Offline (ahead-of-time) GPU compile check: compile every kernel for sm_80 / sm_90 without a GPU.

``triton.compile(ASTSource(...), target=GPUTarget("cuda", 90, 32))`` runs Triton's whole pipeline
(TTIR -> TTGIR -> LLVM -> PTX -> cubin, with the bundled ``ptxas``) without a driver. It catches what
the CPU interpreter accepts but a GPU rejects: ``tl.dot`` with K < 16, a non power-of-two
``tl.arange``, dtype mismatches in ``tl.dot``, and shared memory beyond the device's limit. It cannot
check numerics or register pressure at launch time.

It must run in a process where Triton was imported **without** ``TRITON_INTERPRET``: Triton's
standard library (``tl.max``, ``tl.cdiv`` ...) is decorated at import time, interpreted or not.
:func:`compile_all_in_subprocess` therefore starts ``python -m pagedlab.kernels.aot`` with the
variable removed; the test suite uses it.

Usage: ``python -m pagedlab.kernels.aot --arch 80 --arch 90`` prints one JSON line per kernel.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field

#: Largest dynamic shared memory per block (bytes): A100 (sm_80) 163 KiB, H100/H200 (sm_90) 227 KiB.
SHARED_MEMORY_LIMIT = {80: 166912, 90: 232448}

_TL = {"fp16": "fp16", "bf16": "bf16", "fp32": "fp32"}


@dataclass
class Case:
    """One kernel specialisation: the kernel, the element dtype, the shape-derived constexprs."""

    kernel: str
    dtype: str
    constexprs: dict[str, object] = field(default_factory=dict)
    archs: tuple = (80, 90)
    #: A canary that must *fail* to compile: proves the check sees GPU-only errors.
    expect_failure: bool = False

    @property
    def name(self) -> str:
        short = ",".join(
            f"{k}={v}"
            for k, v in self.constexprs.items()
            if k in ("QUERIES_PER_KV", "HEAD_DIM", "NUM_SPLITS", "ROW", "BLOCK_SIZE", "BLOCK_N")
        )
        return f"{self.kernel}[{self.dtype},{short}]"


def default_cases() -> list[Case]:
    """The specialisations the launchers produce on a GPU for SmolLM2 and common model shapes."""
    # One piece: a table of cases (each kernel's constexprs spelled out), read top to bottom.
    import torch  # lazy: start-up time (torch); a process that only starts the aot subprocess needs none

    # lazy: optional dependency (imports Triton); `import aot` leaves Triton's interpret choice to the caller
    from pagedlab.kernels.decode_attention import decode_block_sizes
    from pagedlab.kernels.prefill_attention import prefill_block_sizes  # lazy: optional dependency (Triton)
    from pagedlab.kernels.runtime import next_power_of_2  # lazy: optional dependency (Triton)

    _TORCH = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}

    def dec(hq, hkv, d, dtype, bs=16, splits=1, archs=(80, 90)):
        meta = decode_block_sizes(hq, hkv, d, interpreted=False, dtype=_TORCH[dtype])
        return Case(
            "_paged_decode_kernel",
            dtype,
            dict(
                meta,
                BLOCK_SIZE=bs,
                NUM_SPLITS=splits,
                UPCAST=False,
                DOT_PRECISION="ieee" if dtype == "fp32" else "tf32",
                LOAD_TILE=None,  # the kit's own loads (a learner's tile load is compiled on first use)
            ),
            archs,
        )

    def pre(hq, hkv, d, dtype, bs=16, archs=(80, 90)):
        meta = prefill_block_sizes(hq, hkv, d, interpreted=False, dtype=_TORCH[dtype])
        return Case(
            "_paged_prefill_kernel",
            dtype,
            dict(meta, BLOCK_SIZE=bs, UPCAST=False, DOT_PRECISION="ieee" if dtype == "fp32" else "tf32"),
            archs,
        )

    def write(hkv, d, dtype, bs=16, archs=(80, 90)):
        return Case(
            "_reshape_and_cache_kernel",
            dtype,
            dict(HEAD_DIM=d, ROW=hkv * d, ROW_P=next_power_of_2(hkv * d), BLOCK_SIZE=bs),
            archs,
        )

    def merge(splits, d, archs=(80, 90)):
        return Case(
            "_merge_splits_kernel",
            "fp16",
            dict(
                NUM_SPLITS=splits, SPLITS_P=next_power_of_2(splits), HEAD_DIM=d, HEAD_DIM_P=max(16, next_power_of_2(d))
            ),
            archs,
        )

    return [
        # Every kernel on both architectures, SmolLM2-135M shapes (9/3 heads, D 64).
        dec(9, 3, 64, "fp16"),
        dec(9, 3, 64, "bf16", splits=4),
        pre(9, 3, 64, "bf16"),
        write(3, 64, "fp16"),
        merge(4, 64),
        # Other head counts, head sizes, dtypes and block sizes on sm_90.
        dec(32, 8, 128, "fp16", bs=32, archs=(90,)),
        dec(8, 1, 80, "fp32", bs=1, archs=(90,)),
        dec(12, 2, 96, "bf16", splits=8, archs=(90,)),
        pre(32, 8, 128, "fp16", bs=32, archs=(90,)),
        pre(8, 1, 96, "fp32", archs=(90,)),
        pre(8, 8, 80, "fp16", bs=1, archs=(90,)),
        write(8, 128, "bf16", archs=(90,)),
        merge(16, 80, archs=(90,)),
        # Canary: BLOCK_N = 8 runs in the interpreter but NVIDIA's tl.dot needs K >= 16 (P @ V has K = BLOCK_N).
        Case(
            "_paged_decode_kernel",
            "fp16",
            dict(dec(9, 3, 64, "fp16").constexprs, BLOCK_N=8),
            (90,),
            expect_failure=True,
        ),
    ]


def _signature(fn, case: Case) -> dict[str, str]:
    """Triton type strings for every parameter: pointers by role, ints as i32, constexprs marked."""
    sig = {}
    for name in inspect.signature(fn).parameters:
        if name in case.constexprs:
            sig[name] = "constexpr"
        elif name in ("block_tables_ptr", "seq_lens_ptr", "cu_seqlens_q_ptr"):
            sig[name] = "*i32"
        elif name == "slot_mapping_ptr":
            sig[name] = "*i64"
        elif name in ("part_out_ptr", "part_lse_ptr"):
            sig[name] = "*fp32"
        elif name.endswith("_ptr"):
            sig[name] = "*" + _TL[case.dtype]
        elif name == "qk_scale":
            sig[name] = "fp32"
        else:
            sig[name] = "i32"
    return sig


def compile_case(case: Case, arch: int, num_warps: int = 4) -> dict:
    """Compile one case for ``sm_<arch>``; returns a record (``ok``, seconds, shared bytes, error)."""
    import triton  # lazy: optional dependency (Triton), run in the aot subprocess without TRITON_INTERPRET
    from triton.backends.compiler import GPUTarget  # lazy: optional dependency (Triton)
    from triton.compiler import ASTSource  # lazy: optional dependency (Triton)

    # lazy: optional dependency (these import Triton), in the aot subprocess without TRITON_INTERPRET
    from pagedlab.kernels import cache_write, decode_attention, prefill_attention
    from pagedlab.kernels.runtime import is_interpreted  # lazy: optional dependency (Triton)

    module = {
        "_paged_decode_kernel": decode_attention,
        "_merge_splits_kernel": decode_attention,
        "_paged_prefill_kernel": prefill_attention,
        "_reshape_and_cache_kernel": cache_write,
    }[case.kernel]
    kernel = getattr(module, case.kernel)
    if is_interpreted(kernel):
        raise RuntimeError(
            "offline compile needs Triton imported without TRITON_INTERPRET; use compile_all_in_subprocess()"
        )
    rec = dict(kernel=case.name, arch=f"sm_{arch}", ok=False, expect_failure=case.expect_failure)
    t0 = time.perf_counter()
    try:
        src = ASTSource(kernel, _signature(kernel.fn, case), case.constexprs)
        compiled = triton.compile(src, target=GPUTarget("cuda", arch, 32), options={"num_warps": num_warps})
        shared = int(compiled.metadata.shared)
        rec.update(ok="cubin" in compiled.asm, shared_bytes=shared)
        if shared > SHARED_MEMORY_LIMIT[arch]:
            rec.update(ok=False, error=f"needs {shared} B shared memory > {SHARED_MEMORY_LIMIT[arch]} B on sm_{arch}")
    except Exception as exc:  # report every failure, not only the first
        rec["error"] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}"
    rec["seconds"] = round(time.perf_counter() - t0, 2)
    return rec


def compile_all_in_subprocess(archs=(80, 90), timeout: float = 600) -> list[dict]:
    """Run :func:`main` in a fresh interpreter without ``TRITON_INTERPRET``; return its records.

    Raises:
        RuntimeError: the subprocess crashed (its stderr is in the message).
    """
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    cmd = [sys.executable, "-m", "pagedlab.kernels.aot", *sum((["--arch", str(a)] for a in archs), [])]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    records = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode not in (0, 1) or not records:
        raise RuntimeError(f"offline compile subprocess failed (rc={proc.returncode}):\n{proc.stderr[-4000:]}")
    return records


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", type=int, action="append", help="compute capability x10 (80, 90); repeatable")
    args = parser.parse_args(argv)
    archs = args.arch or [80, 90]
    ok = True
    for case in default_cases():
        for arch in archs:
            if arch in case.archs:
                rec = compile_case(case, arch)
                ok &= rec["ok"] != rec["expect_failure"]
                print(json.dumps(rec), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
