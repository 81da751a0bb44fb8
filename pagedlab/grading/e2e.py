"""The end-to-end test of ``pagedlab grade``: a submission's parts plugged into the real engine serve
real prompts, and must produce the kit's engine's tokens exactly.

Who does what (the threat model is in ``docs/instructor_guide.md``, section "End-to-end test"):

One module per process: this one is the grader's, ``e2e_driver`` the driver's, ``e2e_learner`` the learner's.

* **grader** (:func:`plan`, :func:`judge_e2e`; never runs learner code): picks the prompts from the
  kit's ``data/prompts.jsonl`` with a seed (``--e2e-seed``, random by default and printed), turns
  them into token ids with the chat template, serves them on the kit's own engine in each
  configuration (the *reference tokens*), and at the end compares the submission's tokens with
  them: the score depends on that comparison only.
* **driver** (:func:`pagedlab.grading.e2e_driver.run_e2e`, trusted, no learner code): decides which parts are plugged in - the
  bridged exercises (``pagedlab.grading.plug.BRIDGES``) whose every public test passed, judged
  here against the reference transcripts - and which configurations run, starts a fresh learner
  process with the model preloaded, asks it to serve, checks that the reply is plain data, and on a
  mismatch finds the component by serving again with one part plugged at a time.
* **learner's process** (:class:`pagedlab.grading.e2e_learner.EngineServer`): builds the engine from the learner's objects and
  serves; it sends back only token ids, the components table and a ``ComponentError``'s slot,
  step and invariant. It never sees the reference tokens, and no "passed" flag of its is read.

Configurations: ``default`` (the engine of ``my_engine()``: 128 blocks of 16, prefix caching on);
``prefix caching`` when ``prefix_lookup`` is plugged (one request at a time, so later prompts hit the
chat template's cached blocks); ``forced preemption`` when a scheduler part that preempts is plugged
(blocks of 4 and a pool on which the kit's engine itself preempts; a lab 04/05 ``schedule_step``,
which cannot preempt, is left out there and the kit's scheduler runs); ``triton kernel`` when lab 08's
``@triton.jit`` tile load is plugged (1 prompt x 3 tokens on the "triton" backend, Triton's
interpreter on CPU; skipped when Triton cannot run in the grader's process).
"""

from __future__ import annotations

import random
import secrets
from dataclasses import asdict, dataclass, field
from typing import Any

from pagedlab.errors import PagedLabError
from pagedlab.grading import serve
from pagedlab.grading.serve import first_mismatch
from pagedlab.paths import default_cache_dir

__all__ = [
    "E2E_ALLOWANCE_S",
    "E2E_CONFIG_LIMIT_S",
    "E2E_MEMORY_MB",
    "E2E_TRITON_LIMIT_S",
    "E2EPlan",
    "E2EResult",
    "judge_e2e",
    "no_tokens",
    "plan",
]

#: Address-space limit (MB) of the learner's process that runs the engine (torch + SmolLM2 in fp32
#: need about 2.5 GB of address space; measured: 2048 fails to map the weights, 3072 works).
E2E_MEMORY_MB = 3072
#: Seconds one configuration may take in the learner's process (the engine's own guards stop a part
#: after 5 s per call); the driver's backstop adds 10 s and then kills the process.
E2E_CONFIG_LIMIT_S = 30.0
#: Seconds the ``triton kernel`` configuration may take: 1 prompt x 3 tokens through Triton's interpreter, whose
#: first call traces every kernel (measured 16 s on this kit's 2-core CPU with another job running; it went over
#: 30 s in a CI run of the Gradescope image, and the reference solution lost the end-to-end point).
E2E_TRITON_LIMIT_S = 120.0
#: Seconds added to a learner's ``--timeout`` for the end-to-end test (it runs after every unit test,
#: so it never costs them time): a fresh process with the model (~6 s), up to 3 configurations and the Triton one.
E2E_ALLOWANCE_S = 60.0 + E2E_TRITON_LIMIT_S


# --- the grader: prompts, configurations, reference tokens --------------------------------------------
@dataclass
class Config:
    """One engine configuration of the end-to-end test.

    Attributes:
        name: ``default`` | ``prefix caching`` | ``forced preemption``.
        engine_kwargs: ``LLM`` arguments (plain data).
        reference: the kit's engine's tokens per prompt, in this configuration.
        kit_preemptions: preemptions in the kit's run (forced preemption: > 0 when it really preempted).
        num_prompts, max_tokens: a smaller run than the plan's (0: the plan's) - the Triton
            interpreter takes seconds per token.
    """

    name: str
    engine_kwargs: dict[str, Any]
    reference: list[list[int]] = field(default_factory=list)
    kit_preemptions: int = 0
    num_prompts: int = 0
    max_tokens: int = 0
    limit_s: float = 0.0  #: seconds this configuration may take in the learner's process (0: the run's limit)


@dataclass
class E2EPlan:
    """What the grader decided before any submission runs: prompts, configurations, reference tokens."""

    seed: int
    prompts: list[str]
    prompt_ids: list[list[int]]
    max_tokens: int
    configs: list[Config]
    model: str
    cache_dir: str
    #: Configurations left out, each with why (the Triton one where Triton cannot run): said, not dropped.
    skipped: tuple[str, ...] = ()

    def job(self) -> dict[str, Any]:
        """The plain-data part of the driver's job (the driver is trusted: it may see the references)."""
        return {
            "model": self.model,
            "cache_dir": self.cache_dir,
            "prompt_ids": self.prompt_ids,
            "max_tokens": self.max_tokens,
            "configs": [
                {
                    "name": c.name,
                    "engine_kwargs": c.engine_kwargs,
                    "reference": c.reference,
                    "prompt_ids": self.prompt_ids[: c.num_prompts or None],
                    "max_tokens": c.max_tokens or self.max_tokens,
                    "limit_s": c.limit_s,
                }
                for c in self.configs
            ],
        }

    def to_json(self) -> dict[str, Any]:
        """The plan as JSON data (:meth:`from_json` reads it back): a Gradescope image computes it once."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> E2EPlan:
        """A plan written by :meth:`to_json`.

        Raises:
            ValueError: ``data`` is not such a plan.
        """
        try:
            configs = [Config(**c) for c in data["configs"]]
            return cls(
                **{
                    **data,
                    "configs": configs,
                    "skipped": tuple(data.get("skipped", ())),
                }
            )
        except (KeyError, TypeError) as e:
            raise ValueError(f"not an end-to-end plan ({type(e).__name__}: {e})") from e

    def describe(self) -> str:
        """One line for the grader's console and the report."""
        return (
            f"end-to-end: {len(self.prompts)} prompts x {self.max_tokens} tokens (seed {self.seed}; "
            f"--e2e-seed {self.seed} repeats them), configurations: "
            + ", ".join(
                c.name + (f" (the kit's engine preempts {c.kit_preemptions}x)" if c.kit_preemptions else "")
                for c in self.configs
            )
            + "".join(f"; not run: {why}" for why in self.skipped)
        )


def prompt_pool() -> list[str]:
    """The user turns of the kit's ``data/prompts.jsonl`` (the pool the grader draws from)."""
    from pagedlab.demo import (  # lazy: demo imports the engine (torch, seconds)
        default_prompts,
        read_prompts,
    )

    pool = []
    for row in read_prompts(default_prompts()):
        messages = row.get("messages") or [{"role": "user", "content": row.get("prompt", "")}]
        pool.append(str(messages[-1]["content"]))
    return pool


def choose_prompts(seed: int, n: int) -> list[str]:
    """``n`` distinct prompts of :func:`prompt_pool`, drawn with ``seed``.

    Raises:
        ValueError: ``n`` < 1 or larger than the pool.
    """
    pool = prompt_pool()
    if not 1 <= n <= len(pool):
        raise ValueError(f"--e2e-prompts must be 1 .. {len(pool)} (the prompt pool), got {n}")
    return random.Random(seed).sample(pool, n)


def _kit_config(
    name: str,
    path: str,
    ids: list[list[int]],
    tokens: int,
    kwargs: dict[str, Any],
    **more: Any,
) -> Config:
    """A configuration with the kit's engine's tokens and preemptions on it (``serve.serve`` on the kit's parts)."""
    kit = serve.serve(None, ids, tokens, model=path, **kwargs)
    return Config(name, kwargs, kit.tokens or [], kit.preempted, **more)


def _triton_config(path: str, ids: list[list[int]], base: dict[str, Any]) -> Config | str:
    """The ``triton kernel`` configuration (lab 08's ``@triton.jit`` tile load inside the kit's Triton
    decode kernel): 1 prompt x 3 tokens on the "triton" backend; or, when Triton cannot run here (not
    installed, or no ``TRITON_INTERPRET=1`` on a machine without a GPU), why not."""
    kwargs = {**base, **serve.run_of("", "triton_tile_load").serve}
    try:
        return _kit_config(
            "triton kernel",
            path,
            ids[:1],
            3,
            kwargs,
            num_prompts=1,
            max_tokens=3,
            limit_s=E2E_TRITON_LIMIT_S,
        )
    except (PagedLabError, ImportError) as err:
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        return f"triton kernel (Triton cannot run here: {first})"


def plan(
    seed: int | None = None,
    num_prompts: int = 3,
    max_tokens: int = 8,
    model: str | None = None,
) -> E2EPlan:
    """Choose the prompts and compute the kit's reference tokens in every configuration (grader only).

    Args:
        seed: the prompts' seed (None: a fresh random one, reported so that a run can be repeated).
        num_prompts: prompts per configuration.
        max_tokens: tokens generated per prompt (greedy).
        model: the GGUF path (default: the kit's cached SmolLM2).

    Raises:
        ValueError: ``num_prompts`` / ``max_tokens`` out of range.
        ModelNotFoundError: the model is not cached (``pagedlab fetch-model``).
    """
    # lazy: the engine and torch take seconds to import; only plan() serves (report and gradescope import this module)
    from pagedlab.engine.llm import LLM
    from pagedlab.model.loader import resolve_model_path  # lazy: as the engine, torch

    if max_tokens < 1:
        raise ValueError(f"--e2e-tokens must be >= 1, got {max_tokens}")
    seed = secrets.randbelow(2**31) if seed is None else int(seed)
    prompts = choose_prompts(seed, num_prompts)
    path = str(resolve_model_path(model))
    base = dict(serve.BASE)
    kit = LLM(path, **base)
    ids = [kit.apply_chat_template([{"role": "user", "content": p}]) for p in prompts]
    # one request at a time, so that later prompts hit the chat template's cached blocks
    caching = {**base, **serve.run_of("", "prefix_lookup").serve, "max_num_seqs": 1}
    preempting, kit_run = serve.forced_preemption(ids, max_tokens, base, model=path)
    configs = [
        _kit_config("default", path, ids, max_tokens, base),
        _kit_config("prefix caching", path, ids, max_tokens, caching),
        Config("forced preemption", preempting, kit_run.tokens or [], kit_run.preempted),
    ]
    triton = _triton_config(path, ids, base)
    if isinstance(triton, Config):
        configs.append(triton)
    skipped = (triton,) if isinstance(triton, str) else ()
    return E2EPlan(seed, prompts, ids, max_tokens, configs, path, str(default_cache_dir()), skipped)


# --- the reply's shape (the driver's and the learner's process) -----------------------------------------
def no_tokens(message: str, fatal: bool = False) -> dict[str, Any]:
    """A serve reply without tokens: ``message`` says why; ``fatal``: the learner's process is gone, stop there."""
    return {
        "tokens": None,
        "table": "",
        "error": {"message": message, **({"fatal": 1} if fatal else {})},
    }


# --- the grader: the verdict -----------------------------------------------------------------------------
@dataclass
class E2EResult:
    """One submission's end-to-end result, decided by the grader from the tokens alone.

    Attributes:
        status: ``passed`` | ``failed`` | ``not run``.
        line: the report's line ("end-to-end: ...").
        points: the instructor's weight (0: shown, not counted).
        details: one sentence per configuration.
    """

    status: str
    line: str
    points: float = 0.0
    details: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    @property
    def score(self) -> float:
        return self.points if self.passed else 0.0


def _config_verdict(ln: dict[str, Any], cfg: Config) -> tuple[bool, str]:
    """Whether one configuration's tokens equal the reference, and a sentence saying so."""
    err, tokens = ln.get("error"), ln.get("tokens")
    if isinstance(err, dict):
        comp = str(err.get("component", "") or "")
        step = err.get("step")
        where = f" in component {comp}" + (f" at engine step {step}" if isinstance(step, int) and step >= 0 else "")
        why = str(err.get("invariant") or err.get("message") or "")[:500]
        return False, f"{cfg.name}: stopped{where if comp else ''}: {why}"
    if not isinstance(tokens, list) or len(tokens) != len(cfg.reference):
        return False, f"{cfg.name}: no tokens came back"
    at = first_mismatch(tokens, cfg.reference)
    if at is None:
        return True, f"{cfg.name}: {len(tokens)} prompts identical"
    i, j = at
    mine = tokens[i][j] if j < len(tokens[i]) else "end"
    kit = cfg.reference[i][j] if j < len(cfg.reference[i]) else "end"
    blame = str(ln.get("blame") or "")
    comp = f"component {blame}" if blame else "no single part alone: the parts together"
    return (
        False,
        f"{cfg.name}: first mismatch at prompt {i}, token {j} ({mine} vs the kit's {kit}) ({comp})",
    )


def judge_e2e(
    lines: list[dict[str, Any]],
    e2e_plan: E2EPlan | None,
    points: float = 0.0,
    note: str = "",
) -> E2EResult:
    """The verdict from the driver's ``e2e`` lines: passed when every configuration that ran produced
    exactly the reference tokens (computed here, by the grader), and at least one ran.

    Args:
        lines: every line of the learner's driver (the ``e2e`` ones are used).
        e2e_plan: the plan (None: the test was off or could not be prepared; ``note`` says why).
        points: the instructor's weight of the test.
    """
    if e2e_plan is None:
        return E2EResult("not run", f"end-to-end: not run ({note or 'turned off'})", points)
    by_name = {c.name: c for c in e2e_plan.configs}
    runs = [ln for ln in lines if ln.get("type") == "e2e" and ln.get("config") in by_name]
    start = next((ln for ln in lines if ln.get("type") == "e2e_start"), None)
    if start is None:
        return E2EResult(
            "not run",
            "end-to-end: not run (no part of labs 02-08 passed its unit tests)",
            points,
        )
    planned = [str(c) for c in start.get("configs", [])] if isinstance(start.get("configs"), list) else []
    done = {str(ln["config"]) for ln in runs}
    cut = [c for c in planned if c not in done]
    if cut and not any(isinstance(ln.get("error"), dict) and ln["error"].get("fatal") for ln in runs):
        why = f"{cut[0]}: did not finish before the grading time ran out (an endless loop in the engine?)"
        return E2EResult(
            "failed",
            f"end-to-end: {why}",
            points,
            [_config_verdict(ln, by_name[str(ln["config"])])[1] for ln in runs] + [why],
        )
    if not runs:
        return E2EResult("failed", "end-to-end: no configuration ran", points)
    verdicts = [_config_verdict(ln, by_name[str(ln["config"])]) for ln in runs]
    details = [v[1] for v in verdicts]
    parts = sorted({str(s) for ln in runs if isinstance(ln.get("parts"), dict) for s in ln["parts"]})
    if all(ok for ok, _ in verdicts):
        n = len(e2e_plan.prompts)
        line = f"end-to-end: {n} prompts identical in {len(runs)} configuration(s) with your {', '.join(parts)}"
        return E2EResult("passed", line, points, details)
    first = next(text for ok, text in verdicts if not ok)
    return E2EResult("failed", f"end-to-end: {first}", points, details)
