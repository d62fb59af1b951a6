"""Builds, offline, a tiny random Llama with a byte-level BPE tokenizer and a small alpaca
dataset, for real Axolotl to fine-tune on the CPU in seconds.

Run with the Axolotl venv's python: `python tiny_model.py FOLDER` writes FOLDER/model (a
save_pretrained folder: config, weights, tokenizer) and FOLDER/data.jsonl. Nothing is
downloaded, and every run writes the same files (fixed seed).
"""

import json
import sys
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

LINES = (
    "the quick brown fox jumps over the lazy dog",
    "a tiny model learns to say hello",
    "obc compiles run files into job scripts",
)
ROWS = 32


def build_tokenizer() -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer trained on LINES: every text can be encoded."""
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=320, show_progress=False,
                                  special_tokens=["<unk>", "<s>", "</s>", "<pad>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(LINES, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="<unk>",
                                   bos_token="<s>", eos_token="</s>", pad_token="<pad>")


def build_model(tokenizer: PreTrainedTokenizerFast) -> LlamaForCausalLM:
    """A random two-layer Llama of about 40k parameters."""
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=512, bos_token_id=tokenizer.bos_token_id,
                         eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id)
    return LlamaForCausalLM(config)


def main(folder: Path) -> None:
    tokenizer = build_tokenizer()
    build_model(tokenizer).save_pretrained(folder / "model")
    tokenizer.save_pretrained(folder / "model")
    rows = ({"instruction": f"say line {i % len(LINES)}", "input": "",
             "output": LINES[i % len(LINES)]} for i in range(ROWS))
    (folder / "data.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows),
                                       encoding="utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
