"""Request traces: load the Azure 2023 and Mooncake FAST'25 files, scale them, synthesise prompts.

A trace is a list of :class:`TraceRequest` in arrival order. Neither source publishes prompt
text, only lengths (and, for Mooncake, which 512-token prompt blocks are shared), so replay
synthesises token ids of the traced lengths (:func:`synthesize_prompts`).

Sources (see ``data/SOURCES.md`` for commits and licences):

* Azure LLM inference trace 2023 (Patel et al., "Splitwise", ISCA'24; CC-BY-4.0): CSV with
  ``TIMESTAMP`` (wall clock with 7 fractional digits), ``ContextTokens``, ``GeneratedTokens``.
* Mooncake FAST'25 traces (Qin et al., USENIX FAST'25; Apache-2.0): JSONL with ``timestamp``
  (ms from trace start), ``input_length``, ``output_length``, ``hash_ids`` (ids of the prompt's
  512-token blocks; two requests share a KV prefix exactly as far as their leading ids agree).

Every malformed input raises :class:`pagedlab.errors.TraceFormatError` naming the file and the
line: a line that does not parse, a missing column or key, a negative length, or an arrival time
earlier than the previous one.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

from pagedlab.errors import PagedLabError, TraceFormatError

#: Tokens per Mooncake ``hash_ids`` block, as published.
MOONCAKE_BLOCK_TOKENS = 512

AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
MOONCAKE_KEYS = ("timestamp", "input_length", "output_length")

PathLike = str | Path


@dataclass(frozen=True)
class TraceRequest:
    """One traced request.

    Attributes:
        arrival_time: seconds since the first request of the trace *file* (a slice that starts
            later keeps its offset; :func:`scale_for_cpu` rebases to 0).
        prompt_len: prompt tokens (>= 0 in the files; replay needs >= 1).
        output_len: generated tokens (>= 0 in the files; replay needs >= 1).
        hash_ids: Mooncake prompt-block ids, ``len == ceil(prompt_len / block_tokens)``; ``None``
            for Azure (no prefix information).
        block_tokens: tokens per ``hash_ids`` block (512 as published; smaller once scaled).
        line: line number in the source file (1-based, the header is line 1 for CSV), for messages.
    """

    arrival_time: float
    prompt_len: int
    output_len: int
    hash_ids: tuple[int, ...] | None = None
    block_tokens: int = MOONCAKE_BLOCK_TOKENS
    line: int = 0


def _err(path: PathLike, line: int, msg: str) -> TraceFormatError:
    return TraceFormatError(f"{path}:{line}: {msg}")


def read_text_file(path: PathLike, error: type[PagedLabError] = TraceFormatError) -> str:
    """The whole file as UTF-8 text (a BOM is dropped).

    Args:
        path: the file.
        error: the exception type raised (``TraceFormatError`` for traces, ``InvalidRequestError``
            for prompt files); it is called with one message string.
    Raises:
        error: the file cannot be read (missing, a folder, no permission), is not
            UTF-8 text (the message names ``file:line`` of the first bad byte) or contains NUL
            bytes (a binary file).
    """
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise error(f"{path}: cannot read the file: {e.strerror or e}") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise error(
            f"{path}:{line}: not UTF-8 text (byte 0x{data[e.start]:02x}); is it a binary or compressed file?"
        ) from None
    if "\x00" in text:
        line = text[: text.index("\x00")].count("\n") + 1
        raise error(f"{path}:{line}: NUL byte: this is a binary file, not a text file")
    return text


def _length(path: PathLike, line: int, name: str, value) -> int:
    if isinstance(value, bool):
        raise _err(path, line, f"{name} must be an integer, got {value!r}")
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise _err(path, line, f"{name} must be an integer, got {value!r}") from None
    if isinstance(value, float) and value != n:
        raise _err(path, line, f"{name} must be an integer, got {value!r}")
    if n < 0:
        raise _err(path, line, f"{name} must be >= 0, got {n}")
    return n


def _check_order(path: PathLike, line: int, t: float, prev: tuple[float, int] | None) -> None:
    if prev is not None and t < prev[0]:
        raise _err(
            path,
            line,
            f"arrival time {t:.6f} s is earlier than {prev[0]:.6f} s on line {prev[1]}; "
            "a trace must be sorted by arrival time",
        )


def _parse_azure_time(path: PathLike, line: int, text: str) -> datetime:
    # The files carry 7 fractional digits; datetime.fromisoformat takes at most 6.
    text = (text or "").strip()
    head, dot, frac = text.partition(".")
    try:
        return datetime.fromisoformat(head + (dot + frac[:6] if dot else ""))
    except ValueError:
        raise _err(path, line, f"TIMESTAMP {text!r} is not a date-time like 2023-11-16 18:15:46.6805900") from None


def load_azure(path: PathLike, limit: int | None = None, start: int = 0) -> list[TraceRequest]:
    """Load an Azure LLM inference trace 2023 CSV (code or conv).

    Args:
        path: the CSV file.
        limit: most requests to return (None = all).
        start: index of the first request to return (0-based, data rows). Arrival times stay
            relative to the file's first row.
    Returns:
        ``TraceRequest`` list in file order; ``hash_ids`` is None.
    Raises:
        TraceFormatError: missing column, a row that does not parse, a negative length or an
            out-of-order timestamp (the message names ``file:line``); see ``read_text_file``.
    """
    if start < 0 or (limit is not None and limit < 0):
        raise ValueError(f"start and limit must be >= 0, got start={start}, limit={limit}")
    out: list[TraceRequest] = []
    with io.StringIO(read_text_file(path), newline="") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None:
            raise _err(path, 1, "empty file: expected a header " + ",".join(AZURE_COLUMNS))
        header = [h.strip() for h in header]
        missing = [c for c in AZURE_COLUMNS if c not in header]
        if missing:
            raise _err(path, 1, f"missing column(s) {', '.join(missing)}; header is {','.join(header)}")
        col = {c: header.index(c) for c in AZURE_COLUMNS}
        t0: datetime | None = None
        prev: tuple[float, int] | None = None
        for i, row in enumerate(reader):
            line = reader.line_num
            if limit is not None and len(out) >= limit:
                break
            if not row or all(not c.strip() for c in row):
                continue
            if len(row) != len(header):
                raise _err(path, line, f"expected {len(header)} fields, got {len(row)}: {','.join(row)!r}")
            ts = _parse_azure_time(path, line, row[col["TIMESTAMP"]])
            t0 = ts if t0 is None else t0
            t = (ts - t0).total_seconds()
            _check_order(path, line, t, prev)
            prev = (t, line)
            prompt = _length(path, line, "ContextTokens", row[col["ContextTokens"]].strip())
            output = _length(path, line, "GeneratedTokens", row[col["GeneratedTokens"]].strip())
            if i >= start:
                out.append(TraceRequest(t, prompt, output, line=line))
    return out


def load_mooncake(path: PathLike, limit: int | None = None, start: int = 0) -> list[TraceRequest]:  # noqa: C901 - the Mooncake trace's optional fields
    """Load a Mooncake FAST'25 JSONL trace (conversation, synthetic, tool-agent).

    Args:
        path: the JSONL file, one JSON object per line (blank lines are skipped).
        limit: most requests to return (None = all).
        start: index of the first request to return (0-based).
    Returns:
        ``TraceRequest`` list with ``hash_ids`` and ``block_tokens=512``.
    Raises:
        TraceFormatError: a line that is not a JSON object, a missing key, a negative length,
            ``hash_ids`` that is not a list of ints of length ``ceil(input_length / 512)``, or a
            timestamp earlier than the previous line's.
    """
    if start < 0 or (limit is not None and limit < 0):
        raise ValueError(f"start and limit must be >= 0, got start={start}, limit={limit}")
    out: list[TraceRequest] = []
    prev: tuple[float, int] | None = None
    index = 0
    with io.StringIO(read_text_file(path)) as f:
        for line, text in enumerate(f, start=1):
            if limit is not None and len(out) >= limit:
                break
            if not text.strip():
                continue
            try:
                rec = json.loads(text)
            except json.JSONDecodeError as e:
                raise _err(path, line, f"not valid JSON ({e.msg} at column {e.colno})") from None
            if not isinstance(rec, dict):
                raise _err(path, line, f"expected a JSON object, got {type(rec).__name__}")
            missing = [k for k in MOONCAKE_KEYS if k not in rec]
            if missing:
                raise _err(path, line, f"missing key(s) {', '.join(missing)}")
            ts = rec["timestamp"]
            if isinstance(ts, bool) or not isinstance(ts, (int, float)) or not math.isfinite(ts):
                raise _err(path, line, f"timestamp must be a number of ms, got {ts!r}")
            t = ts / 1000.0
            _check_order(path, line, t, prev)
            prev = (t, line)
            prompt = _length(path, line, "input_length", rec["input_length"])
            output = _length(path, line, "output_length", rec["output_length"])
            hash_ids = rec.get("hash_ids")
            if hash_ids is not None:
                if not isinstance(hash_ids, list) or any(
                    isinstance(h, bool) or not isinstance(h, int) for h in hash_ids
                ):
                    raise _err(path, line, "hash_ids must be a list of integers")
                want = -(-prompt // MOONCAKE_BLOCK_TOKENS)
                if len(hash_ids) != want:
                    raise _err(
                        path,
                        line,
                        f"{len(hash_ids)} hash_ids for input_length {prompt}; expected "
                        f"ceil({prompt}/{MOONCAKE_BLOCK_TOKENS}) = {want}",
                    )
                hash_ids = tuple(hash_ids)
            if index >= start:
                out.append(TraceRequest(t, prompt, output, hash_ids, line=line))
            index += 1
    return out


def load_trace(path: PathLike, limit: int | None = None, start: int = 0) -> list[TraceRequest]:
    """Load a trace, choosing the reader from the file type (``.csv`` Azure, ``.jsonl``/``.json`` Mooncake).

    Raises:
        TraceFormatError: unknown file type, or see ``load_azure`` / ``load_mooncake``.
    """
    suffix = Path(path).suffix.lower()
    if suffix == ".csv":
        return load_azure(path, limit=limit, start=start)
    if suffix in (".jsonl", ".json"):
        return load_mooncake(path, limit=limit, start=start)
    raise TraceFormatError(f"{path}: unknown trace type {suffix!r}; expected an Azure .csv or a Mooncake .jsonl")


# --- statistics ----------------------------------------------------------------------------------
def duration(requests: Sequence[TraceRequest]) -> float:
    """Seconds from the first to the last arrival (0 for fewer than two requests)."""
    return requests[-1].arrival_time - requests[0].arrival_time if len(requests) > 1 else 0.0


def prefix_hit_ceiling(requests: Sequence[TraceRequest]) -> float:
    """Fraction of prompt blocks an unbounded prefix cache could serve, in trace order.

    A request hits its leading ``hash_ids`` that some earlier request already produced, up to
    its first miss (a hit must be a contiguous prefix, as in vLLM); every block counts once
    into the denominator. This is the ceiling of any prefix cache's hit rate on the trace.

    Raises:
        ValueError: a request has no ``hash_ids`` (Azure traces carry none).
    """
    seen: set[int] = set()
    hits = total = 0
    for r in requests:
        if r.hash_ids is None:
            raise ValueError("prefix_hit_ceiling needs hash_ids (a Mooncake trace)")
        k = 0
        while k < len(r.hash_ids) and r.hash_ids[k] in seen:
            k += 1
        hits += k
        total += len(r.hash_ids)
        seen.update(r.hash_ids)
    return hits / total if total else 0.0


# --- scaling and synthesis ------------------------------------------------------------------------
def scale_for_cpu(
    requests: Sequence[TraceRequest],
    max_prompt: int = 256,
    max_output: int = 32,
    time_scale: float = 1.0,
    token_scale: float | None = None,
    output_scale: float | None = None,
) -> list[TraceRequest]:
    """Shrink a trace slice so SmolLM2-135M on a laptop CPU can replay it in seconds.

    The scaling is linear, so the *shape* of the workload survives (relative prompt lengths,
    the prompt/output ratio, burstiness, which prompt blocks are shared):

    * prompt lengths are multiplied by ``token_scale`` (default: ``max_prompt`` / longest prompt
      of the slice, at most 1), rounded, then clipped to ``[1, max_prompt]``;
    * output lengths likewise by ``output_scale`` (default: ``max_output`` / longest output),
      clipped to ``[1, max_output]``;
    * Mooncake's 512-token blocks shrink with the prompts: ``block_tokens = max(1, round(512 *
      token_scale))``, so shared prefixes stay shared in proportion;
    * arrival times are rebased to the slice's first request and multiplied by ``time_scale``.
      A CPU serves roughly 10^3 times fewer tokens/s than a GPU, so ``time_scale > 1`` stretches
      the gaps to keep the load comparable; ``0`` makes everything arrive at once (offline).

    Returns:
        New ``TraceRequest`` objects (the input is unchanged).
    Raises:
        ValueError: a non-positive maximum or scale, or a negative ``time_scale``.
    """
    if max_prompt < 1 or max_output < 1:
        raise ValueError(f"max_prompt and max_output must be >= 1, got {max_prompt}, {max_output}")
    if not (time_scale >= 0 and math.isfinite(time_scale)):
        raise ValueError(f"time_scale must be a finite number >= 0, got {time_scale}")
    if not requests:
        return []
    if token_scale is None:
        token_scale = min(1.0, max_prompt / max(1, max(r.prompt_len for r in requests)))
    if output_scale is None:
        output_scale = min(1.0, max_output / max(1, max(r.output_len for r in requests)))
    if token_scale <= 0 or output_scale <= 0:
        raise ValueError(f"token_scale and output_scale must be > 0, got {token_scale}, {output_scale}")
    t0 = requests[0].arrival_time
    out = []
    for r in requests:
        out.append(
            replace(
                r,
                arrival_time=(r.arrival_time - t0) * time_scale,
                prompt_len=min(max_prompt, max(1, round(r.prompt_len * token_scale))),
                output_len=min(max_output, max(1, round(r.output_len * output_scale))),
                block_tokens=max(1, round(r.block_tokens * token_scale)),
            )
        )
    return out


def synthesize_prompts(
    requests: Sequence[TraceRequest],
    vocab_size: int,
    seed: int = 0,
    block_tokens: int | None = None,
    min_token_id: int = 0,
) -> list[list[int]]:
    """Token ids of the traced prompt lengths; equal Mooncake prefixes become equal tokens.

    A request with ``hash_ids`` gets, for each id, the same pseudo-random block of
    ``block_tokens`` tokens wherever that id appears (in any request), concatenated and cut to
    ``prompt_len``; if the blocks are shorter than the prompt (possible after rounding), the
    rest is request-unique. A request without ``hash_ids`` (Azure) gets request-unique tokens,
    so prefix caching finds nothing but the (improbable) random collisions.

    Args:
        requests: the trace.
        vocab_size: token ids are drawn from ``[min_token_id, vocab_size)``.
        seed: the same seed gives the same prompts.
        block_tokens: tokens per hash-id block; default each request's ``block_tokens``.
        min_token_id: lowest id drawn (e.g. to avoid a tokenizer's special tokens).
    Returns:
        One list of ``prompt_len`` ints per request.
    """
    import numpy as np  # lazy: start-up time (numpy, only this trace generator needs it)

    if not 0 <= min_token_id < vocab_size:
        raise ValueError(f"need 0 <= min_token_id < vocab_size, got {min_token_id}, {vocab_size}")
    blocks: dict[tuple[int, int], list[int]] = {}

    def block(hash_id: int, size: int) -> list[int]:
        key = (hash_id, size)
        if key not in blocks:
            rng = np.random.default_rng([seed, 1, hash_id])
            blocks[key] = rng.integers(min_token_id, vocab_size, size).tolist()
        return blocks[key]

    prompts = []
    for i, r in enumerate(requests):
        ids: list[int] = []
        if r.hash_ids:
            size = block_tokens or r.block_tokens
            for h in r.hash_ids:
                if len(ids) >= r.prompt_len:
                    break
                ids.extend(block(h, size))
        if len(ids) < r.prompt_len:
            rng = np.random.default_rng([seed, 2, i])
            ids.extend(rng.integers(min_token_id, vocab_size, r.prompt_len - len(ids)).tolist())
        prompts.append(ids[: r.prompt_len])
    return prompts
