"""Schedules waiting prefills before the running decodes: the prompt chunks eat the budget and decodes starve.

caught by: decodes first, then prefill chunks with what is left of the budget
hint: already running and got nothing
not hint: chunk
"""
REPLACE = [
    ('    for req in running:\n        if budget <= 0:\n            break\n        n = chunk(req)\n        if n <= 0:\n            continue\n        kv_cache_manager.allocate_slots(req, n)\n        scheduled[req.request_id] = n\n        budget -= n\n',
     '    old_running = list(running)\n'),
    ('        budget -= n\n    return scheduled',
     '        budget -= n\n    for req in old_running:\n        if budget <= 0:\n            break\n        n = chunk(req)\n        if n <= 0:\n            continue\n        kv_cache_manager.allocate_slots(req, n)\n        scheduled[req.request_id] = n\n        budget -= n\n    return scheduled'),
]
