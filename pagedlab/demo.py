"""``pagedlab generate``: answer a file of chat prompts with the paged engine and summarise the run.

The prompts file is JSON Lines, one object per line: ``{"id": ..., "messages": [{"role":
"user", "content": ...}], "max_tokens": 64}`` (``max_tokens`` optional), or ``{"prompt": "..."}``
for raw text. ``make demo`` runs it on ``data/prompts.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from pagedlab import SamplingParams, data
from pagedlab.errors import InvalidRequestError
from pagedlab.sim.replay import int_at_least
from pagedlab.sim.traces import read_text_file


def default_prompts() -> Path:
    """The kit's ``data/prompts.jsonl`` (``$PAGEDLAB_DATA_DIR`` overrides the folder).

    Raises:
        DataFileNotFoundError: the file is not there (see :func:`pagedlab.data.path`).
    """
    return data.path("prompts.jsonl")


def read_prompts(path: str | Path) -> list[dict]:
    """Parse and check a prompts file; nothing is loaded.

    Each line is a JSON object with ``messages`` (a non-empty list of ``{"role": str, "content":
    str}``) or ``prompt`` (a str), and optionally ``max_tokens`` (an int >= 1) and ``id``.

    Raises:
        InvalidRequestError: the file is missing, unreadable, not UTF-8 (binary), empty, or a line
            is not valid JSON or breaks the schema; the message names ``file:line``.
    """
    return [row for _, row in _read_prompt_lines(path)]


def _read_prompt_lines(path: str | Path) -> list[tuple[int, dict[str, Any]]]:
    """``(line number, row)`` per prompt of a prompts file; see ``read_prompts``."""
    if not Path(path).is_file():
        raise InvalidRequestError(f"prompts file not found: {path}")
    rows: list[tuple[int, dict[str, Any]]] = []
    for lineno, line in enumerate(read_text_file(path, InvalidRequestError).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise InvalidRequestError(f"{path}:{lineno}: not valid JSON ({e.msg})") from None
        try:
            _check_row(row)
        except InvalidRequestError as e:
            raise InvalidRequestError(f"{path}:{lineno}: {e}") from None
        rows.append((lineno, row))
    if not rows:
        raise InvalidRequestError(f"{path}: no prompts")
    return rows


def _check_row(row: object) -> None:
    """Raise ``InvalidRequestError`` unless ``row`` follows the prompts-file schema."""
    if not isinstance(row, dict) or not ("messages" in row or "prompt" in row):
        raise InvalidRequestError("expected an object with 'messages' or 'prompt'")
    if "messages" in row:
        from pagedlab.engine.llm import _check_conversation  # lazy: start-up time (the engine imports torch)

        _check_conversation(row["messages"], "'messages'")
    elif not isinstance(row["prompt"], str) or not row["prompt"]:
        raise InvalidRequestError(f"'prompt' must be a non-empty string, got {row['prompt']!r}")
    mt = row.get("max_tokens", 1)
    if isinstance(mt, bool) or not isinstance(mt, int) or mt < 1:
        raise InvalidRequestError(f"'max_tokens' must be an int >= 1, got {mt!r}")


#: The options of ``pagedlab generate`` passed on to ``LLM``: vLLM ``EngineArgs`` names
#: (``--block-size`` -> ``block_size``).
ENGINE_ARG_NAMES = (
    "seed",
    "block_size",
    "num_gpu_blocks",
    "max_num_seqs",
    "max_num_batched_tokens",
    "enable_prefix_caching",
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    _positive = int_at_least(1)
    p.add_argument(
        "prompts", nargs="?", default=None, help="JSONL prompts file (default: the kit's data/prompts.jsonl)"
    )
    p.add_argument("--max-tokens", type=_positive, default=None, help="override every prompt's max_tokens")
    p.add_argument("--limit", type=_positive, default=None, help="only the first N prompts")
    p.add_argument("--temperature", type=float, default=0.0, help="sampling temperature (0: greedy; default 0)")
    p.add_argument("--seed", type=int_at_least(0), default=0, help="sampling seed (default 0)")
    p.add_argument("--block-size", type=_positive, default=16, help="tokens per KV block (default 16)")
    p.add_argument("--num-gpu-blocks", type=_positive, default=512, help="KV blocks in the pool (default 512)")
    p.add_argument("--max-num-seqs", type=_positive, default=32, help="most requests in one step (default 32)")
    p.add_argument(
        "--max-num-batched-tokens", type=_positive, default=512, help="most tokens in one step (default 512)"
    )
    p.add_argument(
        "--enable-prefix-caching",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="reuse the KV blocks of a shared prompt prefix (default off here; on in vLLM 0.32's V1 engine)",
    )
    p.add_argument("--model", default=None, help="GGUF path (default: SmolLM2-135M-Instruct)")
    p.add_argument("--quiet", action="store_true", help="print only the summary")


def _sampling_params(args: argparse.Namespace, path: Any, lines: list[tuple[int, dict[str, Any]]]) -> list[Any]:
    """One ``SamplingParams`` per prompt line, every setting checked before the model loads.

    Raises:
        InvalidRequestError: a command-line option is invalid (the message names it), or a line's own
            ``max_tokens`` is (the message starts with ``file:line``).
    """
    try:  # the options first: a bad --temperature is the command line's, not the prompts file's
        SamplingParams(temperature=args.temperature, seed=args.seed, max_tokens=args.max_tokens or 1)
    except InvalidRequestError as e:
        raise InvalidRequestError(f"--temperature / --seed / --max-tokens: {e}") from None
    params = []
    for lineno, r in lines:
        try:
            max_tokens = args.max_tokens or r.get("max_tokens", 64)
            params.append(SamplingParams(temperature=args.temperature, seed=args.seed, max_tokens=max_tokens))
        except InvalidRequestError as e:
            raise InvalidRequestError(f"{path}:{lineno}: {e}") from None
    return params


def _print_answers(rows: list[dict[str, Any]], outputs: list[Any]) -> None:
    """Each prompt's question (first line) and the generated answer."""
    for r, o in zip(rows, outputs):
        question = r["messages"][-1]["content"] if "messages" in r else r["prompt"]
        print(f"\n[{r.get('id', o.request_id)}] {question.splitlines()[0][:90]}")
        print("  -> " + o.outputs[0].text.strip().replace("\n", "\n     "))


def _print_summary(engine: Any, outputs: list[Any], load_s: float, wall: float) -> None:
    """Token counts, throughput, median TTFT, peak KV blocks and batch size of one ``generate`` call."""
    stats = engine.step_stats
    n_prompt = sum(len(o.prompt_token_ids) for o in outputs)
    n_gen = sum(len(o.outputs[0].token_ids) for o in outputs)
    peak = max(s.kv_blocks_used for s in stats)
    ttft = [o.pagedlab_metrics.ttft for o in outputs]
    cache = engine.cache_config
    print("\n=== pagedlab generate: summary ===")
    print(f"requests            {len(outputs)}")
    print(f"prompt tokens       {n_prompt}")
    print(f"generated tokens    {n_gen}")
    print(f"model load          {load_s:.1f} s")
    print(f"wall time           {wall:.1f} s")
    print(f"throughput          {n_gen / wall:.1f} generated tok/s, {(n_prompt + n_gen) / wall:.1f} total tok/s")
    print(f"median TTFT         {statistics.median(ttft):.2f} s")
    print(
        f"peak KV blocks      {peak} of {cache.num_gpu_blocks} "
        f"(block_size {cache.block_size}, {100 * peak / cache.num_gpu_blocks:.0f}%)"
    )
    print(f"steps               {len(stats)}")
    print(f"mean batch size     {statistics.mean(len(s.scheduled) for s in stats):.1f} requests/step")


def main(args: argparse.Namespace) -> int:
    from pagedlab import LLM  # lazy: start-up time (the engine imports torch)

    path = args.prompts or default_prompts()
    lines = _read_prompt_lines(path)[: args.limit]
    rows = [row for _, row in lines]
    params = _sampling_params(args, path, lines)
    t_load = time.perf_counter()
    llm = LLM(args.model, **{name: getattr(args, name) for name in ENGINE_ARG_NAMES})
    load_s = time.perf_counter() - t_load
    tokenize = llm.get_tokenizer()
    prompts = [
        {
            "prompt_token_ids": llm.apply_chat_template(r["messages"])
            if "messages" in r
            else tokenize(r["prompt"])["input_ids"]
        }
        for r in rows
    ]
    t0 = time.perf_counter()
    outputs = llm.generate(prompts, params, use_tqdm=not args.quiet)
    wall = time.perf_counter() - t0
    if not args.quiet:
        _print_answers(rows, outputs)
    _print_summary(llm.llm_engine, outputs, load_s, wall)
    return 0
