"""Assumes 2 bytes per element.

caught by: SmolLM2-135M as pagedlab serves it (fp32)
hint: is 4 bytes per element
"""
REPLACE = [
    ('DTYPE_BYTES[config["torch_dtype"]]',
     '2'),
]
