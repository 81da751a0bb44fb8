"""Swap mode: swaps out without asking can_swap_out, so a full CPU pool raises instead of falling back to recompute.

caught by: swap with a full CPU pool falls back to recompute
"""
REPLACE = [
    ('if preemption_mode == "swap" and kv_cache_manager.can_swap_out([victim]):',
     'if preemption_mode == "swap":'),
]
