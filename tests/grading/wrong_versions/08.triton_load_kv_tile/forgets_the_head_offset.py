"""Forgets the KV head's offset: every program reads head 0.

caught by: each KV head reads its own rows
hint: add kv_head * stride_head
"""
REPLACE = [
    (' + kv_head * stride_head', ''),
]
