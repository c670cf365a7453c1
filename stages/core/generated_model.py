"""The config.json of the Llama-architecture models the project generates (params.yaml `models`):
what the model stage writes (stages/run/model.py) and what a plan reads for a generated model."""
from __future__ import annotations


def llama_config(*, layers: int, hidden: int, heads: int, kv_heads: int, intermediate: int,
                 max_positions: int, vocab_size: int) -> dict:
    """The config.json of a generated Llama-architecture model (params.yaml's `models`): what the
    model stage writes and what a plan reads for a model not generated yet."""
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": hidden,
        "intermediate_size": intermediate,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": hidden // heads,
        "max_position_embeddings": max_positions,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "vocab_size": vocab_size,
        "bos_token_id": 0,
        "eos_token_id": 1,
        "pad_token_id": 2,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "hidden_act": "silu",
    }


def generated_config(model: dict) -> dict:
    """llama_config from a `models` entry of params.yaml."""
    keys = ("layers", "hidden", "heads", "kv_heads", "intermediate", "max_positions", "vocab_size")
    return llama_config(**{k: model[k] for k in keys})
