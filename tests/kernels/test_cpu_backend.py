"""The "cpu" attention backend (pagedlab.kernels.cpu) computes what the torch reference computes."""

from __future__ import annotations

import pytest
import torch

from pagedlab.kernels import cpu, native, reference
from pagedlab.kernels.backends import get_backend
from pagedlab.kernels.paged_kv import PagedKV
from pagedlab.kernels.testing import PagedCase

pytestmark = pytest.mark.no_interpreter_needed
F32 = torch.float32
#: The two decode paths of the backend: the C kernel (where it builds) and the grouped torch ops.
PATHS = ["native", "grouped"]


def decode(path: str, q: torch.Tensor, kv: PagedKV, scale: float) -> torch.Tensor:
    """``cpu.paged_decode_attention`` through the C kernel, or the grouped torch path itself."""
    if path == "grouped":
        return cpu.grouped_decode_attention(q, kv, scale)
    assert isinstance(cpu.plan_decode(kv), cpu.NativeDecode), native.unavailable_reason()
    return cpu.paged_decode_attention(q, kv, scale)


def test_length_groups_split_where_padding_would_waste_more_than_a_quarter() -> None:
    # block counts (bs 16): 32, 3, 30, 3, 0, 13
    lens = [500, 40, 480, 45, 0, 200]
    assert cpu.length_groups(lens, 16) == [[0, 2], [5], [1, 3], [4]]
    assert cpu.length_groups(lens, 16, max_groups=2) == [[0, 2], [1, 3, 4, 5]]
    assert cpu.length_groups([7, 7, 7], 16) == [[0, 1, 2]]
    assert cpu.length_groups([], 16) == []


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("block_size,heads", [(16, (9, 3)), (4, (4, 4)), (1, (6, 2))])
def test_decode_equals_the_reference(block_size: int, heads: tuple[int, int], path: str) -> None:
    hq, hkv = heads
    lens = [1, 530, block_size, block_size + 1, 40, 0, 2 * block_size - 1, 300, 45, 17]
    case = PagedCase(lens, hkv, 64, block_size, F32, device="cpu")
    q = torch.randn(len(lens), hq, 64, generator=torch.Generator().manual_seed(3))
    args = (case.kv(clean=True), 0.125)
    assert len(cpu.length_groups(lens, block_size)) > 1  # the grouped path runs in groups
    out = decode(path, q, *args)
    torch.testing.assert_close(out, reference.paged_decode_attention(q, *args), rtol=1e-5, atol=1e-6)
    assert torch.equal(out[5], torch.zeros(hq, 64))  # seq_len 0 -> a zero row


def test_one_decode_plan_serves_every_layer_with_its_gather_buffers_reused() -> None:
    lens = [300, 40, 45, 17, 530, 1]  # groups with consecutive rows (slices) and scattered rows
    case = PagedCase(lens, 3, 64, 16, F32, device="cpu")
    q = torch.randn(len(lens), 9, 64, generator=torch.Generator().manual_seed(5))
    nb = case.key_cache.shape[0]
    plan = cpu.plan_grouped_decode(case.kv())
    rows = [list(range(len(lens)))[g.rows] if isinstance(g.rows, slice) else g.rows.tolist() for g in plan.groups]
    assert sorted(i for r in rows for i in r) == list(range(len(lens)))
    assert any(isinstance(g.rows, slice) for g in plan.groups) and any(
        not isinstance(g.rows, slice) for g in plan.groups
    )
    assert plan.block_ids.max() < nb and plan.zero_rows is None and plan.buffers is None
    buffers = None
    for layer in range(3):  # each layer has its own cache contents
        kc, vc = case.clean_key_cache * (layer + 1), case.clean_value_cache - layer
        args = (PagedKV(kc, vc, case.block_tables, case.seq_lens), 0.125)
        out = cpu.grouped_decode_attention(q, *args, plan=plan)
        torch.testing.assert_close(out, reference.paged_decode_attention(q, *args), rtol=1e-5, atol=1e-6)
        assert plan.buffers is not None and (buffers is None or all(a is b for a, b in zip(plan.buffers, buffers)))
        buffers = plan.buffers


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("lens", [[0, 0, 5], [500, 200, 60, 20, 0], [0]])
def test_decode_rows_with_nothing_to_attend_to_are_zero(lens: list[int], path: str) -> None:
    # [500, 200, 60, 20, 0]: four groups are open, so the empty sequence joins the 2-block group.
    case = PagedCase(lens, 3, 64, 16, F32, device="cpu")
    q = torch.randn(len(lens), 9, 64, generator=torch.Generator().manual_seed(6))
    args = (case.kv(clean=True), 0.125)
    out = decode(path, q, *args)
    assert not torch.isnan(out).any()
    for i, n in enumerate(lens):
        if n == 0:
            assert torch.equal(out[i], torch.zeros(9, 64))
    torch.testing.assert_close(out, reference.paged_decode_attention(q, *args), rtol=1e-5, atol=1e-6)


def test_decode_reads_a_cache_in_another_memory_layout() -> None:
    lens = [33, 200, 7, 150]
    case = PagedCase(lens, 3, 64, 16, F32, device="cpu")
    kc, vc = (c.transpose(1, 2).contiguous().transpose(1, 2) for c in (case.clean_key_cache, case.clean_value_cache))
    assert not kc.is_contiguous() and torch.equal(kc, case.clean_key_cache)  # [blocks, Hkv, bs, D] in memory
    q = torch.randn(len(lens), 9, 64, generator=torch.Generator().manual_seed(7))
    args = (PagedKV(kc, vc, case.block_tables, case.seq_lens), 0.125)
    assert isinstance(cpu.plan_decode(args[0]), cpu.DecodePlan)  # the C kernel reads contiguous caches only
    torch.testing.assert_close(
        cpu.paged_decode_attention(q, *args), reference.paged_decode_attention(q, *args), rtol=1e-5, atol=1e-6
    )


@pytest.mark.parametrize(
    "seq_lens,q_lens",
    [
        ([40, 300, 17], [40, 300, 17]),  # fresh prompts: causal without a mask
        ([100, 64, 9, 33], [36, 1, 9, 0]),  # chunks after cached context, a decode-like row, an idle row
        ([700, 300], [300, 257]),  # longer than QUERY_CHUNK: pieces over growing key prefixes
    ],
)
def test_prefill_equals_the_reference(seq_lens: list[int], q_lens: list[int]) -> None:
    case = PagedCase(seq_lens, 3, 64, 16, F32, device="cpu")
    q = torch.randn(sum(q_lens), 9, 64, generator=torch.Generator().manual_seed(4))
    cu = PagedCase.cu_seqlens(q_lens, device="cpu")
    out = cpu.paged_prefill_attention(q, case.kv(cu), 0.125)
    ref = reference.paged_prefill_attention(q, case.kv(cu, clean=True), 0.125)
    assert not torch.isnan(out).any()  # reads only owned rows of the NaN-poisoned cache
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-6)


def test_the_dispatch_serves_cpu_with_its_cache_write_and_a_decode_plan() -> None:
    ops = get_backend("cpu")
    assert ops.reshape_and_cache is cpu.reshape_and_cache and ops.plan_decode is cpu.plan_decode
    assert get_backend("torch").plan_decode is None
    assert (ops.paged_decode_attention, ops.paged_prefill_attention) == (
        cpu.paged_decode_attention,
        cpu.paged_prefill_attention,
    )


def test_engine_tokens_equal_with_the_cpu_and_torch_backends() -> None:
    from pagedlab import LLMEngine, SamplingParams
    from tests.kernels.test_engine_triton import tiny_llama

    g = torch.Generator().manual_seed(1)
    prompts = [torch.randint(0, 97, (n,), generator=g).tolist() for n in (1, 3, 4, 5, 9, 23, 40)]
    got = {}
    for backend in ("torch", "cpu"):
        eng = LLMEngine(
            tiny_llama(),
            attention_backend=backend,
            block_size=4,
            num_gpu_blocks=64,
            max_model_len=128,
            max_num_batched_tokens=16,
        )
        params = SamplingParams(temperature=0, max_tokens=6, ignore_eos=True)
        for i, p in enumerate(prompts):
            eng.add_request(str(i), {"prompt_token_ids": p}, params)
        outs = []
        while eng.has_unfinished_requests():
            outs += eng.step()
        assert eng.model_runner.backend == backend
        got[backend] = {o.request_id: o.outputs[0].token_ids for o in outs}
    assert got["cpu"] == got["torch"] and len(got["cpu"]) == len(prompts)
    assert all(len(t) == 6 for t in got["cpu"].values())


def test_the_cache_write_takes_any_layout_the_reference_takes() -> None:
    # K rows not contiguous (a permuted view): the C loop cannot read them, so the reference writes.
    key = torch.randn(3, 16, 2, generator=torch.Generator().manual_seed(8)).permute(0, 2, 1)  # [3, 2, 16]
    value = torch.randn(3, 2, 16, generator=torch.Generator().manual_seed(9))
    slots = torch.tensor([0, 5, -1])
    got = (torch.zeros(4, 4, 2, 16), torch.zeros(4, 4, 2, 16))
    want = (torch.zeros(4, 4, 2, 16), torch.zeros(4, 4, 2, 16))
    assert not native.writes(key, value, *got, slots)
    assert native.writes(key.contiguous(), value, *got, slots) == (native.load() is not None)
    cpu.reshape_and_cache(key, value, *got, slots)
    reference.reshape_and_cache(key, value, *want, slots)
    assert all(torch.equal(g, w) for g, w in zip(got, want)) and bool(got[0].any())
