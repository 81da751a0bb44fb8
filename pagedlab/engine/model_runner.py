"""Runs one scheduled step on the model: moves KV blocks, builds the flat batch, samples.

The runner owns the KV tensors: for each layer a ``(key_cache, value_cache)`` pair of shape
``[num_gpu_blocks, block_size, num_kv_heads, head_dim]`` (vLLM's layout), plus the same for
the swap space with ``num_cpu_blocks`` (vLLM v0). The block ids each step's ``SchedulerOutput``
carries (``ScheduledRequest.block_ids``) index the first dimension directly; the runner never asks
the KV-cache manager.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping

import torch

from pagedlab.model import cpu_linear, precision
from pagedlab.model.attention import AttentionMetadata, DecodeAttention, KVTileLoad
from pagedlab.model.llama import LlamaForCausalLM
from pagedlab.model.sampler import sample, top_logprobs
from pagedlab.outputs import TokenLogprobs
from pagedlab.sched.scheduler import ScheduledRequest, SchedulerOutput


class ModelRunner:
    """Owns the model and its paged KV cache.

    Args:
        model: a ``LlamaForCausalLM``.
        block_size, num_gpu_blocks, num_cpu_blocks: cache geometry.
        attention_backend: ``"torch"`` or ``"triton"``.
        device: torch device of the model and the "GPU" pool.
        dtype: the compute dtype of the model and the KV cache (float32 or bfloat16): a model in
            another dtype runs as a copy in this one (``pagedlab.model.precision.model_in_dtype``).
        pack_linears: repack the model's linear weights for oneDNN (``pagedlab.model.cpu_linear``, as
            vLLM's CPU backend does after loading); default: on a CPU where oneDNN is available. The
            model is changed in place (engines built on one model share its weights); on another
            device packed weights are unpacked first.
        slot_mapping_fn, kv_tile_load, decode_override: the engine's parts the runner calls
            (``pagedlab.parts.build.EngineParts``); None: the kit's vectorised slot mapping and the
            backend's own decode attention. ``with_parts`` gives a runner with other ones.
    """

    def __init__(
        self,
        model: LlamaForCausalLM,
        block_size: int,
        num_gpu_blocks: int,
        num_cpu_blocks: int = 0,
        attention_backend: str = "torch",
        device: str = "cpu",
        dtype: torch.dtype = torch.float32,
        pack_linears: bool | None = None,
        *,
        slot_mapping_fn: Callable[[list[int], list[int], int], list[int]] | None = None,
        kv_tile_load: KVTileLoad | None = None,
        decode_override: DecodeAttention | None = None,
    ) -> None:
        cfg = model.config
        model = precision.model_in_dtype(model, dtype)
        self.model = model
        self.dtype = dtype
        if torch.device(device).type == "cpu" and pack_linears is not False:
            cpu_linear.pack_linears(model)
        else:
            cpu_linear.unpack_linears(model)
            model.to(device)
        self.block_size = block_size
        self.backend = attention_backend
        self.device = torch.device(device)
        shape = (num_gpu_blocks, block_size, cfg.num_key_value_heads, cfg.head_dim)
        self.kv_caches: list[tuple[torch.Tensor, torch.Tensor]] = [
            (torch.zeros(shape, dtype=dtype, device=self.device), torch.zeros(shape, dtype=dtype, device=self.device))
            for _ in range(cfg.num_hidden_layers)
        ]
        cpu_shape = (num_cpu_blocks,) + shape[1:]
        self.cpu_caches: list[tuple[torch.Tensor, torch.Tensor]] = (
            [
                (torch.zeros(cpu_shape, dtype=dtype), torch.zeros(cpu_shape, dtype=dtype))
                for _ in range(cfg.num_hidden_layers)
            ]
            if num_cpu_blocks
            else []
        )
        self.last_logprobs: dict[str, list[TokenLogprobs]] = {}
        # The engine's parts (``pagedlab.parts``); None = the kit's vectorised code / the backend's op.
        self.slot_mapping_fn = slot_mapping_fn
        self.kv_tile_load = kv_tile_load
        self.decode_override = decode_override

    def with_parts(
        self,
        slot_mapping_fn: Callable[[list[int], list[int], int], list[int]] | None,
        kv_tile_load: KVTileLoad | None,
        decode_override: DecodeAttention | None,
    ) -> ModelRunner:
        """A runner on the same model and KV tensors that calls these parts (the engine's fallback to a
        kit part builds one: the KV pools are not allocated twice). ``self`` is unchanged."""
        runner = copy.copy(self)
        runner.slot_mapping_fn = slot_mapping_fn
        runner.kv_tile_load = kv_tile_load
        runner.decode_override = decode_override
        runner.last_logprobs = {}
        return runner

    # --- moving blocks -------------------------------------------------------------------------
    @staticmethod
    def _move(
        pairs: list[tuple[int, int]],
        srcs: list[tuple[torch.Tensor, torch.Tensor]],
        dsts: list[tuple[torch.Tensor, torch.Tensor]],
    ) -> None:
        """Copy blocks ``src -> dst`` for each ``(src, dst)`` pair, in every layer's K and V pools."""
        if not pairs:
            return
        src = torch.tensor([p[0] for p in pairs])
        dst = torch.tensor([p[1] for p in pairs])
        for (sk, sv), (dk, dv) in zip(srcs, dsts):
            dk.index_copy_(0, dst.to(dk.device), sk.index_select(0, src.to(sk.device)).to(dk.device))
            dv.index_copy_(0, dst.to(dv.device), sv.index_select(0, src.to(sv.device)).to(dv.device))

    def apply_block_moves(self, out: SchedulerOutput) -> None:
        """Copy-on-write copies and swaps, in the order the scheduler made them, before the forward."""
        pools = {
            "copy": (self.kv_caches, self.kv_caches),
            "swap_out": (self.kv_caches, self.cpu_caches),
            "swap_in": (self.cpu_caches, self.kv_caches),
        }
        run: list[tuple[int, int]] = []
        kind = ""
        for k, src, dst in out.block_moves + [("end", 0, 0)]:
            if k != kind and run:  # flush a run of same-kind moves in one copy
                self._move(run, *pools[kind])
                run = []
            kind = k
            run.append((src, dst))

    # --- the forward step ----------------------------------------------------------------------
    def forward(self, out: SchedulerOutput) -> tuple[list[ScheduledRequest], torch.Tensor | None]:
        """Apply the step's block moves and run the model on the scheduled tokens (each request's block
        table comes with it: ``ScheduledRequest.block_ids``).

        Returns:
            ``(samplers, logits)``: the scheduled requests whose chunk reached the end of their
            sequence (so they sample), and their fp32 logits ``[len(samplers), vocab]``.
        """
        self.apply_block_moves(out)
        if not out.scheduled:
            return [], None
        # Decodes (one token) first, so attention can batch them in one call.
        order: list[ScheduledRequest] = sorted(out.scheduled, key=lambda s: s.num_tokens != 1)
        num_decodes = sum(1 for s in order if s.num_tokens == 1)
        bs = self.block_size
        input_ids: list[int] = []
        positions: list[int] = []
        cu, seq_lens, logits_rows = [0], [], []
        tables: list[list[int]] = []
        for s in order:
            toks = s.request.all_token_ids[s.start : s.start + s.num_tokens]
            input_ids.extend(toks)
            positions.extend(range(s.start, s.start + s.num_tokens))
            cu.append(cu[-1] + s.num_tokens)
            seq_lens.append(s.start + s.num_tokens)
            tables.append(s.block_ids)
            if s.samples:
                logits_rows.append(cu[-1] - 1)
        max_blocks = max(len(t) for t in tables)
        block_tables = torch.tensor([t + [0] * (max_blocks - len(t)) for t in tables], dtype=torch.int32)
        pos = torch.tensor(positions, dtype=torch.int64)
        seq_idx = torch.repeat_interleave(torch.arange(len(order)), torch.tensor([s.num_tokens for s in order]))
        if self.slot_mapping_fn is None:
            # slot = block_table[pos // block_size] * block_size + pos % block_size
            slot_mapping = block_tables[seq_idx, pos // bs].long() * bs + pos % bs
        else:
            fn = self.slot_mapping_fn
            slot_mapping = torch.tensor(
                [
                    slot
                    for s, t in zip(order, tables)
                    for slot in fn(t, list(range(s.start, s.start + s.num_tokens)), bs)
                ],
                dtype=torch.int64,
            )
        dev = self.device
        meta = AttentionMetadata(
            slot_mapping=slot_mapping.to(dev),
            block_tables=block_tables.to(dev),
            seq_lens=torch.tensor(seq_lens, dtype=torch.int32, device=dev),
            cu_seqlens_q=torch.tensor(cu, dtype=torch.int32, device=dev),
            num_decodes=num_decodes,
            logits_indices=torch.tensor(logits_rows or [0], dtype=torch.int64, device=dev),
            backend=self.backend,
            kv_tile_load=self.kv_tile_load,
            decode_override=self.decode_override,
        )
        logits = self.model(torch.tensor(input_ids, device=dev), pos.to(dev), self.kv_caches, meta)
        samplers = [s for s in order if s.samples]
        return samplers, (logits.cpu() if samplers else None)

    def execute(
        self,
        out: SchedulerOutput,
        extra_samples: dict[str, int] | None = None,
        generators: Mapping[str, torch.Generator | list[torch.Generator] | None] | None = None,
    ) -> dict[str, list[int]]:
        """Run the step and sample.

        Args:
            out: the scheduler's output for this step (block tables included).
            extra_samples: request id -> how many tokens to sample from its row (``n > 1``
                parents sample all their first tokens from one row); default 1.
            generators: request id -> its generator, or the list of them of an ``n > 1`` parent (one
                per token sampled from its row), or None.
        Returns:
            request id -> sampled token ids, for requests whose chunk reached the end. The
            top log-probabilities of rows whose ``SamplingParams.logprobs`` is set are left in
            ``self.last_logprobs`` (request id -> one ``TokenLogprobs`` per sampled token).
        """
        self.last_logprobs = {}
        samplers, logits = self.forward(out)
        if not samplers or logits is None:
            return {}
        # One row per sampling request; an n>1 parent's row is repeated once per completion.
        rows, params, gens, owners, reqs = [], [], [], [], []
        for row, s in enumerate(samplers):
            rid = s.request.request_id
            k = (extra_samples or {}).get(rid, 1)
            g = (generators or {}).get(rid)
            for j in range(k):
                rows.append(row)
                params.append(s.request.sampling_params)
                gens.append(g[j] if isinstance(g, list) else g)
                owners.append(rid)
                reqs.append(s.request)
        # The logits themselves when every row samples once (no copy of [N, vocab] fp32 per step).
        row_logits = logits if rows == list(range(len(samplers))) else logits[torch.tensor(rows)]
        tokens = sample(row_logits, params, gens, reqs)
        result: dict[str, list[int]] = {}
        for i, (rid, t) in enumerate(zip(owners, tokens)):
            result.setdefault(rid, []).append(t)
            num_logprobs = params[i].logprobs
            if num_logprobs is not None:
                self.last_logprobs.setdefault(rid, []).append(top_logprobs(row_logits[i], t, num_logprobs))
        return result
