"""Helpers the lab notebooks use for their widgets and measurements (one module per lab).

They keep the notebooks short: replaying a trace step by step and drawing it (``lab01``),
timing the free queue (``lab02``), counting shared blocks on the real engine (``lab03``), serving
prompts and drawing the scheduler's queues (``lab04``, reused by labs 05 and 06), speculative
decoding's draft tokens under the token budget (``lab05``), preemption under memory pressure - swap
traffic, thrashing and the KV watermark (``lab06``), what paging costs the attention kernel against
a contiguous one and vLLM v0's x-packed key layout (``lab08``), and the KV pool a GPU's
``gpu_memory_utilization`` leaves and the KV a disaggregated prefill sends (``lab09``).
Nothing here is an exercise: the learner writes those, and these helpers never call the
learner's code, so a lab still runs to the end while an exercise is unfinished. Like the rest of
the library, this package never imports ``pagedlab.grading`` (``yours_or_reference``, which checks
the learner's code, is ``pagedlab.grading.yours_or_reference``). Also here: lab-only baselines
(``contiguous``: lab 01's reservation replay; ``sharing``: CoW savings on block counts), the
request life cycle of lab 06 (``lifecycle``), the end-of-lab questions (``self_checks``) and
``kit``, the small learner-facing classes of labs 03 and 07 (``pagedlab.grading.kit`` re-exports it),
and ``checklist``, which computes every figure of ``docs/production_checklist.md``.
"""
