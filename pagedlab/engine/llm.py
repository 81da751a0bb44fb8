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
from pagedlab.engine.beam_search import beam_search
from pagedlab.engine.exclusive import OneAtATime
from pagedlab.engine.input_processor import check_priority
from pagedlab.engine.llm_engine import LLMEngine
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

    The prompts themselves are checked later (``InputProcessor.tokenize``).
    Raises:
        InvalidRequestError: ``prompts`` is neither a prompt nor a list/tuple of them.
    """
    if isinstance(prompts, (str, dict)) or (isinstance(prompts, list) and prompts and isinstance(prompts[0], int)):
        return [prompts]
    if not isinstance(prompts, (list, tuple)):
        raise InvalidRequestError(f"prompts must be a str, a dict or a list of them, got {type(prompts).__name__}")
    return list(prompts)


#: vLLM 0.32's text content-part types (``TEXT_PART_TYPES``, vllm/renderers/chat_utils.py:1815).
TEXT_PART_TYPES = frozenset({"text", "input_text", "output_text", "refusal", "thinking"})
#: ``LLM.chat(chat_template_content_format=...)``, as vLLM 0.32.
CONTENT_FORMATS = ("auto", "string", "openai")


def _check_content(content: object, where: str) -> None:
    """A message's content: a str, or a list of OpenAI-style text parts (``{"type": "text", "text": ...}``
    or a bare str), as vLLM 0.32's ``parse_chat_messages`` takes them.

    Raises:
        InvalidRequestError: anything else; a non-text part (image, audio ...) is named as not implemented.
    """
    if isinstance(content, str):
        return
    if not isinstance(content, list):
        raise InvalidRequestError(
            f'{where}: content must be a str or a list of {{"type": "text", "text": ...}} parts, '
            f"got {type(content).__name__} {content!r}"
        )
    for k, part in enumerate(content):
        if isinstance(part, str):
            continue
        kind = part.get("type") if isinstance(part, dict) else None
        if kind not in TEXT_PART_TYPES:
            what = f"type {kind!r}" if isinstance(part, dict) else type(part).__name__
            raise InvalidRequestError(
                f"{where}, content part {k}: only text parts are implemented in pagedlab (multi-modal inputs are "
                f"not), got {what}: {part!r}"
            )
        if not isinstance(part.get("text"), str):
            raise InvalidRequestError(f"{where}, content part {k}: text must be a str, got {part!r}")


def _check_conversation(conv: object, where: str) -> Conversation:
    """``conv`` itself, once checked to be a non-empty list of ``{"role": str, "content": ...}`` dicts, the
    content a str or a list of text parts (``_check_content``).

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
        if not isinstance(m["role"], str):
            raise InvalidRequestError(
                f"{where}, message {j}: role must be a str, got {type(m['role']).__name__} {m['role']!r}"
            )
        if m["content"] is None:
            raise InvalidRequestError(f"{where}, message {j}: content must be a str, got NoneType None")
        _check_content(m["content"], f"{where}, message {j}")
    return conv


def _part_text(part: str | dict[str, Any]) -> str:
    return part if isinstance(part, str) else str(part["text"])


def _render_message(m: dict[str, Any], content_format: str) -> dict[str, Any]:
    """One checked message as vLLM 0.32 hands it to the chat template (``_parse_chat_message_content``,
    vllm/renderers/chat_utils.py:2074): "string": text parts joined with newlines; "openai": a list of
    ``{"type": "text", "text": ...}``. Other keys are kept, as the kit always did (vLLM keeps ``name``,
    ``tool_calls``, ``tool_call_id``, ``reasoning``)."""
    content = m["content"]
    parts = [content] if isinstance(content, str) else content
    if content_format == "openai":
        rendered: object = [{"type": "text", "text": _part_text(p)} for p in parts]
    elif isinstance(content, str):
        rendered = content
    else:
        rendered = "\n".join(_part_text(p) for p in parts)
    return {**m, "content": rendered}


def _detect_content_format(template: str | None) -> str:
    """vLLM 0.32's "auto" (``_detect_content_format``, vllm/renderers/hf.py:491), in its direct form: "openai"
    when the template loops over a message's content (``{% for part in message['content'] %}``), else
    "string". vLLM also follows the content through assignments and macros (hf.py:405-477); the kit does not."""
    if not template:
        return "string"
    import jinja2  # lazy: start-up time (only chat templates need jinja2)
    from jinja2 import nodes  # lazy: start-up time (only chat templates need jinja2)

    try:
        ast = jinja2.Environment(extensions=["jinja2.ext.loopcontrols"]).parse(template)
    except jinja2.TemplateError:
        return "string"
    message_vars = {
        loop.target.name
        for loop in ast.find_all(nodes.For)
        if isinstance(loop.iter, nodes.Name) and loop.iter.name == "messages" and isinstance(loop.target, nodes.Name)
    }
    for loop in ast.find_all(nodes.For):
        it = loop.iter
        of_content = (isinstance(it, nodes.Getattr) and it.attr == "content") or (
            isinstance(it, nodes.Getitem) and isinstance(it.arg, nodes.Const) and it.arg.value == "content"
        )
        owner = getattr(it, "node", None)
        if of_content and isinstance(owner, nodes.Name) and owner.name in message_vars:
            return "openai"
    return "string"


def _conversations(messages: object) -> list[Conversation]:
    """``LLM.chat``'s ``messages`` as a list of checked conversations (one conversation becomes a list of one)."""
    convs: object = messages
    if isinstance(messages, list) and messages and isinstance(messages[0], dict):
        convs = [messages]
    if not isinstance(convs, list):
        raise InvalidRequestError(
            'chat() takes a conversation [{"role": ..., "content": ...}, ...] '
            f"or a list of conversations, got {type(convs).__name__}"
        )
    return [_check_conversation(conv, f"conversation {i}") for i, conv in enumerate(convs)]


def _template_text(tokenizer: Any, chat_template: str | None, template_kwargs: dict[str, Any]) -> str | None:
    """The Jinja text ``chat_template`` stands for: itself, or the tokenizer's template it names (None: its
    default); None when the tokenizer has none."""
    if chat_template is not None and "{" in chat_template:
        return chat_template
    try:
        return str(tokenizer.get_chat_template(chat_template, tools=template_kwargs.get("tools")))
    except (AttributeError, TypeError, ValueError):
        return None


class LLM:
    """Generate completions for a batch of prompts with the paged engine (as ``vllm.LLM``, vLLM 0.32.0).

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
        priority: int | list[int] | None = None,
    ) -> list[RequestOutput]:
        """Run every prompt to completion.

        Args:
            prompts: a str, a list of str, a list of token-id lists, or ``{"prompt_token_ids": ...}`` dicts.
            sampling_params: one for all prompts, or one per prompt.
            use_tqdm: show a progress bar.
            priority: per-prompt priorities, or one int for all (``policy="priority"``).
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
        priority: int | list[int] | None = None,
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
        tokenized = [engine.input_processor.tokenize(p) for p in batch]
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
        """Per-prompt priorities (all 0 when None; one int: that for every prompt, as vLLM 0.32's
        ``_priority_to_seq``), checked before anything is queued."""
        if priority is None:
            return [0] * num_prompts
        if isinstance(priority, int) and not isinstance(priority, bool):
            return [priority] * num_prompts
        if not isinstance(priority, (list, tuple)):
            raise InvalidRequestError(
                f"priority must be an int or a list of ints, one per prompt, got {type(priority).__name__}"
            )
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
        lora_request: object = None,
        priority: int | list[int] | None = None,
        chat_template: str | None = None,
        chat_template_content_format: str = "auto",
        add_generation_prompt: bool = True,
        continue_final_message: bool = False,
        tools: list[dict[str, Any]] | None = None,
        chat_template_kwargs: dict[str, Any] | None = None,
        tokenization_kwargs: dict[str, Any] | None = None,
        mm_processor_kwargs: dict[str, Any] | None = None,
    ) -> list[RequestOutput]:
        """Generate replies to conversations formatted with the chat template (vLLM 0.32.0's ``LLM.chat``,
        same parameters in the same order).

        Args:
            messages: one conversation (a list of ``{"role", "content"}`` dicts; content a str or a list of
                OpenAI-style text parts ``{"type": "text", "text": ...}``) or a list of them.
            sampling_params: one for all conversations, or one each.
            priority: one int for all, or one per conversation (``scheduling_policy="priority"``).
            chat_template: a Jinja template (or the name of one the tokenizer has) instead of the model's.
            chat_template_content_format: how content reaches the template: "string" (text parts joined
                with newlines), "openai" (a list of text parts), "auto" (detected from the template).
            add_generation_prompt, continue_final_message, tools: passed to the template (vLLM's meaning:
                ``continue_final_message=True`` leaves the last message open; it needs
                ``add_generation_prompt=False``).
            chat_template_kwargs: more variables for the template; the arguments above win over them.
            lora_request, tokenization_kwargs, mm_processor_kwargs: not implemented (LoRA, tokenizer
                overrides, multi-modal inputs): anything but None is refused.
        Raises:
            InvalidRequestError: a conversation is not a non-empty list of dicts with a str ``role`` and a str
                or text-part ``content``, an argument is not implemented, or the template refuses the
                conversation; nothing is queued then.
            ReentrantCallError: as ``generate``.
        """
        for name, value in (
            ("lora_request", lora_request),
            ("tokenization_kwargs", tokenization_kwargs),
            ("mm_processor_kwargs", mm_processor_kwargs),
        ):
            if value is not None:
                raise InvalidRequestError(
                    f"LLM.chat({name}=...) is not implemented in pagedlab (no LoRA, no tokenizer overrides, no "
                    "multi-modal inputs); pass None"
                )
        if chat_template_content_format not in CONTENT_FORMATS:
            raise InvalidRequestError(
                f"chat_template_content_format must be one of {', '.join(map(repr, CONTENT_FORMATS))}, "
                f"got {chat_template_content_format!r}"
            )
        template_kwargs = dict(chat_template_kwargs or {})
        unexpected = {"chat_template", "tokenize"} & template_kwargs.keys()
        if unexpected:  # vLLM 0.32's resolve_chat_template_kwargs (vllm/renderers/hf.py)
            raise InvalidRequestError(f"Found unexpected chat template kwargs from request: {unexpected}")
        # vLLM's merge_kwargs: the named arguments win over chat_template_kwargs, unless None
        named = {
            "add_generation_prompt": add_generation_prompt,
            "continue_final_message": continue_final_message,
            "tools": tools,
        }
        template_kwargs.update({k: v for k, v in named.items() if v is not None})
        with self._one_call("chat"):
            return self._chat(
                messages,
                sampling_params,
                use_tqdm,
                priority,
                chat_template,
                chat_template_content_format,
                template_kwargs,
            )

    def _chat(
        self,
        messages: Conversation | list[Conversation],
        sampling_params: SamplingParams | Sequence[SamplingParams] | None,
        use_tqdm: bool,
        priority: int | list[int] | None,
        chat_template: str | None,
        content_format: str,
        template_kwargs: dict[str, Any],
    ) -> list[RequestOutput]:
        """``chat`` once this call holds the LLM (``_one_call``)."""
        import jinja2  # lazy: start-up time (only chat templates need jinja2)

        checked = _conversations(messages)
        tokenizer = self.llm_engine.tokenizer
        if tokenizer is None:
            raise InvalidRequestError("chat() needs a tokenizer with a chat template; this engine has none")
        if content_format == "auto":
            content_format = _detect_content_format(_template_text(tokenizer, chat_template, template_kwargs))
        if chat_template is not None:
            template_kwargs = {**template_kwargs, "chat_template": chat_template}
        ids = []
        for conv in checked:
            rendered = [_render_message(m, content_format) for m in conv]
            try:
                ids.append(self.apply_chat_template(rendered, **template_kwargs))
            except InvalidRequestError:
                raise
            except (ValueError, jinja2.TemplateError) as e:
                # vLLM 0.32 answers a template's refusal with VLLMValidationError (safe_apply_chat_template,
                # vllm/renderers/hf.py), as transformers' "continue_final_message and add_generation_prompt"
                raise InvalidRequestError(f"the chat template refused the conversation: {e}") from e
        # RequestOutput.prompt is the rendered conversation, as vLLM's chat() returns it.
        prompts: list[Prompt] = [{"prompt": tokenizer.decode(t), "prompt_token_ids": t} for t in ids]
        return self._generate(prompts, sampling_params, use_tqdm, priority)

    def apply_chat_template(
        self, conversation: Conversation, add_generation_prompt: bool = True, **kwargs: Any
    ) -> list[int]:
        """Token ids of a conversation under the tokenizer's chat template; ``kwargs`` go to the tokenizer's
        ``apply_chat_template`` (``chat_template``, ``continue_final_message``, ``tools``, template variables)."""
        out = self.llm_engine.tokenizer.apply_chat_template(
            conversation, add_generation_prompt=add_generation_prompt, tokenize=True, **kwargs
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
        if not isinstance(params, BeamSearchParams):
            raise InvalidRequestError(f"params must be BeamSearchParams, got {type(params).__name__}")
        batch = _prompt_list(prompts)
        engine = self.llm_engine
        token_ids = [engine.input_processor.tokenize(p)[1] for p in batch]  # all checked before any search runs
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
            from tqdm.auto import tqdm  # lazy: start-up time (tqdm.auto imports ipywidgets in a notebook)

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
