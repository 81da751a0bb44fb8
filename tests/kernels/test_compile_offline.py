"""Every kernel compiles to a cubin for sm_80 and sm_90 without a GPU (``triton.compile`` + ``GPUTarget``).

This catches what the CPU interpreter lets through but a GPU compiler rejects (``tl.dot`` with
K < 16, a non power-of-two ``tl.arange``, mixed dtypes in ``tl.dot``) and shared memory beyond
the device limit. It runs in one subprocess without ``TRITON_INTERPRET``, because Triton's own
library is decorated as interpreted or compiled when triton is first imported
(see ``pagedlab.kernels.aot``). About 15-30 s on 2 busy cores with a cold Triton cache.
"""

from __future__ import annotations

import pytest

from pagedlab.kernels.aot import compile_all_in_subprocess, default_cases

CASES = [(case.name, f"sm_{arch}") for case in default_cases() for arch in case.archs if not case.expect_failure]
CANARIES = [(case.name, f"sm_{arch}") for case in default_cases() for arch in case.archs if case.expect_failure]


@pytest.fixture(scope="module")
def compiled():
    return {(rec["kernel"], rec["arch"]): rec for rec in compile_all_in_subprocess((80, 90))}


@pytest.mark.no_interpreter_needed
def test_every_kernel_is_covered_on_both_archs():
    kernels = {name.split("[")[0] for name, _ in CASES}
    assert kernels == {
        "_paged_decode_kernel",
        "_merge_splits_kernel",
        "_paged_prefill_kernel",
        "_reshape_and_cache_kernel",
    }
    for kernel in kernels:
        assert {arch for name, arch in CASES if name.startswith(kernel + "[")} == {"sm_80", "sm_90"}


@pytest.mark.no_interpreter_needed
@pytest.mark.parametrize("name,arch", CASES, ids=[f"{n}-{a}" for n, a in CASES])
def test_compiles_for_gpu(compiled, name, arch):
    rec = compiled.get((name, arch))
    assert rec is not None, f"no compile record for {name} on {arch}"
    assert rec["ok"], f"{name} failed to compile for {arch}: {rec.get('error')}"


@pytest.mark.no_interpreter_needed
def test_the_check_catches_gpu_only_errors(compiled):
    # BLOCK_N = 8 is fine in the interpreter, but P @ V then has K = 8 < 16: the GPU compiler refuses.
    assert CANARIES
    for key in CANARIES:
        rec = compiled[key]
        assert not rec["ok"] and "K >= 16" in rec["error"], rec
