"""Prompt types, as ``vllm.inputs`` (``vllm/inputs/data.py``, vLLM main, 2026-12-01).

They are ``TypedDict`` s, so a ``TokensPrompt(prompt_token_ids=[...])`` *is* the plain dict
``{"prompt_token_ids": [...]}`` that ``LLM.generate`` already accepts; the types only document the
shapes (and let mypy check them). Multi-modal fields are not listed: pagedlab serves a text model.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict


class TextPrompt(TypedDict):
    """A text prompt, tokenized by the engine (no chat template)."""

    prompt: str
    cache_salt: NotRequired[str]


class TokensPrompt(TypedDict):
    """A prompt given as token ids (``prompt`` is optional text kept for the output)."""

    prompt_token_ids: list[int]
    prompt: NotRequired[str]
    cache_salt: NotRequired[str]


#: Any single prompt ``LLM.generate`` accepts (as vLLM's ``PromptType``; vLLM also takes bare lists
#: of token ids only through ``TokensPrompt``).
PromptType = str | TextPrompt | TokensPrompt

__all__ = ["PromptType", "TextPrompt", "TokensPrompt"]
