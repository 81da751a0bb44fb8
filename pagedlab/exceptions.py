"""vLLM 0.32.0's exception classes (``vllm/exceptions.py``), under vLLM's names; ``vllm.exceptions`` for scripts.

``pagedlab run-vllm`` serves this module as ``vllm.exceptions`` (``pagedlab.vllm_compat``), so a script written
for vLLM 0.32.0 that catches ``VLLMValidationError`` imports and runs unchanged. The kit's own refusal of a
request, ``pagedlab.errors.InvalidRequestError``, derives from :class:`VLLMValidationError` (and from
``ValueError``, as it always did): ``except VLLMValidationError`` catches every request the kit refuses,
as on vLLM. On vLLM 0.32.0 a ``VLLMValidationError`` is **not** a ``ValueError`` (``VLLMError`` derives from
``Exception`` only) and some refusals there are plain ``ValueError``; a script that must behave the same on
both catches ``(VLLMValidationError, ValueError)``. The classes the kit never raises (the server's and
LoRA's) are here so that importing them works. Standard library only.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

__all__ = [
    "GenerationError",
    "GracefulHTTPError",
    "LoRAAdapterNotFoundError",
    "MaxQueuedTokensError",
    "ProfilerAlreadyActiveError",
    "QueueOverflowError",
    "RetryableRequestError",
    "VLLMClientError",
    "VLLMError",
    "VLLMNotFoundError",
    "VLLMServerError",
    "VLLMUnprocessableEntityError",
    "VLLMValidationError",
]


class VLLMError(Exception):
    """Base class of vLLM's own errors (vLLM 0.32.0: split into client (4xx) and server (5xx) errors)."""


class VLLMClientError(VLLMError):
    """An error caused by the request (vLLM maps it to HTTP 4xx)."""


class VLLMServerError(VLLMError):
    """An error caused by the server (vLLM maps it to HTTP 5xx)."""


def _with_extras(base: str, parameter: str | None, value: Any) -> str:
    """vLLM's ``__str__``: ``"message (parameter=..., value=...)"`` with those that are set."""
    extras = [f"{k}={v}" for k, v in (("parameter", parameter), ("value", value)) if v is not None]
    return f"{base} ({', '.join(extras)})" if extras else base


class VLLMValidationError(VLLMClientError):
    """A request failed validation (vLLM's ``VLLMValidationError``).

    Args:
        message: what is wrong.
        parameter: the parameter that failed, if one did.
        value: the value refused.
    """

    def __init__(self, message: str = "", *, parameter: str | None = None, value: Any = None) -> None:
        super().__init__(message)
        self.parameter = parameter
        self.value = value

    def __str__(self) -> str:
        return _with_extras(super().__str__(), self.parameter, self.value)


class VLLMNotFoundError(VLLMClientError):
    """vLLM's not-found error (HTTP 404)."""


class LoRAAdapterNotFoundError(VLLMNotFoundError):
    """A LoRA adapter was not found (the kit has no LoRA: never raised here)."""

    def __init__(self, lora_name: str, lora_path: str) -> None:
        self.message = f"Loading lora {lora_name} failed: No adapter found for {lora_path}"
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message


class VLLMUnprocessableEntityError(VLLMClientError):
    """The request content cannot be processed (vLLM: e.g. an image URL that does not resolve)."""

    def __init__(self, message: str = "", *, parameter: str | None = None, value: Any = None) -> None:
        super().__init__(message)
        self.parameter = parameter
        self.value = value

    def __str__(self) -> str:
        return _with_extras(super().__str__(), self.parameter, self.value)


class GenerationError(VLLMServerError):
    """A request finished with an internal error (HTTP 500)."""

    def __init__(self, message: str = "Internal server error") -> None:
        super().__init__(message)
        self.status_code = HTTPStatus.INTERNAL_SERVER_ERROR


class RetryableRequestError(GenerationError):
    """A transient request failure a client may retry (HTTP 503)."""

    def __init__(self, message: str = "Request failed; please retry") -> None:
        super().__init__(message)
        self.status_code = HTTPStatus.SERVICE_UNAVAILABLE


class GracefulHTTPError(VLLMError):
    """An error a server answers with its own HTTP status."""

    def __init__(self, message: str, http_status: HTTPStatus) -> None:
        super().__init__(message)
        self.message = message
        self.http_status = http_status


class QueueOverflowError(GracefulHTTPError):
    """vLLM's request queue is full (HTTP 503)."""

    def __init__(self) -> None:
        super().__init__(
            "The engine is currently busy and cannot accept new requests. "
            "Please try again later or on a different instance.",
            HTTPStatus.SERVICE_UNAVAILABLE,
        )


class MaxQueuedTokensError(GracefulHTTPError):
    """vLLM's pending prefill tokens are over the limit (HTTP 503)."""

    def __init__(self) -> None:
        super().__init__(
            "The engine has reached its prefill token backlog limit. "
            "Please try again later or on a different instance.",
            HTTPStatus.SERVICE_UNAVAILABLE,
        )


class ProfilerAlreadyActiveError(GracefulHTTPError):
    """A profiling session is already active (HTTP 409)."""

    def __init__(self) -> None:
        super().__init__(
            "A profiling session is already active. Call /stop_profile before starting another session.",
            HTTPStatus.CONFLICT,
        )
