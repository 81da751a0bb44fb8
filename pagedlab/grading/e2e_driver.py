"""The end-to-end test, the driver's part (trusted, no learner code; :mod:`pagedlab.grading.e2e` says who does
what): which of the learner's parts are plugged in, which configurations run, the serve calls across the pipe
checked to be plain data, and on a mismatch the part to blame (serving again with one part plugged at a time).
"""

from __future__ import annotations

from typing import Any

from pagedlab.grading import registry, serve
from pagedlab.grading.e2e import no_tokens
from pagedlab.grading.judge import judge
from pagedlab.grading.plug import BRIDGES
from pagedlab.grading.runner import TimeLimitExceeded, reference_transcript, time_limit
from pagedlab.grading.serve import first_mismatch

__all__ = ["configs_for", "passed_parts", "run_e2e", "slots_of"]


def passed_parts(transcripts: dict[tuple[str, str], Any]) -> list[str]:
    """The bridged exercises whose every public test passed (judged here against the reference).

    Args:
        transcripts: ``(exercise id, test title) -> the learner's transcript`` of the public tests.
    """
    out = []
    for eid in BRIDGES:
        try:
            ex = registry.get(eid)
        except registry.UnknownExerciseError:
            continue
        tests = ex.public_tests()
        if tests and all(
            (eid, t.title) in transcripts
            and judge(
                ex,
                t,
                reference_transcript(ex, t),
                transcripts[(eid, t.title)],
                pictures=False,
            ).passed
            for t in tests
        ):
            out.append(eid)
    return out


def slots_of(eids: list[str]) -> dict[str, str]:
    """slot -> the exercise filling it, as ``components_for`` plugs them (first in ``BRIDGES`` order)."""
    out: dict[str, str] = {}
    for eid in BRIDGES:
        if eid in eids:
            out.setdefault(BRIDGES[eid][0], eid)
    return out


def configs_for(eids: list[str], configs: list[dict[str, Any]]) -> list[tuple[dict[str, Any], list[str]]]:
    """The configurations to run for the plugged ``eids``, each with the exercises plugged there."""
    slots = slots_of(eids)
    out: list[tuple[dict[str, Any], list[str]]] = []
    for c in configs:
        if c["name"] == "prefix caching" and "prefix_lookup" not in slots:
            continue
        if c["name"] == "triton kernel" and "triton_tile_load" not in slots:
            continue
        used = list(eids)
        if c["name"] == "forced preemption":  # the kit's step runs there in place of one that cannot preempt
            runs = {e: serve.run_of(e, BRIDGES.get(e, ("",))[0]) for e in eids}
            used = [e for e in eids if not runs[e].cannot_preempt]
            if not any(runs[e].preempts for e in used):
                continue
        out.append((c, used))
    return out


def _reply(got: Any, n_prompts: int) -> dict[str, Any]:
    """The learner process's reply, checked to be ``{"tokens": [[int]] | None, "table": str, "error": ...}``.

    Raises:
        ValueError: anything else.
    """
    if type(got) is not dict:
        raise ValueError("not a dict")
    tokens, table, error = got.get("tokens"), got.get("table"), got.get("error")
    if tokens is not None and not (
        type(tokens) is list
        and len(tokens) == n_prompts
        and all(type(t) is list and all(type(x) is int for x in t) for t in tokens)
    ):
        raise ValueError("tokens are not one list of ints per prompt")
    if type(table) is not str:
        raise ValueError("the components table is not a str")
    if error is not None and not (
        type(error) is dict
        and all(type(k) is str and type(v) in (str, int) for k, v in error.items())
        and type(error.get("message")) is str
    ):
        raise ValueError("the error is not plain data")
    if tokens is None and error is None:
        raise ValueError("neither tokens nor an error")
    return {"tokens": tokens, "table": table[:4000], "error": error}


def _serve(
    server: Any,
    eids: list[str],
    prompt_ids: list[list[int]],
    max_tokens: int,
    kwargs: dict[str, Any],
    limit: float,
) -> dict[str, Any]:
    """One serve call across the pipe, under a backstop time limit; a plain reply or an error dict."""
    try:
        with time_limit(limit + 10.0):  # the learner's process enforces ``limit`` itself
            got = server.serve(eids, prompt_ids, max_tokens, kwargs, limit)
    except TimeLimitExceeded:
        return no_tokens(
            f"the process running your code stopped answering (over {limit + 10:g} s)",
            fatal=True,
        )
    except BaseException as e:  # noqa: BLE001 - ChannelClosed included: the process died
        return no_tokens(f"the process running your code ended: {type(e).__name__}", fatal=True)
    try:
        return _reply(got, len(prompt_ids))
    except ValueError as e:
        return no_tokens(f"the process running your code sent a malformed reply ({e})")


def _blame(
    server: Any,
    eids: list[str],
    prompt: list[int],
    reference: list[int],
    max_tokens: int,
    kwargs: dict[str, Any],
    limit: float,
) -> str:
    """The slot whose part alone changes ``prompt``'s tokens ("" when none does alone)."""
    for slot, eid in slots_of(eids).items():
        r = _serve(server, [eid], [prompt], max_tokens, kwargs, limit)
        if r["error"] is not None and r["error"].get("fatal"):
            return ""
        if r["error"] is not None or r["tokens"] != [reference]:
            return slot
    return ""


def run_e2e(server: Any, eids: list[str], job: dict[str, Any], base_limit: float) -> list[dict[str, Any]]:
    """Serve every configuration on the learner's parts; one ``e2e`` result line per configuration.

    Args:
        server: the proxy of the learner process's :class:`~pagedlab.grading.e2e_learner.EngineServer`.
        eids: the plugged exercises (see :func:`passed_parts`).
        job: :meth:`~pagedlab.grading.e2e.E2EPlan.job`.
        base_limit: seconds one configuration may take in the learner's process, unless the configuration has its
            own ``limit_s`` (the Triton one), which is multiplied by ``job["time_scale"]`` (``base_limit`` already is).
    """
    lines = []
    scale = float(job.get("time_scale", 1.0))
    for cfg, used in configs_for(eids, job["configs"]):
        prompt_ids, max_tokens = (
            cfg.get("prompt_ids", job["prompt_ids"]),
            cfg.get("max_tokens", job["max_tokens"]),
        )
        limit = float(cfg.get("limit_s") or 0.0) * scale or base_limit
        r = _serve(server, used, prompt_ids, max_tokens, cfg["engine_kwargs"], limit)
        line = {
            "type": "e2e",
            "config": cfg["name"],
            "parts": slots_of(used),
            **r,
            "blame": "",
        }
        at = first_mismatch(r["tokens"], cfg["reference"]) if r["tokens"] is not None else None
        if at is not None:
            line["blame"] = _blame(
                server,
                used,
                prompt_ids[at[0]],
                cfg["reference"][at[0]],
                max_tokens,
                cfg["engine_kwargs"],
                limit,
            )
        lines.append(line)
        if r["error"] is not None and r["error"].get("fatal"):
            break
    return lines
