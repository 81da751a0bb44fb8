"""Load SmolLM2 (or any Llama-architecture GGUF) into pagedlab's own forward pass.

HF transformers (with the ``gguf`` package) parses and de-quantizes the GGUF once; pagedlab
then keeps an fp32 safetensors copy, the config and the tokenizer in the cache directory, so
later loads (every notebook, every test) take a second or two instead of ~20 s. Nothing is
fetched from a hub: the GGUF comes from ``pagedlab fetch-model``.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from pagedlab.errors import (
    CacheNotWritableError,
    ModelFileCorruptError,
    ModelNotFoundError,
)
from pagedlab.model.fetch import default_cache_dir, ensure_model
from pagedlab.model.llama import LlamaConfig, LlamaForCausalLM

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

_CONVERTED_FORMAT = 2  # bump when the converted layout changes
# Hub names that mean the kit's own GGUF, so a script written for vLLM
# (``LLM("HuggingFaceTB/SmolLM2-135M-Instruct")``) runs unchanged; nothing is downloaded.
_ALIASES = {"huggingfacetb/smollm2-135m-instruct", "smollm2-135m-instruct"}


def resolve_model_path(model: str | os.PathLike[str] | None) -> Path:
    """The GGUF file to load.

    Args:
        model: a ``.gguf`` file, a directory holding exactly one, or ``None`` (or the hub name
            ``"HuggingFaceTB/SmolLM2-135M-Instruct"``) for the kit's SmolLM2-135M-Instruct
            (fetched and verified by ``pagedlab fetch-model``).
    Raises:
        ModelNotFoundError: the path does not exist or holds no GGUF file.
    """
    if model is None or str(model).lower() in _ALIASES:
        return Path(ensure_model())
    path = Path(model).expanduser()
    if path.is_dir():
        found = sorted(path.glob("*.gguf"))
        if len(found) != 1:
            raise ModelNotFoundError(f"expected one .gguf file in {path}, found {len(found)}")
        return found[0]
    if not path.is_file():
        raise ModelNotFoundError(
            f"model file not found: {path}. Pass a .gguf path, or model=None for SmolLM2 "
            f"(run `pagedlab fetch-model` first)."
        )
    return path


def _converted_dir(gguf: Path) -> Path:
    st = gguf.stat()
    return Path(default_cache_dir()) / "converted" / f"{gguf.stem}-{st.st_size}-{int(st.st_mtime)}-v{_CONVERTED_FORMAT}"


def _convert(gguf: Path, out: Path) -> None:
    """De-quantize the GGUF with transformers and store fp32 safetensors + config + tokenizer."""
    from safetensors.torch import save_file  # lazy: start-up time (safetensors.torch imports torch)
    from transformers import AutoModelForCausalLM, AutoTokenizer  # lazy: start-up time (transformers imports torch)
    from transformers.utils import logging as hf_logging  # lazy: start-up time (transformers imports torch)

    # one-off conversion: no tqdm bars in notebook cells (the helper is unannotated in transformers)
    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
            hf = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    except Exception as e:  # transformers raises many types for a damaged file
        raise ModelFileCorruptError(
            f"could not read {gguf} as a GGUF model ({type(e).__name__}: {e}). Re-run `pagedlab fetch-model --force`."
        ) from e
    if hf.config.model_type != "llama":
        raise ModelFileCorruptError(f"{gguf} is a {hf.config.model_type!r} model; pagedlab runs Llama models")
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    tmp.mkdir(parents=True, exist_ok=True)
    sd = {
        k: v.contiguous()
        for k, v in hf.state_dict().items()
        if k != "lm_head.weight" or not hf.config.tie_word_embeddings
    }
    save_file(sd, str(tmp / "model.safetensors"))
    cfg = LlamaConfig.from_hf(hf.config)
    meta = {
        "llama": cfg.__dict__,
        "eos_token_id": hf.config.eos_token_id,
        "bos_token_id": hf.config.bos_token_id,
        "source": str(gguf),
    }
    (tmp / "pagedlab_config.json").write_text(json.dumps(meta, indent=1))
    tok.save_pretrained(tmp)
    # Also a plain HF config, so transformers can load this folder directly (benchmarks, tests).
    hf.config.quantization_config = None
    if hasattr(hf.config, "_pre_quantization_dtype"):
        del hf.config._pre_quantization_dtype
    hf.config.save_pretrained(tmp)
    try:
        os.replace(tmp, out)
    except OSError:  # another process converted it first: keep theirs
        shutil.rmtree(tmp, ignore_errors=True)
        if not (out / "model.safetensors").exists():
            raise


def _fallback_converted_dir(gguf: Path) -> Path:
    """A per-user place in the system temp directory for the converted copy (read-only cache)."""
    uid = os.getuid() if hasattr(os, "getuid") else os.getpid()
    return Path(tempfile.gettempdir()) / f"pagedlab-{uid}" / "converted" / _converted_dir(gguf).name


def _ensure_converted(gguf: Path) -> Path:
    """The directory of ``gguf``'s converted copy, converting it first if needed.

    The cache directory (``$PAGEDLAB_CACHE_DIR`` or ``~/.cache/pagedlab``) is tried first; if it
    cannot be written (a read-only shared cache holding only the verified GGUF), the copy goes to
    the system temp directory instead, with a warning.

    Raises:
        CacheNotWritableError: neither place can be written; the message names PAGEDLAB_CACHE_DIR.
        ModelFileCorruptError: the GGUF cannot be read.
    """
    out, fallback = _converted_dir(gguf), _fallback_converted_dir(gguf)
    for made in (out, fallback):
        if (made / "model.safetensors").exists():
            return made
    try:
        _convert(gguf, out)
        return out
    except OSError as e:
        first = e
    warnings.warn(
        f"cannot write the converted model under {out.parent} ({first}); using {fallback.parent} "
        f"instead. Set PAGEDLAB_CACHE_DIR to a writable directory to keep it",
        stacklevel=3,
    )
    try:
        _convert(gguf, fallback)
    except OSError as e:
        raise CacheNotWritableError(
            f"cannot write the converted model copy: {out.parent} ({first}) and {fallback.parent} ({e}) are not "
            f"writable.\n  fix: set PAGEDLAB_CACHE_DIR to a writable directory (the verified GGUF may stay "
            f"where it is: copy or link {gguf.name} there)"
        ) from e
    return fallback


def load_tokenizer(model: str | os.PathLike[str] | None = None) -> PreTrainedTokenizerBase:
    """The model's tokenizer (HF ``PreTrainedTokenizerFast``), chat template included."""
    return load_model(model, tokenizer_only=True)[1]


def load_model(
    model: str | os.PathLike[str] | None = None, tokenizer_only: bool = False
) -> tuple[LlamaForCausalLM | None, PreTrainedTokenizerBase, dict[str, Any]]:
    """Load the model, its tokenizer and metadata.

    Returns:
        ``(model, tokenizer, meta)``; ``model`` is an fp32 ``LlamaForCausalLM`` in eval mode
        (``None`` if ``tokenizer_only``); ``meta`` has ``eos_token_id``, ``bos_token_id``, ``llama``.
    Raises:
        ModelNotFoundError: no such file. ModelFileCorruptError: unreadable GGUF.
        CacheNotWritableError: the converted copy cannot be written anywhere (see ``_ensure_converted``).
    """
    gguf = resolve_model_path(model)
    out = _ensure_converted(gguf)
    from transformers import AutoTokenizer  # lazy: start-up time (transformers imports torch)

    meta = json.loads((out / "pagedlab_config.json").read_text())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tok = AutoTokenizer.from_pretrained(out)
    if tokenizer_only:
        return None, tok, meta
    return _net(LlamaConfig(**meta["llama"]), out / "model.safetensors"), tok, meta


def _net(cfg: LlamaConfig, weights: Path) -> LlamaForCausalLM:
    """A ``LlamaForCausalLM`` of ``cfg`` (eval mode, CPU) holding the HF-named weights of ``weights`` (safetensors)."""
    from safetensors.torch import load_file  # lazy: start-up time (safetensors.torch imports torch)

    with torch.device("meta"):
        net = LlamaForCausalLM(cfg)
    net = net.to_empty(device="cpu")
    net.load_hf_state_dict(load_file(str(weights)))
    return net.eval()


def load_hf_folder(folder: str | os.PathLike[str]) -> LlamaForCausalLM:
    """An fp32 ``LlamaForCausalLM`` (eval mode) with the weights of a Hugging Face Llama folder
    (``config.json`` + ``model.safetensors``, as ``save_pretrained`` writes it; the folder vLLM loads).

    Raises:
        ModelNotFoundError: the folder lacks ``config.json`` or ``model.safetensors``.
        ModelFileCorruptError: the config is not a Llama model's.
    """
    path = Path(folder).expanduser()
    for name in ("config.json", "model.safetensors"):
        if not (path / name).is_file():
            raise ModelNotFoundError(f"{path} is not a Hugging Face model folder: no {name}")
    from transformers import AutoConfig  # lazy: start-up time (transformers imports torch)

    hf = AutoConfig.from_pretrained(path)
    if hf.model_type != "llama":
        raise ModelFileCorruptError(f"{path} holds a {hf.model_type!r} model; pagedlab runs Llama models")
    return _net(LlamaConfig.from_hf(hf), path / "model.safetensors")


@functools.lru_cache(maxsize=4)
def _load_cached(path: str) -> tuple[LlamaForCausalLM, PreTrainedTokenizerBase, dict[str, Any]]:
    net, tok, meta = load_model(path)
    assert net is not None  # load_model returns None only with tokenizer_only=True
    return net, tok, meta


def load_model_cached(
    model: str | os.PathLike[str] | None = None,
) -> tuple[LlamaForCausalLM, PreTrainedTokenizerBase, dict[str, Any]]:
    """``load_model`` memoised per resolved path, so many engines share one set of weights.

    Raises: as :func:`load_model`."""
    return _load_cached(str(resolve_model_path(model)))
