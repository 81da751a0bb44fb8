"""The end-to-end test, the learner's process's part (:mod:`pagedlab.grading.e2e` says who does what): the engine
and the model's weights loaded before the guard, and an :class:`EngineServer` that builds the engine from the
learner's objects and serves, answering token ids, the components table and a ``ComponentError``'s slot, step
and invariant - plain data only. Importing it imports the engine (the sandbox does so only for this test).
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

from pagedlab.engine.llm import LLM  # noqa: F401 - imported for its side effect (the engine's modules)
from pagedlab.errors import ComponentError
from pagedlab.grading import serve
from pagedlab.grading.e2e import no_tokens
from pagedlab.grading.plug import components_for, render_component_state
from pagedlab.grading.runner import TimeLimitExceeded, time_limit
from pagedlab.model.fetch import ENV_CACHE_DIR
from pagedlab.model.loader import load_model_cached

__all__ = ["EngineServer", "preload"]


def preload(model: str, cache_dir: str) -> None:
    """Import the engine and load the model's weights (before the sandbox's guard is installed).

    ``cache_dir`` is the grader's model cache, where the grader's own run left the converted
    weights (the learner's process has its own ``HOME``); it is used for this load only.
    """
    old = os.environ.get(ENV_CACHE_DIR)
    os.environ[ENV_CACHE_DIR] = cache_dir
    try:
        load_model_cached(model)
    finally:
        if old is None:
            del os.environ[ENV_CACHE_DIR]
        else:
            os.environ[ENV_CACHE_DIR] = old


class EngineServer:
    """Exported by the learner's process: serve prompts on an engine built from the learner's parts.

    ``objects`` (exercise id -> the learner's object) is filled by the sandbox after the cells ran.
    """

    def __init__(self, model: str) -> None:
        self.model = model
        self.objects: dict[str, Any] = {}

    def serve(
        self,
        eids: list[str],
        prompt_ids: list[list[int]],
        max_tokens: int,
        engine_kwargs: dict[str, Any],
        limit: float,
    ) -> dict[str, Any]:
        """Greedy tokens per prompt, the components table, and the guard's error (plain data).

        Args:
            eids: exercises to plug in (their objects must have loaded).
            prompt_ids: token ids per prompt; max_tokens: tokens per prompt.
            engine_kwargs: ``LLM`` arguments; limit: seconds for the whole run.
        """
        missing = [e for e in eids if e not in self.objects]
        if missing:
            return no_tokens(f"not loaded in this process: {', '.join(missing)}")
        comps = components_for({e: self.objects[e] for e in eids})
        comps = replace(comps, time_limit_s=min(5.0, float(limit)), render=render_component_state)
        error: dict[str, Any] | None = None
        tokens: list[list[int]] | None = None
        try:
            with time_limit(float(limit)):
                got = serve.serve(
                    comps,
                    [list(p) for p in prompt_ids],
                    int(max_tokens),
                    model=self.model,
                    **engine_kwargs,
                )
            tokens, e = got.tokens, got.error
            if isinstance(e, ComponentError):
                error = {
                    "component": e.component,
                    "step": e.step,
                    "invariant": e.invariant,
                    "message": str(e)[:2000],
                }
        except TimeLimitExceeded:
            error = {"message": f"the engine did not finish within {float(limit):g} s (an endless loop?)"}
        except Exception as e:  # noqa: BLE001 - any failure of the learner's parts becomes a row
            error = {"message": f"the engine raised {type(e).__name__}: {str(e)[:1000]}"}
        return {"tokens": tokens, "table": comps.table(), "error": error}
