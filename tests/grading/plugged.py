"""Every wrong version of tests/grading/wrong_versions/ plugged into the engine: which guard names it.

Each exercise that fills a slot of the engine (``pagedlab.grading.plug.BRIDGES``) is served, through the same
bridge ``serve_with`` / ``my_engine`` use (``plug.components_for``), on the tiny random-weight Llama under a
few engine settings chosen so that its contracts bite (:data:`SETTINGS`: more requests than ``max_num_seqs``,
a pool that forces two victims, a head of the queue that does not fit, a prompt longer than one decode tile,
waves that reuse blocks and hit the prefix cache). The outcome of a wrong version is the first setting where
the engine stops with a guard's ``ComponentError`` (the slot and its message), or where its tokens differ
from the kit's engine, or raises, or stalls; a wrong version that serves every setting like the kit's engine
must say why in an ``engine:`` line of its docstring (what the engine never hands the part). The solutions
must serve every setting like the kit's engine: no guard blames a correct part for a setting.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.grading.helpers import WrongVersion

#: The engine's setting, its waves of prompts (each wave is served to completion before the next arrives)
#: and per-request extras (``n``, ``priority``), by name.


@dataclass(frozen=True)
class Setting:
    name: str
    engine: dict[str, Any]
    waves: list[list[list[int]]]
    n: int = 1
    priorities: Sequence[int] = ()
    #: per request, or one per wave
    max_tokens: int | Sequence[int] = 6
    #: steps after which the next wave arrives, per wave or one for all (0: once the engine is idle)
    every: int | Sequence[int] = 0

    def gap(self, wave: int) -> int:
        return self.every if isinstance(self.every, int) else self.every[wave]


def _prompt(seed: int, n: int) -> list[int]:
    return [(seed * 13 + 7 * i) % 90 + 5 for i in range(n)]


FOUR = [
    [5, 6, 7, 8, 9, 10, 11, 12, 13],
    [5, 6, 7, 8, 20, 21],
    [30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41],
    [5, 6, 7, 8, 9, 10, 11, 12, 50],
]
TWELVE = [_prompt(i, 3 + (i * 5) % 9) for i in range(12)]
LONG = _prompt(1, 70)  # longer than one 64-lane decode tile
SHARED = [5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21]
SECOND = [5, 6, 7, 8, 20, 21, 22, 23, 24]  # SHARED's first block, then another
THIRD = [5, 6, 7, 8, 9, 10, 11, 12, 30, 31, 32, 33, 34]  # SHARED's first two blocks, then another
ON_ONE_PREFIX = [[*SHARED[:8], 60 + i, 61, 62, 63, 64] for i in range(3)]
SIX = [_prompt(i, 5) for i in range(6)]
NO_FIT = [_prompt(2, 8), _prompt(3, 33), _prompt(4, 2), _prompt(5, 2)]

_SEQS2 = Setting("max_num_seqs=2, 4 requests", {"max_num_seqs": 2}, [FOUR])
_TWELVE = Setting("12 requests, max_num_seqs=4", {"max_num_seqs": 4}, [TWELVE])
_NO_FIT = Setting("the head of the queue does not fit (10 blocks)", {"num_gpu_blocks": 10}, [NO_FIT], max_tokens=2)
_PRESSURE = {"num_gpu_blocks": 10, "max_num_seqs": 8}

#: exercise id -> the settings it is served on, in order.
SETTINGS: dict[str, list[Setting]] = {
    "02.free_queue": [
        Setting("4 requests", {}, [FOUR]),
        Setting(
            "prefix caching, 12 blocks, two waves", {"num_gpu_blocks": 12, "enable_prefix_caching": True}, [FOUR, FOUR]
        ),
    ],
    "02.slot_mapping": [Setting("4 requests, then a 70-token prompt", {}, [FOUR, [LONG]])],
    "03.fork": [Setting("n=2 completions, an 8-token prompt among them", {}, [[FOUR[0], FOUR[1], SHARED[:8]]], n=2)],
    "03.append_token": [
        Setting("n=2 completions, an 8-token prompt among them", {}, [[FOUR[0], FOUR[1], SHARED[:8]]], n=2)
    ],
    "04.schedule_step": [_SEQS2, _TWELVE, _NO_FIT],
    "05.schedule_with_budget": [
        Setting("budget 8, max_num_seqs=2", {"max_num_batched_tokens": 8, "max_num_seqs": 2}, [FOUR]),
        Setting("budget 4", {"max_num_batched_tokens": 4}, [FOUR]),
        Setting(
            "budget 16, long_prefill_token_threshold=4",
            {"max_num_batched_tokens": 16, "long_prefill_token_threshold": 4},
            [FOUR],
        ),
        Setting(
            "the head of the queue does not fit (10 blocks, budget 64)",
            {"num_gpu_blocks": 10, "max_num_batched_tokens": 64},
            [NO_FIT],
            max_tokens=2,
        ),
        Setting("12 requests, max_num_seqs=4, budget 16", {"max_num_seqs": 4, "max_num_batched_tokens": 16}, [TWELVE]),
    ],
    "06.pick_victim": [
        Setting("fcfs, 10 blocks: two victims in one step", _PRESSURE, [SIX], max_tokens=10),
        Setting(
            "priority, 10 blocks",
            {**_PRESSURE, "policy": "priority"},
            [SIX],
            priorities=(0, 3, 0, 1, 0, 2),
            max_tokens=10,
        ),
    ],
    "06.schedule_with_preemption": [
        Setting("fcfs, recompute, 10 blocks: two victims in one step", _PRESSURE, [SIX], max_tokens=10),
        Setting(
            "priority, recompute, 10 blocks: the least important runs first",
            {**_PRESSURE, "policy": "priority"},
            [SIX],
            priorities=(3, 0, 0, 1, 0, 2),
            max_tokens=10,
        ),
        Setting(
            "priority, recompute, 10 blocks: the least important were admitted first",
            {**_PRESSURE, "policy": "priority"},
            [SIX[:2], [_prompt(2, 7), _prompt(3, 4), _prompt(4, 4), _prompt(5, 4)]],
            priorities=(3, 3, 0, 0, 1, 0),
            max_tokens=10,
            every=2,
        ),
        Setting(
            "fcfs, recompute, 6 blocks: the request that cannot grow is the last",
            {"num_gpu_blocks": 6},
            [[_prompt(7, 7), _prompt(8, 8)]],
        ),
        Setting(
            "priority, recompute, 10 blocks",
            {**_PRESSURE, "policy": "priority"},
            [SIX],
            priorities=(0, 3, 0, 1, 0, 2),
            max_tokens=10,
        ),
        Setting(
            "fcfs, swap, 10 blocks + 16 CPU blocks",
            {**_PRESSURE, "preemption_mode": "swap", "num_cpu_blocks": 16},
            [SIX],
            max_tokens=10,
        ),
        Setting(
            "fcfs, swap, 10 blocks + 16 CPU blocks: a long request preempted while a short one is swapped out",
            {**_PRESSURE, "preemption_mode": "swap", "num_cpu_blocks": 16},
            [[_prompt(0, 5), _prompt(1, 5), _prompt(2, 16), _prompt(3, 3)]],
            max_tokens=10,
        ),
        Setting(
            "fcfs, swap, a full CPU pool (2 blocks)",
            {**_PRESSURE, "preemption_mode": "swap", "num_cpu_blocks": 2},
            [SIX],
            max_tokens=10,
        ),
        _SEQS2,
    ],
    "07.get_computed_blocks": [
        Setting(
            "hash prefix caching: a long prompt, then shorter and longer ones sharing it",
            {"enable_prefix_caching": True},
            [[SHARED], [SHARED[:8], SHARED[:12], SHARED, FOUR[0]]],
        ),
    ],
    "07.match_prefix": [],
    "07.insert": [],
    "07.evict": [],
    "08.load_kv_tile": [Setting("4 requests, then a 70-token prompt reusing their blocks", {}, [FOUR, [LONG]])],
    "08.triton_load_kv_tile": [
        Setting(
            "Triton backend: 2 requests, then one reusing their blocks",
            {"attention_backend": "triton"},
            [[FOUR[2], FOUR[1]], [FOUR[0]]],
            max_tokens=3,
        ),
        Setting(
            "Triton backend: a 140-token prompt (two 128-lane tiles)",
            {"attention_backend": "triton", "max_model_len": 256, "num_gpu_blocks": 40},
            [[_prompt(6, 140)]],
            max_tokens=2,
        ),
    ],
}
_RADIX = [
    Setting(
        "radix prefix caching, 6 blocks: shared prefixes in waves",
        {"enable_prefix_caching": True, "prefix_cache": "radix", "num_gpu_blocks": 6},
        [[SHARED], [SHARED[:8], SHARED[:12]], [FOUR[0], FOUR[2]], [SHARED, FOUR[3]], [FOUR[1], SHARED[:12]], [SECOND]],
    ),
    Setting(
        "radix prefix caching, 12 blocks: 4 requests twice",
        {"enable_prefix_caching": True, "prefix_cache": "radix", "num_gpu_blocks": 12},
        [FOUR, FOUR, [SHARED], [THIRD]],
    ),
    Setting(
        "radix prefix caching, 7 blocks: three prompts on one prefix, then a long unrelated one",
        {"enable_prefix_caching": True, "prefix_cache": "radix", "num_gpu_blocks": 7},
        [ON_ONE_PREFIX, [_prompt(9, 24)]],
        max_tokens=2,
    ),
    Setting(
        "radix prefix caching, 9 blocks: a request holds a prefix whose leaves go, a newer leaf stays",
        {"enable_prefix_caching": True, "prefix_cache": "radix", "num_gpu_blocks": 9},
        [ON_ONE_PREFIX, [[*SHARED[:8], 70]], [_prompt(11, 5)], [_prompt(9, 20)]],
        max_tokens=(2, 10, 2, 2),
        every=(0, 1, 3, 0),
    ),
    Setting(
        "radix prefix caching, 9 blocks: two 3-block leaves, then 2 blocks wanted",
        {"enable_prefix_caching": True, "prefix_cache": "radix", "num_gpu_blocks": 9},
        [[SHARED], [[*SHARED[:4], *range(70, 83)]], [_prompt(10, 14)]],
        max_tokens=2,
    ),
]
for _eid in ("07.match_prefix", "07.insert", "07.evict"):
    SETTINGS[_eid] = _RADIX

#: A run past this many steps stalls.
MAX_STEPS = 600


@dataclass
class Outcome:
    """What plugging one part into the engine did: ``kind`` is ``"guard"``, ``"same"``, ``"differs"``,
    ``"raised"``, ``"stalls"`` or ``"not a part"``; ``setting`` where it happened; ``text`` the guard's slot
    and message (or the exception)."""

    kind: str
    setting: str = ""
    text: str = ""
    slot: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def _serve(components: Any, s: Setting) -> dict[str, list[list[int]]]:
    from pagedlab import SamplingParams
    from tests.robust.helpers import tiny_engine

    eng = tiny_engine(components=components, **s.engine)
    done: dict[str, list[list[int]]] = {}
    steps = [0]

    def step() -> None:
        steps[0] += 1
        if steps[0] > MAX_STEPS:
            raise TimeoutError(f"no finish within {MAX_STEPS} steps")
        for o in eng.step():
            if o.finished:
                done[o.request_id] = [list(c.token_ids) for c in o.outputs]

    k = 0
    for w, wave in enumerate(s.waves):
        most = s.max_tokens if isinstance(s.max_tokens, int) else s.max_tokens[w]
        for p in wave:
            params = SamplingParams(temperature=0, n=s.n, max_tokens=most, ignore_eos=True)
            prio = {"priority": s.priorities[k % len(s.priorities)]} if s.priorities else {}
            # a fixed clock, 0.4 ms between submissions: the same arrival times on every run (the priority
            # policy breaks ties by arrival_time; perf_counter made a part that rounds it caught on some runs only)
            eng.add_request(f"r{k}", {"prompt_token_ids": p}, params, arrival_time=1000.0 + 0.0004 * k, **prio)
            k += 1
        taken = 0
        while eng.has_unfinished_requests() and not (s.gap(w) and taken == s.gap(w)):
            step()
            taken += 1
    while eng.has_unfinished_requests():
        step()
    return done


_KIT: dict[str, dict[str, list[list[int]]]] = {}


def plug(exercise_id: str, obj: Any) -> Outcome:
    """Serve ``obj`` (an implementation of ``exercise_id``) on each of the exercise's settings."""
    from pagedlab.errors import ComponentError
    from pagedlab.grading.plug import BRIDGES, components_for

    if exercise_id not in BRIDGES:
        return Outcome("not a part")
    os.environ.setdefault("TRITON_INTERPRET", "1")
    comps = components_for({exercise_id: obj})
    for s in SETTINGS[exercise_id]:
        key = repr((s.engine, s.waves, s.n, tuple(s.priorities), repr(s.max_tokens), repr(s.every)))
        if key not in _KIT:
            _KIT[key] = _serve(None, s)
        try:
            got = _serve(comps, s)
        except ComponentError as e:
            return Outcome("guard", s.name, e.invariant, e.component)
        except TimeoutError as e:
            return Outcome("stalls", s.name, str(e))
        except Exception as e:  # noqa: BLE001 - reported as a gap of the guards
            return Outcome("raised", s.name, f"{type(e).__name__}: {e}")
        if got != _KIT[key]:
            return Outcome("differs", s.name)
    return Outcome("same")


def cell(v: WrongVersion, o: Outcome) -> str:
    """The table's cell for a wrong version's outcome."""
    if o.kind == "not a part":
        return "not a part of the engine"
    if o.kind == "guard":
        text = o.text if len(o.text) <= 140 else o.text[:137].rsplit(" ", 1)[0] + " ..."
        return f"guard `{o.slot}` ({o.setting}): “{text}”".replace("|", "\\|")
    if o.kind == "same":
        return f"serves like the kit's engine: {v.engine}"
    return f"**{o.kind}** ({o.setting}) {o.text}".replace("|", "\\|")


def plugged_table(versions: Sequence[WrongVersion], outcomes: Sequence[Outcome]) -> str:
    """The generated section of docs/wrong_versions.md: per exercise the counts, then one row per version."""
    by_ex: dict[str, list[tuple[WrongVersion, Outcome]]] = {}
    for v, o in zip(versions, outcomes):
        by_ex.setdefault(v.exercise, []).append((v, o))
    head = [
        "## Plugged into the engine",
        "",
        "Generated by `tests/grading/test_wrong_versions_plugged.py` (regenerate: `PAGEDLAB_REGEN_DOCS=1 pytest "
        "tests/grading/test_wrong_versions_plugged.py`): each wrong version is plugged into the engine through "
        "the bridge `serve_with` / `my_engine` use (`plug.components_for`) and served on the tiny Llama under the "
        "settings of `tests/grading/plugged.py`; the solutions serve all of them like the kit's engine. A version "
        "the engine serves unchanged says what the engine never hands the part (its `engine:` line); `check()` "
        "names every one of them (the table above).",
        "",
        "| exercise | wrong versions | with an issue-23 pattern | named by a guard | serve like the kit (never "
        "reached) | not a part |",
        "|---|---|---|---|---|---|",
    ]
    for eid, rows in by_ex.items():
        kinds = [o.kind for _, o in rows]
        head.append(
            f"| `{eid}` | {len(rows)} | {sum(1 for v, _ in rows if v.patterns)} | {kinds.count('guard')} | "
            f"{kinds.count('same')} | {kinds.count('not a part')} |"
        )
    head += ["", "| exercise | wrong version | pattern | plugged into the engine |", "|---|---|---|---|"]
    for eid, rows in by_ex.items():
        for v, o in rows:
            if o.kind == "not a part":
                continue
            head.append(f"| `{eid}` | `{v.name}` | {'; '.join(v.patterns)} | {cell(v, o)} |")
    return "\n".join(head) + "\n"
