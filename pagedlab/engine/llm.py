"""The offline API: ``LLM(...).generate(prompts, SamplingParams(...))``, as ``vllm.LLM``.

A script written against ``pagedlab.LLM`` runs unchanged on ``vllm.LLM`` as long as it uses
the shared names (``generate``, ``chat``, ``SamplingParams``, ``RequestOutput.outputs[i].text``).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from pagedlab.engine.arg_utils import BUNDLED_MODEL, EngineArgs
from pagedlab.engine.exclusive import OneAtATime
from pagedlab.engine.llm_engine import LLMEngine, check_priority
from pagedlab.engine.metrics import Metric
from pagedlab.errors import InvalidRequestError
from pagedlab.inputs import PromptType
from pagedlab.outputs import RequestOutput
from pagedlab.sampling_params import BeamSearchParams, RequestOutputKind, SamplingParams

if TYPE_CHECKING:
    from pagedlab.engine.beam_search import BeamSearchOutput

#: One prompt as ``LLM.generate`` takes it: vLLM's ``PromptType``, or (a pagedlab extension) a bare
#: list of token ids.
Prompt = PromptType | list[int]
#: A conversation for ``LLM.chat``: ``[{"role": ..., "content": ...}, ...]`` (vLLM's
#: ``list[ChatCompletionMessageParam]``; extra keys go to the chat template untouched).
Conversation = list[dict[str, Any]]


def _prompt_list(prompts: object) -> list[object]:
    """``prompts`` as a list: one prompt (a str, a dict, a list of token ids) becomes a list of one.

    The prompts themselves are checked later (``LLMEngine._tokenize``).
    Raises:
        InvalidRequestError: ``prompts`` is neither a prompt nor a list/tuple of them.
    """
    if isinstance(prompts, (str, dict)) or (isinstance(prompts, list) and prompts and isinstance(prompts[0], int)):
        return [prompts]
    if not isinstance(prompts, (list, tuple)):
        raise InvalidRequestError(f"prompts must be a str, a dict or a list of them, got {type(prompts).__name__}")
    return list(prompts)


def _check_conversation(conv: object, where: str) -> Conversation:
    """``conv`` itself, once checked to be a non-empty list of ``{"role": str, "content": str}`` dicts.

    Args:
        conv: the conversation.
        where: how the message names it, e.g. ``"conversation 2"``.
    Raises:
        InvalidRequestError: anything else, naming ``where`` and the bad message.
    """
    if not isinstance(conv, list) or not conv:
        raise InvalidRequestError(
            f'{where} must be a non-empty list of {{"role": ..., "content": ...}} dicts, got {type(conv).__name__}'
        )
    for j, m in enumerate(conv):
        if not isinstance(m, dict) or "role" not in m or "content" not in m:
            raise InvalidRequestError(f'{where}, message {j}: must be a dict with "role" and "content", got {m!r}')
        for key in ("role", "content"):
            if not isinstance(m[key], str):
                raise InvalidRequestError(
                    f"{where}, message {j}: {key} must be a str, got {type(m[key]).__name__} {m[key]!r}"
                )
    return conv


class LLM:
    """Generate completions for a batch of prompts with the paged engine (as ``vllm.LLM``, vLLM main, 2026-12-01).

    Args:
        model: the bundled model's hub name ``"HuggingFaceTB/SmolLM2-135M-Instruct"`` (default),
            None (the same), or a local GGUF path or directory.
        **kwargs: vLLM's engine arguments (``num_gpu_blocks_override``, ``gpu_memory_utilization``,
            ``kv_cache_memory_bytes``, ``swap_space``, ``scheduling_policy``,
            ``enable_prefix_caching`` (default True as vLLM v1), ``dtype``, ``seed``, ``tokenizer``,
            ``disable_log_stats`` (default True, as vLLM's ``LLM``) ...) and pagedlab's extensions
            (``num_gpu_blocks``, ``prefix_cache``, ``preemption_mode``, ``scheduling`` ...); see
            ``pagedlab.engine.arg_utils.EngineArgs``.
    Raises:
        TypeError: an unknown argument name (as vLLM).
        ConfigError: a value pagedlab cannot honour (e.g. ``tensor_parallel_size=2``).
        ModelNotFoundError: a model other than the bundled SmolLM2 or a local GGUF.
    """

    def __init__(self, model: str | None = BUNDLED_MODEL, **kwargs: Any) -> None:
        kwargs.setdefault("disable_log_stats", True)
        self.engine_args = EngineArgs.from_kwargs(model, **kwargs)
        self.llm_engine = LLMEngine.from_engine_args(self.engine_args)
        self._busy = OneAtATime()

    @contextlib.contextmanager
    def _one_call(self, what: str) -> Iterator[None]:
        """Run ``what`` (generate, chat, beam_search) as the only call on this LLM and its engine.

        Raises:
            ReentrantCallError: at once (nothing checked or queued) while another of them, or an
                engine step, runs: the running call keeps its requests and returns all its results.
        """
        with self._busy.hold(f"LLM.{what}"):  # another call on this LLM
            engine_busy = self.llm_engine.busy  # a step (or a beam search) driven by anyone else
            if engine_busy.holder is not None:
                raise engine_busy.busy_error(f"LLM.{what}")
            yield

    def get_tokenizer(self) -> Any:
        """The tokenizer (Hugging Face ``PreTrainedTokenizerFast``), as vLLM's."""
        return self.llm_engine.tokenizer

    def get_default_sampling_params(self) -> SamplingParams:
        """vLLM's default ``SamplingParams`` for the model; the GGUF carries no generation config,
        so these are ``SamplingParams()``'s defaults."""
        return SamplingParams()

    def get_metrics(self) -> list[Metric]:
        """vLLM's metric objects; needs ``LLM(..., disable_log_stats=False)``, as vLLM (see
        ``LLMEngine.get_metrics``)."""
        return self.llm_engine.get_metrics()

    def reset_prefix_cache(self) -> bool:
        """Forget every cached prefix block; False (nothing changes) while requests hold blocks."""
        return self.llm_engine.reset_prefix_cache()

    def generate(
        self,
        prompts: Prompt | Sequence[Prompt],
        sampling_params: SamplingParams | Sequence[SamplingParams] | None = None,
        use_tqdm: bool = False,
        priority: list[int] | None = None,
    ) -> list[RequestOutput]:
        """Run every prompt to completion.

        Args:
            prompts: a str, a list of str, a list of token-id lists, or ``{"prompt_token_ids": ...}`` dicts.
            sampling_params: one for all prompts, or one per prompt.
            use_tqdm: show a progress bar.
            priority: per-prompt priorities (``policy="priority"``).
        Returns:
            One ``RequestOutput`` per prompt, in input order.
        Raises:
            InvalidRequestError: a prompt or argument is invalid. All or nothing: every argument is
                checked before anything is queued, so after an error no prompt of this call is
                queued (the engine is exactly as before). A Ctrl-C or error while running aborts
                this call's requests and frees their blocks before propagating.
            ReentrantCallError: called while another generate, chat or beam_search (or a step)
                runs on this engine, e.g. from a tokenizer or a callback inside it; raised at once,
                and the running call is left intact.
        """
        with self._one_call("generate"):
            return self._generate(prompts, sampling_params, use_tqdm, priority)

    def _generate(
        self,
        prompts: Prompt | Sequence[Prompt],
        sampling_params: SamplingParams | Sequence[SamplingParams] | None,
        use_tqdm: bool,
        priority: list[int] | None = None,
    ) -> list[RequestOutput]:
        """``generate`` once this call holds the LLM (``_one_call``)."""
        batch = _prompt_list(prompts)
        if sampling_params is None:
            sampling_params = SamplingParams()
        if isinstance(sampling_params, SamplingParams):
            params = [sampling_params] * len(batch)
        elif isinstance(sampling_params, (list, tuple)) and all(isinstance(p, SamplingParams) for p in sampling_params):
            params = list(sampling_params)
        else:
            raise InvalidRequestError(
                f"sampling_params must be a SamplingParams or a list of them, got {type(sampling_params).__name__}"
            )
        if len(params) != len(batch):
            raise InvalidRequestError(f"{len(params)} sampling params for {len(batch)} prompts")
        # Only finished outputs are returned, so none is built before (vLLM's LLM sets FINAL_ONLY on the
        # caller's params; a copy here, so an object reused with LLMEngine.add_request keeps its kind).
        params = [_final_only(sp) for sp in params]
        priorities = self._priorities(priority, len(batch))
        engine = self.llm_engine
        # All or nothing: validate every prompt first, then queue; roll back if queueing fails.
        tokenized = [engine._tokenize(p) for p in batch]
        for (_, ids), sp in zip(tokenized, params):
            engine.validate_request(ids, sp)
        request_ids: list[str] = []
        try:
            for (text, toks), sp, prio in zip(tokenized, params, priorities):
                p = {"prompt": text, "prompt_token_ids": toks}
                request_ids.append(engine.add_request(None, p, sp, priority=prio))
        except BaseException:
            for rid in request_ids:
                engine.abort_request(rid)
            raise
        return self._run(request_ids, use_tqdm)

    @staticmethod
    def _priorities(priority: object, num_prompts: int) -> list[int]:
        """Per-prompt priorities (all 0 when None), checked before anything is queued."""
        if priority is None:
            return [0] * num_prompts
        if not isinstance(priority, (list, tuple)):
            raise InvalidRequestError(f"priority must be a list of ints, one per prompt, got {type(priority).__name__}")
        if len(priority) != num_prompts:
            raise InvalidRequestError(f"{len(priority)} priorities for {num_prompts} prompts")
        for p in priority:
            check_priority(p)
        return list(priority)

    def chat(
        self,
        messages: Conversation | list[Conversation],
        sampling_params: SamplingParams | Sequence[SamplingParams] | None = None,
        use_tqdm: bool = False,
        add_generation_prompt: bool = True,
    ) -> list[RequestOutput]:
        """Generate replies to conversations formatted with the model's chat template.

        Args:
            messages: one conversation (a list of ``{"role", "content"}`` dicts) or a list of them.
        Raises:
            InvalidRequestError: a conversation is not a non-empty list of dicts with a str
                ``role`` and a str ``content`` (``None`` included); nothing is queued then.
            ReentrantCallError: as ``generate``.
        """
        with self._one_call("chat"):
            return self._chat(messages, sampling_params, use_tqdm, add_generation_prompt)

    def _chat(
        self,
        messages: Conversation | list[Conversation],
        sampling_params: SamplingParams | Sequence[SamplingParams] | None,
        use_tqdm: bool,
        add_generation_prompt: bool,
    ) -> list[RequestOutput]:
        """``chat`` once this call holds the LLM (``_one_call``)."""
        convs: object = messages
        if isinstance(messages, list) and messages and isinstance(messages[0], dict):
            convs = [messages]
        if not isinstance(convs, list):
            raise InvalidRequestError(
                'chat() takes a conversation [{"role": ..., "content": ...}, ...] '
                f"or a list of conversations, got {type(convs).__name__}"
            )
        checked = [_check_conversation(conv, f"conversation {i}") for i, conv in enumerate(convs)]
        if self.llm_engine.tokenizer is None:
            raise InvalidRequestError("chat() needs a tokenizer with a chat template; this engine has none")
        ids = [self.apply_chat_template(m, add_generation_prompt) for m in checked]
        # RequestOutput.prompt is the rendered conversation, as vLLM's chat() returns it.
        prompts: list[Prompt] = [{"prompt": self.llm_engine.tokenizer.decode(t), "prompt_token_ids": t} for t in ids]
        return self._generate(prompts, sampling_params, use_tqdm)

    def apply_chat_template(self, conversation: Conversation, add_generation_prompt: bool = True) -> list[int]:
        """Token ids of a conversation under the tokenizer's chat template."""
        out = self.llm_engine.tokenizer.apply_chat_template(
            conversation, add_generation_prompt=add_generation_prompt, tokenize=True
        )
        return list(out["input_ids"] if isinstance(out, dict) or hasattr(out, "keys") else out)

    def beam_search(self, prompts: Prompt | Sequence[Prompt], params: BeamSearchParams) -> list[BeamSearchOutput]:
        """Beam search with copy-on-write forks (vLLM v0 semantics; see ``pagedlab.engine.beam_search``).

        Args:
            prompts: a prompt or a list (str, token ids, or ``{"prompt_token_ids": ...}``).
            params: ``BeamSearchParams(beam_width, max_tokens)``.
        Returns:
            One ``BeamSearchOutput`` per prompt (``.sequences`` best first, with block accounting).
        Raises:
            ReentrantCallError: as ``generate``.
        """
        with self._one_call("beam_search"):
            return self._beam_search(prompts, params)

    def _beam_search(self, prompts: Prompt | Sequence[Prompt], params: BeamSearchParams) -> list[BeamSearchOutput]:
        """``beam_search`` once this call holds the LLM (``_one_call``)."""
        from pagedlab.engine.beam_search import beam_search

        if not isinstance(params, BeamSearchParams):
            raise InvalidRequestError(f"params must be BeamSearchParams, got {type(params).__name__}")
        batch = _prompt_list(prompts)
        engine = self.llm_engine
        token_ids = [engine._tokenize(p)[1] for p in batch]  # all checked before any search runs
        max_seqs = engine.scheduler_config.max_num_seqs
        if params.beam_width > max_seqs:
            raise InvalidRequestError(
                f"beam_width={params.beam_width} beams run as {params.beam_width} sequences but max_num_seqs="
                f"{max_seqs}; lower beam_width or raise max_num_seqs"
            )
        check = SamplingParams(temperature=0, max_tokens=params.max_tokens, ignore_eos=True, n=params.beam_width)
        for ids in token_ids:
            engine.validate_request(ids, check)
        results: list[BeamSearchOutput] = []
        for ids in token_ids:
            try:
                results.append(beam_search(engine, ids, params))
            except BaseException:
                engine._recover_from_failed_step()  # a Ctrl-C mid-search: free every beam's blocks
                raise
        return results

    def _run(self, ids: list[str], use_tqdm: bool) -> list[RequestOutput]:
        engine = self.llm_engine
        wanted = set(ids)
        done: dict[str, RequestOutput] = {}
        bar = None
        if use_tqdm:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(ids), desc="Processed prompts", unit="req")
        try:
            while engine.has_unfinished_requests() and len(done) < len(ids):
                for o in engine.step():
                    if o.finished and o.request_id in wanted:
                        done[o.request_id] = o
                        if bar is not None:
                            bar.update(1)
        except BaseException:
            # An error or a Ctrl-C mid-run: abort this call's requests so their blocks are freed
            # and the next generate() starts from a clean engine.
            for i in ids:
                if i not in done:
                    engine.abort_request(i)
            raise
        finally:
            if bar is not None:
                bar.close()
        return [done[i] for i in ids]


def _final_only(sp: SamplingParams) -> SamplingParams:
    """``sp`` with ``output_kind=FINAL_ONLY`` (a copy unless it already is)."""
    if sp.output_kind is RequestOutputKind.FINAL_ONLY:
        return sp
    return dataclasses.replace(sp, output_kind=RequestOutputKind.FINAL_ONLY)
