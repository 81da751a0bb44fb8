"""Asks for a model pagedlab does not serve."""

from vllm import LLM

LLM(model="facebook/opt-125m")
