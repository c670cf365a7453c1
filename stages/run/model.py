"""Generate a tiny Llama-architecture model folder: config and a locally trained tokenizer.

The local-cpu profile serves this folder with vLLM's ``--load-format dummy``: the engine builds
real layers of the given shape with random weights, so nothing is downloaded and no weight file
is written. The tokenizer is a byte-level BPE trained here on generated text, so prompt lengths
can be counted with the model's own tokenizer exactly as on the campaign node.
"""
from __future__ import annotations

import json
import random
from pathlib import Path

from stages.core.generated_model import llama_config

# A fixed word list keeps the training corpus (and so the tokenizer) reproducible.
_SYLLABLES = ("ka", "lo", "mi", "ne", "su", "ta", "ri", "po", "ve", "da", "gu", "xi", "or", "an",
              "el", "is", "um", "ba", "co", "fe", "hi", "ju", "ly", "qu", "ze", "wo", "ny", "th")


def corpus(*, seed: int, words: int) -> list[str]:
    """Sentences of pseudo-words, digits and punctuation: enough for a BPE to learn merges."""
    rng = random.Random(seed)
    vocab = ["".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 4))) for _ in range(2000)]
    lines = []
    for _ in range(words // 12):
        sent = " ".join(rng.choice(vocab) for _ in range(11))
        lines.append(f"{sent.capitalize()} {rng.randint(0, 99999)}.")
    return lines


def build_tokenizer(*, vocab_size: int, seed: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<s>", "</s>", "<pad>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus(seed=seed, words=200_000), trainer=trainer)
    return tok


def run(*, out: Path, layers: int, hidden: int, heads: int, kv_heads: int, intermediate: int,
        max_positions: int, vocab_size: int, seed: int) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    tok = build_tokenizer(vocab_size=vocab_size, seed=seed)
    tok.save(str(out / "tokenizer.json"))
    cfg = llama_config(layers=layers, hidden=hidden, heads=heads, kv_heads=kv_heads,
                       intermediate=intermediate, max_positions=max_positions,
                       vocab_size=tok.get_vocab_size())
    (out / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    (out / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>",
        "model_max_length": max_positions,
        "clean_up_tokenization_spaces": False,
        # A plain template so the chat endpoint works; the model itself is untrained.
        "chat_template": "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant:",
    }, indent=2) + "\n")
    (out / "generation_config.json").write_text(json.dumps(
        {"bos_token_id": 0, "eos_token_id": 1, "pad_token_id": 2}, indent=2) + "\n")
    return out
