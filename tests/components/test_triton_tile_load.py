"""Lab 08's ``@triton.jit`` tile load (exercise ``08.triton_load_kv_tile``) plugged into the engine: it runs
inside the kit's Triton decode kernel (a ``tl.constexpr``, Triton's interpreter on CPU) on the "triton"
backend, serves the kit's tokens, and a wrong load is named by the guard."""

from __future__ import annotations

import pytest
import torch

from pagedlab.engine.components import Components
from pagedlab.errors import ComponentError, KernelInputError
from pagedlab.grading import registry
from pagedlab.kernels.runtime import kernels_can_run
from pagedlab.parts.kernel import GuardedTritonTileLoad
from tests.components.helpers import kit_tokens, run
from tests.grading.helpers import variant
from tests.robust.helpers import assert_idle, tiny_engine

pytestmark = pytest.mark.skipif(not kernels_can_run("cpu"), reason="triton is not installed")

EID = "08.triton_load_kv_tile"
TRITON = {"attention_backend": "triton"}


def _load(*replacements: tuple[str, str]):
    return registry.snippet_object(EID, variant(EID, *replacements) if replacements else None)


def _engine(fn, **kw):
    return tiny_engine(components=Components.kit().plug("triton_tile_load", fn), **{**TRITON, **kw})


def test_the_solution_runs_inside_the_kernel_and_serves_the_kits_tokens():
    calls = []
    eng = _engine(_load())
    hook = eng.model_runner.decode_override
    assert isinstance(hook, GuardedTritonTileLoad)
    orig = hook.decode_attention

    def counted(*args):
        calls.append(1)
        return orig(*args)

    hook.decode_attention = counted
    assert run(eng) == kit_tokens(**TRITON)
    assert calls, "the Triton tile load never ran"
    assert_idle(eng)


def test_it_is_used_only_on_the_triton_backend():
    eng = tiny_engine(components=Components.kit().plug("triton_tile_load", _load()))  # torch backend
    assert eng.model_runner.kv_tile_load is None and eng.model_runner.decode_override is None
    assert run(eng) == kit_tokens()


def test_the_kernel_takes_the_tile_load_and_checks_the_layout():
    from pagedlab.kernels.decode_attention import paged_decode_attention
    from pagedlab.kernels.paged_kv import PagedKV
    from pagedlab.kernels.reference import paged_decode_attention as reference

    g = torch.Generator().manual_seed(0)
    q, kc, vc = (torch.randn(*s, generator=g) for s in ((2, 6, 16), (9, 4, 2, 16), (9, 4, 2, 16)))
    kc[6:], vc[6:] = float("nan"), float("nan")  # stale slots past the tables' blocks
    bt, sl = torch.tensor([[3, 1, 0], [2, 5, 4]], dtype=torch.int32), torch.tensor([6, 10], dtype=torch.int32)
    got = paged_decode_attention(q, PagedKV(kc, vc, bt, sl), 0.25, load_tile=_load())
    assert torch.allclose(got, reference(q, PagedKV(kc, vc, bt, sl), 0.25), atol=1e-5)
    # both K and V go through it: a load that doubles every row gives attention over 2K and 2V
    double = _load(("    return tile, mask", "    return tile * 2.0, mask"))
    got2 = paged_decode_attention(q, PagedKV(kc, vc, bt, sl), 0.25, load_tile=double)
    assert torch.allclose(got2, reference(q, PagedKV(2 * kc, 2 * vc, bt, sl), 0.25), atol=1e-4)
    with pytest.raises(KernelInputError, match="power-of-two head dim"):
        q24, kc24 = torch.randn(2, 6, 24), torch.randn(9, 4, 2, 24)  # head dim 24: padded to 32 in the kernel
        paged_decode_attention(q24, PagedKV(kc24, kc24.clone(), bt, sl), 0.25, load_tile=_load())


@pytest.mark.parametrize(
    "replacement, why",
    [
        (("pos // BLOCK_SIZE, mask=mask", "pos % BLOCK_SIZE, mask=mask"), "differs from the reference"),
        (("(pos % BLOCK_SIZE) * stride_slot", "(pos // BLOCK_SIZE) * stride_slot"), "differs from the reference"),
    ],
    ids=["block index from pos % BLOCK_SIZE", "row from pos // BLOCK_SIZE"],
)
def test_a_wrong_load_is_caught_and_the_kit_takes_over(replacement, why):
    eng = _engine(_load(replacement))
    with pytest.raises(ComponentError) as info:
        run(eng)
    assert info.value.component == "triton_tile_load" and why in info.value.invariant
    assert_idle(eng)
    assert not eng.components.is_yours("triton_tile_load") and eng.model_runner.decode_override is None
    assert run(eng) == kit_tokens(**TRITON)
