"""Someone else's code inside the engine: the plug-in layer below it (layer 4, beside ``model``).

The engine's teachable parts are *slots*: small interfaces (:mod:`.protocols`) with one kit
implementation each, kept next to the code they belong with (the free queue in ``core.block_pool``,
the preempt-and-retry loop in ``sched.scheduler``, the tile load in ``kernels.reference``...). A
:class:`~pagedlab.parts.slots.Components` object says which implementation fills each slot; a
learner's part runs behind a guard that names the slot, the engine step and the broken invariant
(:class:`~pagedlab.errors.ComponentError`). The engine asks :func:`~pagedlab.parts.build.build_parts`
for its hooks and never sees a guard.

=================  ==============================================  =======================================
module             what                                            slots
=================  ==============================================  =======================================
``protocols``      the interfaces, one per slot                    all
``slots``          ``Slot``, ``SLOTS`` (the registry), ``Part``,    all
                   ``Components``
``guard``          ``Guard``: one call under a time limit, errors  all
                   turned into ``ComponentError``
``memory``         guards of the KV-memory parts                   free_queue, slot_mapping, prefix_lookup,
                                                                   fork_cow
``radix``          ``RadixOps``, ``GuardedRadixTree``              radix
``schedule``       guards and schedulers of the scheduling parts   schedule_step, pick_victim, preempt_retry
``kernel``         guards of the decode kernel's tile load         kv_tile_load, triton_tile_load
``build``          ``build_parts``: the engine's hooks             all
=================  ==============================================  =======================================

It imports ``core``, ``sched``, ``kernels`` (and the layer-0 modules) only; ``engine`` imports it,
and ``pagedlab.grading`` maps exercises to slots (``grading.plug.BRIDGES``).
"""
