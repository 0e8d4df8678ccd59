#!/usr/bin/env python3
"""Writes the bad input files of the e2e tests; deterministic.

  files.py truncate IN OUT --keep FRACTION      the first FRACTION of IN
  files.py random OUT --size N [--identifier]   seeded random bytes; with
                                                --identifier, "PTP1" at bytes
                                                4-7 (so the loader gets past
                                                its identifier check)
  files.py replace IN OUT --find TEXT --by TEXT the first occurrence of TEXT,
                                                same length (fails if absent)
  files.py tokens OUT --count N [--vocab V] [--bad-at I --bad-value X]
                 [--llmc-magic M [--llmc-version V]]
                                                raw uint16 tokens 0..V-1
                                                cycling, token I set to X;
                                                with --llmc-magic, behind an
                                                llm.c header with that magic
"""

import argparse
import random
import struct
import sys


def truncate(args):
    data = open(args.input, "rb").read()
    keep = int(len(data) * args.keep)
    open(args.output, "wb").write(data[:keep])
    print(f"kept {keep} of {len(data)} bytes")


def random_bytes(args):
    rng = random.Random(20240520)
    data = bytearray(rng.getrandbits(8) for _ in range(args.size))
    if args.identifier:
        data[4:8] = b"PTP1"
    open(args.output, "wb").write(bytes(data))


def replace(args):
    data = open(args.input, "rb").read()
    find, by = args.find.encode(), args.by.encode()
    if len(find) != len(by):
        sys.exit("--find and --by must have the same length")
    at = data.find(find)
    if at < 0:
        sys.exit(f"{args.input}: no {args.find!r}")
    open(args.output, "wb").write(data[:at] + by + data[at + len(find):])
    print(f"replaced {args.find!r} at byte {at}")


def tokens(args):
    values = [i % args.vocab for i in range(args.count)]
    if args.bad_at is not None:
        values[args.bad_at] = args.bad_value
    header = b""
    if args.llmc_magic is not None:
        header = struct.pack("<3i", args.llmc_magic, args.llmc_version,
                             len(values)) + bytes(1024 - 12)
    open(args.output, "wb").write(
        header + struct.pack(f"<{len(values)}H", *values))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    t = commands.add_parser("truncate")
    t.add_argument("input")
    t.add_argument("output")
    t.add_argument("--keep", type=float, required=True)
    t.set_defaults(run=truncate)
    r = commands.add_parser("random")
    r.add_argument("output")
    r.add_argument("--size", type=int, required=True)
    r.add_argument("--identifier", action="store_true")
    r.set_defaults(run=random_bytes)
    p = commands.add_parser("replace")
    p.add_argument("input")
    p.add_argument("output")
    p.add_argument("--find", required=True)
    p.add_argument("--by", required=True)
    p.set_defaults(run=replace)
    k = commands.add_parser("tokens")
    k.add_argument("output")
    k.add_argument("--count", type=int, required=True)
    k.add_argument("--vocab", type=int, default=256)
    k.add_argument("--bad-at", type=int)
    k.add_argument("--bad-value", type=int, default=65535)
    k.add_argument("--llmc-magic", type=int)
    k.add_argument("--llmc-version", type=int, default=1)
    k.set_defaults(run=tokens)
    args = parser.parse_args()
    args.run(args)


if __name__ == "__main__":
    main()
