"""Tokenizers of the language models: text in, token ids out, and a card of which.

Two kinds: ``ByteTokenizer`` (a token per UTF-8 byte, 256 ids: tiny-lm's, the same on every
machine, nothing to load) and ``JsonTokenizer`` (a ``tokenizers`` tokenizer from its JSON form:
SmolLM2's, read once from its GGUF file and cached with its weights, ``benchmarks.zoo.gguf``).
Text is encoded without special tokens: a window of a text is the text's own tokens.
"""

from __future__ import annotations

import hashlib

BYTE_VOCAB = 256


class ByteTokenizer:
    """Every UTF-8 byte its own token. tiny-lm uses it rather than SmolLM2's tokenizer: its
    windows are then the same on every machine whether or not the weights package is
    installed, it loads in no time, and a 256-word vocabulary keeps the tiny model's
    embedding and output layer tiny."""

    name = "bytes"
    vocab_size = BYTE_VOCAB

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, ids) -> str:
        return bytes(int(i) for i in ids).decode("utf-8", errors="replace")

    def card(self) -> dict:
        return {"kind": self.name, "vocab_size": self.vocab_size}


class JsonTokenizer:
    """A ``tokenizers`` tokenizer (a fast Hugging Face tokenizer) from its JSON form."""

    def __init__(self, json_text: str, name: str):
        from tokenizers import Tokenizer
        self._tokenizer = Tokenizer.from_str(json_text)
        self.name = name
        self.vocab_size = self._tokenizer.get_vocab_size(with_added_tokens=True)
        self.digest = hashlib.sha256(json_text.encode()).hexdigest()

    def encode(self, text: str) -> list[int]:
        return self._tokenizer.encode(text, add_special_tokens=False).ids

    def decode(self, ids) -> str:
        return self._tokenizer.decode([int(i) for i in ids])

    def card(self) -> dict:
        return {"kind": self.name, "vocab_size": self.vocab_size, "sha256": self.digest}
