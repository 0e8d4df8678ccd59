#!/usr/bin/env python3
"""Reads and damages partition-run checkpoints for the e2e tests.

An independent reader of the format (Python's standard library only): the
header, the tensors and their CRC-32C checksums ("crc32c:<tensor>" in
__metadata__, and "crc32c:__metadata__" over the other entries in key
order, each as key NUL value NUL).

  checkpoint.py check DIR             verify every CRC-32C; prints "N
                                      tensors and the metadata, every CRC-32C
                                      matches"
  checkpoint.py names DIR             the tensor names, one a line
  checkpoint.py same DIR OTHER        every tensor of DIR in OTHER, with the
                                      same dtype, shape and bytes, and no
                                      other; prints "identical: N tensors
                                      (K moments)"
  checkpoint.py flip DIR OUT --tensor NAME [--count 16]
                                      COUNT bytes inverted in the middle of
                                      NAME's data (checksums left as they are)
  checkpoint.py nan DIR OUT --tensor NAME [--index I] [--value nan|inf|-1]
                                      element I of an F32 tensor set to VALUE,
                                      the checksums recomputed: only a check
                                      of the values can notice
  checkpoint.py rename DIR OUT --tensor NAME --to NEW
                                      the tensor (and its checksum) renamed,
                                      the metadata checksum recomputed
  checkpoint.py set DIR OUT --key KEY --value VALUE
                                      a metadata entry changed, checksums
                                      left as they are
  checkpoint.py version1 DIR OUT      the layout before checksums: version 1,
                                      no crc32c keys

DIR and OUT are checkpoint directories (OUT is created); the file inside is
checkpoint.safetensors.
"""

import argparse
import json
import math
import os
import struct
import sys

FILE = "checkpoint.safetensors"
PREFIX = "crc32c:"
METADATA_KEY = "crc32c:__metadata__"


def make_table():
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
        table.append(crc)
    return table


TABLE = make_table()


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc = (crc >> 8) ^ TABLE[(crc ^ byte) & 0xFF]
    return crc ^ 0xFFFFFFFF


def metadata_crc(metadata):
    data = b""
    for key in sorted(metadata, key=lambda k: k.encode()):
        if key != METADATA_KEY:
            data += key.encode() + b"\0" + metadata[key].encode() + b"\0"
    return f"{crc32c(data):08x}"


def seal(header):
    metadata = header["__metadata__"]
    metadata[METADATA_KEY] = metadata_crc(metadata)


def load(directory):
    raw = open(os.path.join(directory, FILE), "rb").read()
    (length,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + length])
    return header, bytearray(raw[8 + length:])


def save(directory, header, data):
    os.makedirs(directory, exist_ok=True)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(os.path.join(directory, FILE), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + bytes(data))


def tensors(header):
    return [name for name in header if name != "__metadata__"]


def span(header, name):
    if name not in header:
        sys.exit(f"checkpoint.py: no tensor {name!r}; have {tensors(header)}")
    begin, end = header[name]["data_offsets"]
    return begin, end


def check(args):
    header, data = load(args.dir)
    metadata = header.get("__metadata__", {})
    for name in tensors(header):
        begin, end = span(header, name)
        actual = f"{crc32c(data[begin:end]):08x}"
        stored = metadata.get(PREFIX + name)
        if stored != actual:
            sys.exit(f"checkpoint.py: {name}: CRC-32C {actual}, stored "
                     f"{stored}")
    actual = metadata_crc(metadata)
    if metadata.get(METADATA_KEY) != actual:
        sys.exit(f"checkpoint.py: the metadata: CRC-32C {actual}, stored "
                 f"{metadata.get(METADATA_KEY)}")
    print(f"{len(tensors(header))} tensors and the metadata, every CRC-32C "
          "matches")


def names(args):
    header, _ = load(args.dir)
    print("\n".join(tensors(header)))


def same(args):
    header, data = load(args.dir)
    other_header, other_data = load(args.other)
    if sorted(tensors(header)) != sorted(tensors(other_header)):
        sys.exit(f"checkpoint.py: {args.dir} and {args.other} hold other "
                 f"tensors: {sorted(set(tensors(header)) ^ set(tensors(other_header)))}")
    for name in tensors(header):
        mine, theirs = header[name], other_header[name]
        for key in ("dtype", "shape"):
            if mine[key] != theirs[key]:
                sys.exit(f"checkpoint.py: {name}: {key} {mine[key]} against "
                         f"{theirs[key]}")
        begin, end = span(header, name)
        other_begin, other_end = span(other_header, name)
        if data[begin:end] != other_data[other_begin:other_end]:
            sys.exit(f"checkpoint.py: {name} differs")
    moments = sum(1 for name in tensors(header)
                  if name.endswith((".adam_m", ".adam_v")))
    print(f"identical: {len(tensors(header))} tensors ({moments} moments)")


def flip(args):
    header, data = load(args.dir)
    begin, end = span(header, args.tensor)
    middle = (begin + end) // 2
    for i in range(middle, min(middle + args.count, end)):
        data[i] ^= 0xFF
    save(args.out, header, data)


def nan(args):
    header, data = load(args.dir)
    begin, end = span(header, args.tensor)
    at = begin + 4 * args.index
    if header[args.tensor]["dtype"] != "F32" or at + 4 > end:
        sys.exit("checkpoint.py: not an F32 element of the tensor")
    value = {"nan": math.nan, "inf": math.inf, "-1": -1.0}[args.value]
    data[at:at + 4] = struct.pack("<f", value)
    header["__metadata__"][PREFIX + args.tensor] = \
        f"{crc32c(data[begin:end]):08x}"
    seal(header)
    save(args.out, header, data)


def rename(args):
    header, data = load(args.dir)
    span(header, args.tensor)
    renamed = {}
    for key, value in header.items():
        renamed[args.to if key == args.tensor else key] = value
    metadata = renamed["__metadata__"]
    metadata[PREFIX + args.to] = metadata.pop(PREFIX + args.tensor)
    seal(renamed)
    save(args.out, renamed, data)


def set_metadata(args):
    header, data = load(args.dir)
    header["__metadata__"][args.key] = args.value
    save(args.out, header, data)


def version1(args):
    header, data = load(args.dir)
    metadata = header["__metadata__"]
    for key in [k for k in metadata if k.startswith(PREFIX)]:
        del metadata[key]
    metadata["checkpoint_version"] = "1"
    save(args.out, header, data)


def main():
    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers(dest="command", required=True)
    for name, function in (("check", check), ("names", names)):
        sub = commands.add_parser(name)
        sub.add_argument("dir")
        sub.set_defaults(run=function)
    sub = commands.add_parser("same")
    sub.add_argument("dir")
    sub.add_argument("other")
    sub.set_defaults(run=same)
    for name, function in (("flip", flip), ("nan", nan), ("rename", rename),
                           ("set", set_metadata), ("version1", version1)):
        sub = commands.add_parser(name)
        sub.add_argument("dir")
        sub.add_argument("out")
        sub.set_defaults(run=function)
        if name in ("flip", "nan", "rename"):
            sub.add_argument("--tensor", required=True)
        if name == "set":
            sub.add_argument("--key", required=True)
            sub.add_argument("--value", required=True)
        if name == "flip":
            sub.add_argument("--count", type=int, default=16)
        if name == "nan":
            sub.add_argument("--index", type=int, default=0)
            sub.add_argument("--value", choices=["nan", "inf", "-1"],
                             default="nan")
        if name == "rename":
            sub.add_argument("--to", required=True)
    args = parser.parse_args()
    args.run(args)


if __name__ == "__main__":
    main()
