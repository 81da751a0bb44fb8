"""Imports a vLLM module pagedlab does not provide (LoRA)."""

from vllm import LLM  # noqa: F401
from vllm.lora.request import LoRARequest  # noqa: F401
