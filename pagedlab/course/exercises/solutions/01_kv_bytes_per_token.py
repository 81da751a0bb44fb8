# EXERCISE 01.kv_bytes_per_token
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}


def kv_bytes_per_token(config):
    """Bytes of KV cache one token occupies, from a Hugging Face ``config.json`` dict.

    Every layer stores a key and a value vector of ``head_dim`` elements per KV head, each
    element ``DTYPE_BYTES[config["torch_dtype"]]`` bytes. Watch out:

    * ``num_key_value_heads`` may be missing: then every attention head has its own K and V;
    * ``head_dim`` may be missing: then it is ``hidden_size // num_attention_heads``.

    Returns:
        an int (bytes).
    """
    ### BEGIN SOLUTION
    layers = config["num_hidden_layers"]
    kv_heads = config.get("num_key_value_heads") or config["num_attention_heads"]
    head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    return 2 * layers * kv_heads * head_dim * DTYPE_BYTES[config["torch_dtype"]]
    ### END SOLUTION
