#!/usr/bin/env python3
"""Writes the bad input files of the e2e tests; deterministic.

  files.py truncate IN OUT --keep FRACTION      the first FRACTION of IN
  files.py random OUT --size N [--identifier]   seeded random bytes; with
                                                --identifier, "PTP1" at bytes
                                                4-7 (so the loader gets past
                                                its identifier check)
  files.py replace IN OUT --find TEXT --by TEXT the first occurrence of TEXT,
                                                same length (fails if absent)
  files.py tokens OUT --count N [--vocab V] [--first F]
                 [--bad-at I --bad-value X]
                 [--width 2|4] [--llmc-magic M [--llmc-version V]]
                 [--npy DTYPE]
                                                raw uint16 tokens F..V-1,
                                                0..V-1 cycling (F = 0 by
                                                default), token I set to X;
                                                --width 4: uint32; with
                                                --llmc-magic, behind an
                                                llm.c header with that magic;
                                                with --npy u2, u4 or i4, an
                                                .npy array of that dtype
                                                (written without numpy)
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
    values = [(args.first + i) % args.vocab for i in range(args.count)]
    if args.bad_at is not None:
        values[args.bad_at] = args.bad_value
    header = b""
    code = {2: "H", 4: "I"}[args.width]
    if args.llmc_magic is not None:
        header = struct.pack("<3i", args.llmc_magic, args.llmc_version,
                             len(values)) + bytes(1024 - 12)
    if args.npy is not None:
        code = {"u2": "H", "u4": "I", "i4": "i"}[args.npy]
        text = (f"{{'descr': '<{args.npy}', 'fortran_order': False, "
                f"'shape': ({len(values)},), }}")
        # Padded with spaces and a newline to a multiple of 64, as numpy does.
        text += " " * (63 - (10 + len(text)) % 64) + "\n"
        header = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + \
            text.encode("latin1")
    open(args.output, "wb").write(
        header + struct.pack(f"<{len(values)}{code}", *values))


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
    k.add_argument("--first", type=int, default=0)
    k.add_argument("--bad-at", type=int)
    k.add_argument("--bad-value", type=int, default=65535)
    k.add_argument("--llmc-magic", type=int)
    k.add_argument("--llmc-version", type=int, default=1)
    k.add_argument("--width", type=int, choices=[2, 4], default=2)
    k.add_argument("--npy", choices=["u2", "u4", "i4"])
    k.set_defaults(run=tokens)
    args = parser.parse_args()
    args.run(args)


if __name__ == "__main__":
    main()
