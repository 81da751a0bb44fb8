"""Lab 01 - KV cache size and fragmentation.

* ``01.kv_bytes_per_token`` - ``kv_bytes_per_token(config)`` from a Hugging Face config dict.
* ``01.waste_accounting`` - ``waste_accounting(snapshot)``: used / reservation / internal /
  external / free slots of a contiguous (max-length reservation) arena, exactly as
  ``pagedlab.analysis.contiguous.replay_contiguous`` accounts them.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Sequence
from typing import Any

from hypothesis import strategies as hst

from pagedlab.analysis.contiguous import CATEGORIES, contiguous_replay_steps, contiguous_snapshot
from pagedlab.grading.contract import observe_unchanged, read_only
from pagedlab.grading.differential import differential
from pagedlab.grading.registry import Exercise, register
from pagedlab.sim.traces import TraceRequest
from pagedlab.viz.pictures import render_arena

# --- 01.kv_bytes_per_token ---------------------------------------------------------------------------
#: Published config.json values (the fields that matter), with the dtype the lab uses.
CONFIGS: dict[str, dict[str, Any]] = {
    # facebook/opt-13b: no num_key_value_heads (MHA), no head_dim; the vLLM paper's 800 KB/token.
    "OPT-13B": {
        "model_type": "opt",
        "num_hidden_layers": 40,
        "hidden_size": 5120,
        "num_attention_heads": 40,
        "torch_dtype": "float16",
    },
    # huggyllama/llama-13b
    "LLaMA-13B": {
        "model_type": "llama",
        "num_hidden_layers": 40,
        "hidden_size": 5120,
        "num_attention_heads": 40,
        "num_key_value_heads": 40,
        "torch_dtype": "float16",
    },
    # meta-llama/Meta-Llama-3-8B (GQA: 8 KV heads for 32 query heads)
    "LLaMA-3-8B": {
        "model_type": "llama",
        "num_hidden_layers": 32,
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "torch_dtype": "bfloat16",
    },
    # meta-llama/Meta-Llama-3-70B
    "LLaMA-3-70B": {
        "model_type": "llama",
        "num_hidden_layers": 80,
        "hidden_size": 8192,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "torch_dtype": "bfloat16",
    },
    # HuggingFaceTB/SmolLM2-135M-Instruct, served in fp32 by pagedlab on CPU
    "SmolLM2-135M (fp32)": {
        "model_type": "llama",
        "num_hidden_layers": 30,
        "hidden_size": 576,
        "num_attention_heads": 9,
        "num_key_value_heads": 3,
        "torch_dtype": "float32",
    },
    # google/gemma-2-2b: head_dim (256) is NOT hidden_size / num_attention_heads (288)
    "Gemma-2-2B": {
        "model_type": "gemma2",
        "num_hidden_layers": 26,
        "hidden_size": 2304,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "torch_dtype": "bfloat16",
    },
}
_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}


def _kv_hint(expected: Any, got: Any, cfg: Any) -> str | None:  # noqa: C901 - one branch per mistake it names
    if isinstance(got, float) and expected == got:
        return "return an int: use // (integer division) or int(...), not /"
    if not isinstance(got, (int, float)) or isinstance(got, bool) or not got or not isinstance(cfg, dict):
        return "return a number of bytes (an int)"
    r = got / expected
    for unit, factor in (("KiB", 1024), ("KB", 1000), ("MiB", 2**20), ("MB", 10**6)):
        if abs(r * factor - 1) < 1e-9:
            return f"return bytes, not {unit}: drop the / {factor}"
    heads = cfg["num_attention_heads"]
    kv = cfg.get("num_key_value_heads") or heads
    hd_default = cfg["hidden_size"] // heads
    b = _BYTES[cfg["torch_dtype"]]
    if abs(r - 0.5) < 1e-9 and b == 4:
        return (
            f"exactly half: torch_dtype {cfg['torch_dtype']!r} is 4 bytes per element (look it up in "
            "DTYPE_BYTES) - or did you forget that each token stores a key AND a value vector (the factor 2)?"
        )
    if abs(r - 0.5) < 1e-9:
        return "exactly half: each token stores a key AND a value vector (the factor 2)"
    if kv != heads and abs(r - heads / kv) < 1e-9:
        return (
            f"you counted {heads} heads; with grouped-query attention only the {kv} KV heads "
            "(num_key_value_heads) store keys and values"
        )
    if cfg.get("head_dim") and abs(r - hd_default / cfg["head_dim"]) < 1e-9:
        return (
            f"this config gives head_dim={cfg['head_dim']} explicitly; hidden_size // num_attention_heads "
            f"= {hd_default} is only the default when head_dim is missing"
        )
    if abs(r - 2 / b) < 1e-9 or abs(r - 1 / b) < 1e-9 or abs(r - 4 / b) < 1e-9:
        return f"torch_dtype {cfg['torch_dtype']!r} is {b} bytes per element"
    if not cfg.get("num_key_value_heads"):
        return "this config has no num_key_value_heads: every attention head has its own K and V"
    return "2 (K and V) x layers x KV heads x head_dim x bytes per element"


def _kv_test(title: str, names: list[str]) -> None:
    @KV.test(title)
    def _(fn: Any, rec: Any) -> None:
        for name in names:
            cfg = CONFIGS[name]
            rec.step(f"kv_bytes_per_token(<{name} config>)")
            rec.state(dict(cfg))
            given = copy.deepcopy(cfg)
            before = read_only(config=given)
            rec.observe(f"bytes per token of {name}", fn(given), hint=_kv_hint)
            observe_unchanged(rec, before, config=given)


KV = register(
    Exercise(
        "01.kv_bytes_per_token",
        "kv_bytes_per_token",
        "KV-cache bytes per token from a model config (K and V x layers x KV heads x head_dim x bytes)",
        components=("kv_bytes",),
    )
)
_kv_test("OPT-13B and LLaMA-13B in fp16: the vLLM paper's 800 KB per token", ["OPT-13B", "LLaMA-13B"])
_kv_test("grouped-query attention: LLaMA-3-8B and LLaMA-3-70B", ["LLaMA-3-8B", "LLaMA-3-70B"])
_kv_test("SmolLM2-135M as pagedlab serves it (fp32)", ["SmolLM2-135M (fp32)"])
_kv_test("an explicit head_dim wins over hidden_size / heads (Gemma-2-2B)", ["Gemma-2-2B"])


# --- 01.waste_accounting -----------------------------------------------------------------------------
def synthetic_trace(seed: int, n: int, max_prompt: int = 40, max_output: int = 30) -> list[TraceRequest]:
    """``n`` requests with random prompt/output lengths and arrival gaps of 0-0.2 s (seeded)."""
    rng = random.Random(seed)
    t = 0.0
    out = []
    for _ in range(n):
        t += rng.choice([0.0, 0.05, 0.1, 0.2])
        out.append(TraceRequest(t, rng.randint(1, max_prompt), rng.randint(1, max_output)))
    return out


def _waste_hint(expected: Any, got: Any, snap: Any) -> str | None:
    if not isinstance(got, dict) or set(got) != set(CATEGORIES):
        return "return a dict with exactly the keys 'used', 'reservation', 'internal', 'external', 'free'"
    if not all(type(v) is int for v in got.values()):
        return "each category is a number of token slots: an int"
    cap = snap.get("capacity") if isinstance(snap, dict) else None
    total = sum(got.values())
    if cap is not None and total != cap:
        return (
            f"your five numbers add up to {total}, not to the capacity {cap}: every slot is in exactly one "
            "category (did you skip a hole - before the first reservation or after the last one?)"
        )
    d_int = got["internal"] - expected["internal"]
    if d_int and d_int == expected["reservation"] - got["reservation"]:
        return (
            "slots reserved for tokens the request will still generate (up to final_len) are 'reservation'; "
            "only what lies beyond final_len is 'internal' waste"
        )
    if (
        got["external"] != expected["external"]
        and got["external"] + got["free"] == expected["external"] + expected["free"]
    ):
        return (
            f"a hole is external fragmentation only if it is too small for the next request "
            f"(smaller than next_request_size = {snap.get('next_request_size')}); bigger holes are free"
        )
    return None


WASTE = register(
    Exercise(
        "01.waste_accounting",
        "waste_accounting",
        "classify a contiguous arena's slots: used, reservation, internal, external, free",
        render=lambda state, expected, path: render_arena(state, accounting=state.get("accounting")),
        components=("waste",),
    )
)


def _observe_snapshot(fn: Any, rec: Any, snap: dict[str, Any], label: str) -> None:
    rec.step(label)
    rec.state(snap)
    given = copy.deepcopy(snap)
    before = read_only(arena=given)
    result = fn(given)
    rec.state(dict(snap, accounting=result if isinstance(result, dict) else None))
    rec.observe("slot accounting", result, hint=_waste_hint)
    observe_unchanged(rec, before, arena=given)


@WASTE.test("one request: used, reserved for later, and internal waste")
def _(fn: Any, rec: Any) -> None:
    snap = {
        "capacity": 32,
        "next_request_size": 0,
        "requests": [{"id": "r0", "start": 0, "reserved": 32, "num_tokens": 7, "final_len": 20}],
    }
    _observe_snapshot(fn, rec, snap, "waste_accounting(one request reserving all 32 slots)")


def _holes_test(title: str, needs: Sequence[int]) -> None:
    """One arena with holes of 4, 10 and 14 slots, classified for each ``next_request_size`` in ``needs``."""

    @WASTE.test(title)
    def _(fn: Any, rec: Any) -> None:
        base = [
            {"id": "r0", "start": 4, "reserved": 16, "num_tokens": 10, "final_len": 12},
            {"id": "r1", "start": 30, "reserved": 20, "num_tokens": 5, "final_len": 20},
        ]
        for need in needs:
            snap = {"capacity": 64, "next_request_size": need, "requests": copy.deepcopy(base)}
            _observe_snapshot(
                fn, rec, snap, f"waste_accounting(holes of 4, 10 and 14 slots; next request needs {need})"
            )


_holes_test("holes: external only when too small for the next request", (0, 8, 12, 40))
_holes_test("a hole exactly the size of the next request is free, one slot smaller is external", (4, 10, 11, 14))


@WASTE.test("requests listed out of address order")
def _(fn: Any, rec: Any) -> None:
    snap = {
        "capacity": 48,
        "next_request_size": 6,
        "requests": [
            {"id": "r2", "start": 30, "reserved": 10, "num_tokens": 3, "final_len": 9},
            {"id": "r0", "start": 0, "reserved": 12, "num_tokens": 12, "final_len": 12},
            {"id": "r1", "start": 15, "reserved": 10, "num_tokens": 1, "final_len": 4},
        ],
    }
    _observe_snapshot(fn, rec, snap, "waste_accounting(3 requests, listed r2, r0, r1)")


def _replay_test(title: str, seed: int, policy: str, steps: int) -> None:
    @WASTE.test(title)
    def _(fn: Any, rec: Any) -> None:
        for st in contiguous_replay_steps(synthetic_trace(seed, 24), 256, 64, policy, max_steps=steps):
            k, snap = st.step, contiguous_snapshot(st)
            _observe_snapshot(fn, rec, snap, f"waste_accounting(snapshot of step {k}, policy={policy!r})")


_replay_test("every step of a replay with max-length reservations (Orca Max)", 1, "max", 40)
_replay_test("every step of a replay with power-of-two reservations (Orca Pow2)", 2, "pow2", 40)


# --- differential tests (random cases against the reference, pagedlab.grading.differential) ------------
# The real configs' field ranges: what the hand-written tests above never build - a field present but
# null (transformers writes head_dim / num_key_value_heads as null for some models, and the engine's own
# loader treats null as missing), an explicit head_dim on any model type (Qwen3, Mistral-Nemo: not just
# Gemma), multi-query attention (1 KV head), MHA model types other than OPT.
_MODEL_TYPES = ("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "phi", "opt", "gpt_neox", "olmo")
_HEADS = (1, 2, 4, 8, 9, 12, 14, 16, 20, 24, 25, 28, 32, 40, 48, 64, 96, 128)
_HEAD_DIMS = (64, 128, 32, 48, 80, 96, 112, 160, 256)


@hst.composite
def _config_case(draw: Any) -> dict[str, Any]:
    """One config.json as the engine reads it: the fields that matter, each missing / null / set."""
    heads = draw(hst.sampled_from(_HEADS))
    hd = draw(hst.sampled_from(_HEAD_DIMS))
    cfg: dict[str, Any] = {
        "model_type": draw(hst.sampled_from(_MODEL_TYPES)),
        "num_hidden_layers": draw(hst.integers(1, 128)),
        "hidden_size": heads * hd,
        "num_attention_heads": heads,
    }
    kv = draw(hst.sampled_from(("set", "missing", "null", "mqa", "mha")))
    if kv == "set":
        cfg["num_key_value_heads"] = draw(hst.sampled_from([d for d in range(1, heads + 1) if heads % d == 0]))
    elif kv in ("mqa", "mha"):
        cfg["num_key_value_heads"] = 1 if kv == "mqa" else heads
    elif kv == "null":
        cfg["num_key_value_heads"] = None
    head_dim = draw(hst.sampled_from(("missing", "null", "same", "other")))
    if head_dim == "null":
        cfg["head_dim"] = None
    elif head_dim == "same":
        cfg["head_dim"] = hd
    elif head_dim == "other":
        cfg["head_dim"] = draw(hst.sampled_from([d for d in _HEAD_DIMS if d != hd]))
    cfg["torch_dtype"] = draw(hst.sampled_from(sorted(_BYTES)))
    return cfg


@differential(
    KV,
    _config_case(),
    examples=60,
    draws="HF configs: 10 model types, 1-128 layers, 1-128 heads, KV heads a divisor (1 = MQA) / missing / null, "
    "head_dim missing / null / equal to or unlike hidden_size // heads, fp32 / fp16 / bf16",
)
def _(fn: Any, case: dict[str, Any], rec: Any) -> None:
    rec.step(f"kv_bytes_per_token({case})")
    rec.state(dict(case))
    given = copy.deepcopy(case)
    before = read_only(config=given)
    rec.observe("bytes per token", fn(given), hint=_kv_hint)
    observe_unchanged(rec, before, config=given)


def _arena_case() -> Any:
    """One contiguous arena as the replay leaves it: reservations placed anywhere (first-fit after frees puts
    later requests into earlier holes), listed in admission order (ids ``r<arrival index>`` rising along the
    list, so neither id nor list order is address order), holes of any size (none, adjacent reservations, at
    either end), nothing running at all, and nobody or somebody waiting whose size is often a hole's own."""

    @hst.composite
    def case(draw: Any) -> dict[str, Any]:
        n = draw(hst.one_of(hst.just(0), hst.integers(1, 7)))
        gaps = draw(hst.lists(hst.sampled_from([0, 0, 1, 2, 3, 5, 8, 13, 21]), min_size=n + 1, max_size=n + 1))
        sizes = draw(hst.lists(hst.integers(1, 40), min_size=n, max_size=n))
        placed, pos = [], gaps[0]
        for size, gap in zip(sizes, gaps[1:]):
            placed.append((pos, size))
            pos += size + gap
        capacity = max(pos, 1)
        order = draw(hst.permutations(range(n)))
        ids = sorted(draw(hst.lists(hst.integers(0, 40), min_size=n, max_size=n, unique=True)))
        requests = []
        for rid, k in zip(ids, order):
            start, reserved = placed[k]
            final_len = draw(hst.integers(1, reserved))
            num_tokens = draw(hst.integers(1, final_len))
            requests.append(
                {
                    "id": f"r{rid}",
                    "start": start,
                    "reserved": reserved,
                    "num_tokens": num_tokens,
                    "final_len": final_len,
                }
            )
        holes = [g for g in gaps if g]
        near_a_hole = hst.sampled_from(holes or [1]).flatmap(lambda h: hst.sampled_from([h, h - 1, h + 1]))
        need = draw(hst.one_of(hst.just(0), hst.integers(1, capacity + 1), near_a_hole, near_a_hole))
        return {"capacity": capacity, "next_request_size": max(0, need), "requests": requests}

    return case()


def _describe_arena(snap: dict[str, Any]) -> str:
    reqs = ", ".join(
        f"{r['id']} at {r['start']}+{r['reserved']} ({r['num_tokens']}/{r['final_len']} tokens)"
        for r in snap["requests"]
    )
    return (
        f"arena of {snap['capacity']} slots, next request needs {snap['next_request_size']}; requests: {reqs or 'none'}"
    )


@differential(
    WASTE,
    _arena_case(),
    examples=60,
    describe=_describe_arena,
    draws="arenas of 0-7 reservations (1-40 slots) with holes of 0-21 slots anywhere, listed in admission order "
    "(not address or id order), 1 <= num_tokens <= final_len <= reserved, next request 0 / any size / a hole's size +-1",
)
def _(fn: Any, case: dict[str, Any], rec: Any) -> None:
    _observe_snapshot(fn, rec, copy.deepcopy(case), "waste_accounting(the arena above)")
