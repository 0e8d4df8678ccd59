#!/usr/bin/env python3
"""Writes a Hugging Face tokenizer with a large vocabulary, and a text in it.

  make_tokenizer.py DIR TEXT --vocab N --first F --words K

DIR gets tokenizer.json (a word-level tokenizer whose words are w0 .. wN-1,
word wI being id I, split on blanks) and tokenizer_config.json (BOS w1, EOS
w2); TEXT gets K words cycling from wF, so that with F beyond 65535 the ids
need uint32. Needs the `tokenizers` package (tests that use it say
REQUIRES: tokenizers).
"""

import argparse
import json
import os

from tokenizers import Tokenizer, models, pre_tokenizers


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("directory")
    parser.add_argument("text")
    parser.add_argument("--vocab", type=int, required=True)
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--words", type=int, default=1000)
    args = parser.parse_args()
    os.makedirs(args.directory, exist_ok=True)
    vocab = {f"w{i}": i for i in range(args.vocab)}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="w0"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.save(os.path.join(args.directory, "tokenizer.json"))
    with open(os.path.join(args.directory, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": "w1", "eos_token": "w2"}, f)
    span = args.vocab - args.first
    words = [f"w{args.first + i % span}" for i in range(args.words)]
    with open(args.text, "w") as f:
        for line in range(0, len(words), 16):
            f.write(" ".join(words[line:line + 16]) + "\n")


if __name__ == "__main__":
    main()
