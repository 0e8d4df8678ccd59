#!/usr/bin/env python3
"""Turns text into token shards for partition-run --data, with a Hugging Face
tokenizer.

  scripts/tokenize.py --tokenizer DIR_OR_NAME -o OUT.bin TEXT... \\
      [--format llmc|raw|raw32|npy] [--lines] [--bos] [--eos]

--tokenizer is a directory holding tokenizer.json (read with the
`tokenizers` package), or anything transformers' AutoTokenizer loads (a
directory or a hub name; transformers then needs the files or the network).
Each TEXT file is one document (--lines: each non-empty line is one);
--bos / --eos put the tokenizer's BOS / EOS id before / after each document
(llm.c puts <|endoftext|> before each).

The output holds ids as partition-run reads them (docs/running.md):
  llmc   (default) an llm.c shard: uint16 tokens under GPT-2's header
         (magic 20240520, version 1) when every id fits, else uint32 under
         Llama 3's (magic 20240801, version 7); --data-format auto finds it
  raw    headerless uint16 (fails when an id exceeds 65535)
  raw32  headerless uint32: read it with --data-format raw32
  npy    a NumPy .npy array of uint16 or uint32 (written without numpy)

Needs `tokenizers` or `transformers` (pip install tokenizers); neither is a
dependency of partition. Errors are one line and exit 1 (2 for a bad command
line). One line on success: the tokens, the width, the file.
"""

import argparse
import array
import os
import struct
import sys

LLMC_HEADER_INTS = 256
LLMC16 = (20240520, 1)
LLMC32 = (20240801, 7)


def fail(message, code=1):
    print(f"tokenize.py: error: {message}", file=sys.stderr)
    sys.exit(code)


class Encoder:
    """encode(text) -> ids, bos / eos ids (or None), the vocabulary size."""

    def __init__(self, spec):
        self.bos = self.eos = None
        path = os.path.join(spec, "tokenizer.json") if os.path.isdir(spec) \
            else spec
        try:
            import tokenizers  # noqa: F401
            have_tokenizers = True
        except ImportError:
            have_tokenizers = False
        if have_tokenizers and os.path.isfile(path) and path.endswith(".json"):
            from tokenizers import Tokenizer
            try:
                self.tokenizer = Tokenizer.from_file(path)
            except Exception as error:  # the package's own error types vary
                fail(f"cannot read the tokenizer '{path}': {error}")
            self.encode = lambda text: self.tokenizer.encode(
                text, add_special_tokens=False).ids
            self.vocab = self.tokenizer.get_vocab_size(with_added_tokens=True)
            self._special_from_config(spec)
            return
        try:
            from transformers import AutoTokenizer
        except ImportError:
            if have_tokenizers:
                fail(f"'{spec}' holds no tokenizer.json, and loading it "
                     "otherwise needs the transformers package; pip install "
                     "transformers, or pass a directory with tokenizer.json")
            fail("needs the Python package tokenizers or transformers to "
                 "tokenize; neither is installed (pip install tokenizers)")
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(spec)
        except Exception as error:
            fail(f"cannot load the tokenizer '{spec}': "
                 f"{str(error).splitlines()[0] if str(error) else error!r}")
        self.encode = lambda text: self.tokenizer.encode(
            text, add_special_tokens=False)
        self.vocab = len(self.tokenizer)
        self.bos = self.tokenizer.bos_token_id
        self.eos = self.tokenizer.eos_token_id

    def _special_from_config(self, spec):
        # tokenizer.json alone does not say which tokens are BOS / EOS:
        # tokenizer_config.json beside it does.
        if not os.path.isdir(spec):
            return
        config = os.path.join(spec, "tokenizer_config.json")
        if not os.path.isfile(config):
            return
        import json
        try:
            with open(config, encoding="utf-8") as f:
                settings = json.load(f)
        except (OSError, ValueError) as error:
            fail(f"cannot read '{config}': {error}")
        for attribute, key in (("bos", "bos_token"), ("eos", "eos_token")):
            token = settings.get(key)
            if isinstance(token, dict):
                token = token.get("content")
            if isinstance(token, str):
                setattr(self, attribute, self.tokenizer.token_to_id(token))


def documents(paths, lines):
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except FileNotFoundError:
            fail(f"text file '{path}' does not exist; check the path")
        except UnicodeDecodeError as error:
            fail(f"text file '{path}' is not UTF-8 ({error.reason} at byte "
                 f"{error.start}); convert it to UTF-8")
        except OSError as error:
            fail(f"cannot read text file '{path}': {error.strerror}")
        if lines:
            yield from (line for line in text.splitlines() if line.strip())
        else:
            yield text


def write(path, ids, fmt):
    wide = max(ids) > 0xFFFF
    if fmt == "raw" and wide:
        fail(f"token id {max(ids)} does not fit the uint16 of --format raw; "
             "use --format llmc, raw32 or npy")
    if fmt == "llmc" and len(ids) >= 2**31:
        fail(f"{len(ids)} tokens do not fit an llm.c shard's int32 count; "
             "tokenize the text into several shards")
    width = 4 if fmt == "raw32" or (wide and fmt != "raw") else 2
    data = array.array("I" if width == 4 else "H", ids)
    if sys.byteorder != "little":
        data.byteswap()
    header = b""
    if fmt == "llmc":
        magic, version = LLMC32 if width == 4 else LLMC16
        header = struct.pack("<3i", magic, version, len(ids)) + \
            bytes(4 * (LLMC_HEADER_INTS - 3))
    elif fmt == "npy":
        text = (f"{{'descr': '<u{width}', 'fortran_order': False, "
                f"'shape': ({len(ids)},), }}")
        text += " " * (63 - (10 + len(text)) % 64) + "\n"
        header = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + \
            text.encode("latin1")
    try:
        with open(path, "wb") as f:
            f.write(header)
            data.tofile(f)
    except OSError as error:
        fail(f"cannot write '{path}': {error.strerror}; check that its "
             "directory exists and is writable")
    return width


def main():
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("text", nargs="+", help="UTF-8 text files")
    parser.add_argument("--tokenizer", required=True,
                        help="a directory with tokenizer.json, or a name "
                             "transformers' AutoTokenizer loads")
    parser.add_argument("-o", "--output", required=True)
    parser.add_argument("--format", choices=["llmc", "raw", "raw32", "npy"],
                        default="llmc")
    parser.add_argument("--lines", action="store_true",
                        help="each non-empty line is a document")
    parser.add_argument("--bos", action="store_true",
                        help="the BOS id before each document")
    parser.add_argument("--eos", action="store_true",
                        help="the EOS id after each document")
    args = parser.parse_args()

    encoder = Encoder(args.tokenizer)
    for flag, token in (("--bos", encoder.bos), ("--eos", encoder.eos)):
        if getattr(args, flag[2:]) and token is None:
            fail(f"{flag}: the tokenizer '{args.tokenizer}' names no "
                 f"{flag[2:].upper()} token; leave {flag} out")
    ids = []
    for document in documents(args.text, args.lines):
        if args.bos:
            ids.append(encoder.bos)
        ids.extend(encoder.encode(document))
        if args.eos:
            ids.append(encoder.eos)
    if not ids:
        fail("the text holds no tokens; pass files with text")
    width = write(args.output, ids, args.format)
    print(f"tokenize.py: {len(ids)} tokens (vocabulary {encoder.vocab}, "
          f"uint{8 * width}) in {args.output} ({args.format})")


if __name__ == "__main__":
    main()
