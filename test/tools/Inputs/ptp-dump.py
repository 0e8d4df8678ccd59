#!/usr/bin/env python3
"""Prints a .ptp program one fact per line, for FileCheck.

    ptp-dump.py REPO_ROOT PROGRAM.ptp

A small FlatBuffer reader for runtime/program/Program.fbs (field ids in
schema order), independent of the C++ writer and of flatc; kernels are named
by their row of runtime/program/Kernels.def. Floats are printed in the shortest form
that reads back as the same float32.
"""

import os
import re
import struct
import sys

ROLES = ["Temporary", "Param", "Moment1", "Moment2", "Step", "LearningRate",
         "Tokens", "Targets", "Loss", "Gradient", "AxisIndex", "Logits"]
DTYPES = ["F32", "I32", "BF16"]


class Table:
    def __init__(self, data, pos):
        self.data, self.pos = data, pos
        vtable = pos - struct.unpack_from("<i", data, pos)[0]
        size = struct.unpack_from("<H", data, vtable)[0]
        self.fields = [struct.unpack_from("<H", data, vtable + 4 + 2 * i)[0]
                       for i in range((size - 4) // 2)]

    def _at(self, field):
        if field < len(self.fields) and self.fields[field]:
            return self.pos + self.fields[field]
        return None

    def scalar(self, field, fmt, default=0):
        at = self._at(field)
        return default if at is None else struct.unpack_from("<" + fmt, self.data, at)[0]

    def _target(self, field):
        at = self._at(field)
        return None if at is None else at + struct.unpack_from("<I", self.data, at)[0]

    def string(self, field):
        at = self._target(field)
        if at is None:
            return None
        n = struct.unpack_from("<I", self.data, at)[0]
        return self.data[at + 4:at + 4 + n].decode()

    def vector(self, field, fmt):
        at = self._target(field)
        if at is None:
            return []
        n = struct.unpack_from("<I", self.data, at)[0]
        return list(struct.unpack_from("<%d%s" % (n, fmt), self.data, at + 4))

    def tables(self, field):
        at = self._target(field)
        if at is None:
            return []
        n = struct.unpack_from("<I", self.data, at)[0]
        result = []
        for i in range(n):
            element = at + 4 + 4 * i
            result.append(Table(self.data, element + struct.unpack_from("<I", self.data, element)[0]))
        return result


def f32(value):
    for digits in range(1, 10):
        text = "%.*g" % (digits, value)
        if struct.unpack("<f", struct.pack("<f", float(text)))[0] == value:
            return text
    return repr(value)

TRANSFERS = ["send", "recv"]
TIERS = ["arena", "host", "nvme"]
TIER_COPIES = ["tier_read", "tier_write"]


def dump_stream(stream, kernels):
    # Stream: arena_bytes, buffers, functions, host_bytes, nvme_bytes (the
    # offload's tiers, version 12; printed when there are any).
    print("arena_bytes", stream.scalar(0, "Q"))
    for field, tier in ((3, "host"), (4, "nvme")):
        if stream.scalar(field, "Q"):
            print("%s_bytes %d" % (tier, stream.scalar(field, "Q")))
    for i, b in enumerate(stream.tables(1)):
        shape = "x".join(str(d) for d in b.vector(3, "q")) or "scalar"
        name = b.string(1)
        # Buffer.sharding: per dimension, mesh axis indices; absent: whole.
        sharding = [d.vector(0, "B") for d in b.tables(5)]
        # Buffer.tier (field 8): the offload's tier, when not the arena.
        tier = b.scalar(8, "B")
        print("buffer #%d %s %s %s @%d%s%s%s" % (
            i, ROLES[b.scalar(0, "B")], DTYPES[b.scalar(2, "B")], shape,
            b.scalar(4, "Q"), ' "%s"' % name if name else "",
            " sharding %s" % sharding if sharding else "",
            " tier %s" % TIERS[tier] if tier else ""))
    for function in stream.tables(2):
        print("function", function.string(0))
        # Function.loop (field 2, version 13): the micro-batch loop; its
        # stride (field 4, version 14) when not 1.
        at = function._target(2)
        if at is not None:
            loop = Table(function.data, at)
            stride = loop.scalar(4, "q", 1)
            print("  loop #%d..#%d count %d%s slices %s" % (
                loop.scalar(0, "I"), loop.scalar(1, "I"), loop.scalar(2, "q"),
                " stride %d" % stride if stride != 1 else "",
                loop.vector(3, "I")))
        # Function.walk (field 3, version 15): the action walk's regions,
        # its slots after slot 0, and its (region, slot, micro-batch)
        # actions (a vector of structs of three uint32).
        at = function._target(3)
        if at is not None:
            walk = Table(function.data, at)
            for region in walk.tables(0):
                print('  region #%d..#%d "%s" rows %s from %s' % (
                    region.scalar(0, "I"), region.scalar(1, "I"),
                    region.string(2), region.vector(3, "I"),
                    region.vector(4, "I")))
            # A slot's repeats and its copies' strides (fields 2 and 3,
            # version 16) when it repeats.
            for index, slot in enumerate(walk.tables(1)):
                if index:
                    repeat = slot.scalar(2, "I")
                    print("  slot %d %s%s" % (index, list(zip(
                        slot.vector(0, "I"), slot.vector(1, "I"))),
                        " repeat %d strides %s" % (repeat, slot.vector(3, "Q"))
                        if repeat else ""))
            actions = walk._target(2)
            n = struct.unpack_from("<I", walk.data, actions)[0]
            triples = struct.unpack_from("<%dI" % (3 * n), walk.data, actions + 4)
            print("  actions %s" % " ".join(
                "%d.%d.%d" % triples[i:i + 3] for i in range(0, 3 * n, 3)))
        for ins in function.tables(1):
            # Instruction.transfer (field 5): kind, axis, peer, label.
            at = ins._target(5)
            if at is not None:
                transfer = Table(ins.data, at)
                print('  %s %s axis %d peer %d label "%s"' % (
                    TRANSFERS[transfer.scalar(0, "B")], ins.vector(1, "I"),
                    transfer.scalar(1, "B"), transfer.scalar(2, "q"),
                    transfer.string(3)))
                continue
            # Instruction.tier_copy (field 7): kind, label, started.
            at = ins._target(7)
            if at is not None:
                copy = Table(ins.data, at)
                print('  %s %s label "%s"%s' % (
                    TIER_COPIES[copy.scalar(0, "B")], ins.vector(1, "I"),
                    copy.string(1), " started" if copy.scalar(2, "B") else ""))
                continue
            # Instruction.wait (field 6): the started instruction's index.
            at = ins._target(6)
            if at is not None:
                print("  wait #%d" % Table(ins.data, at).scalar(0, "I"))
                continue
            kernel = ins.scalar(0, "H")
            line = "  %s %s" % (kernels[kernel] if kernel < len(kernels) else "#%d" % kernel,
                                ins.vector(1, "I"))
            ints, floats = ins.vector(2, "q"), ins.vector(3, "f")
            if ints:
                line += " ints %s" % ints
            if floats:
                line += " floats [%s]" % ", ".join(f32(f) for f in floats)
            print(line)


def main():
    root, path = sys.argv[1], sys.argv[2]
    data = open(path, "rb").read()
    kernels = re.findall(r'^KERNEL\(\w+, "(\w+)"',
                         open(os.path.join(root, "runtime", "program", "Kernels.def")).read(), re.M)
    print("identifier", data[4:8].decode("ascii", "replace"))
    program = Table(data, struct.unpack_from("<I", data, 0)[0])
    print("schema_version", program.scalar(0, "I"))
    # Version 5: one stream per pipeline stage (Program.streams, field 7);
    # a program with one stream prints as version 4 did.
    streams = program.tables(7)
    for k, stream in enumerate(streams):
        if len(streams) > 1:
            print("stream", k)
        dump_stream(stream, kernels)
    print("model", program.string(4))
    print("train", program.string(5))
    # Program.offload_path (field 10, version 12): the NVMe tier's directory.
    if program.string(10) is not None:
        print("offload_path", program.string(10))


if __name__ == "__main__":
    main()
