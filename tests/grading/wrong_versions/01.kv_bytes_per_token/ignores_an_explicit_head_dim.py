"""Ignores an explicit head_dim.

caught by: an explicit head_dim wins over hidden_size / heads (Gemma-2-2B)
hint: gives head_dim=256 explicitly
"""
REPLACE = [
    ('config.get("head_dim") or ',
     ''),
]
