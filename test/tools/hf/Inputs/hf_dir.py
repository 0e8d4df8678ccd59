#!/usr/bin/env python3
"""Copies a transformers model directory with one change, for the
partition-import refusal tests (Python's standard library only).

  hf_dir.py config SRC DST KEY=JSON ...   config.json with KEY set to the
                                          JSON value (KEY=- deletes it)
  hf_dir.py shard SRC DST N               model.safetensors split into N
                                          shards plus model.safetensors.index.json
  hf_dir.py drop SRC DST NAME             tensor NAME removed
  hf_dir.py copy SRC DST NAME NEW         tensor NAME also saved as NEW
                                          (\\n in NEW: a newline)
  hf_dir.py pad-rows SRC DST NAME ROWS    ROWS zero rows appended to NAME
  hf_dir.py nan SRC DST NAME              NAME's element 0 set to NaN (F32)
  hf_dir.py perturb SRC DST NAME          NAME's element 0 changed (F32)
  hf_dir.py f64 SRC DST NAME              NAME stored as F64
  hf_dir.py openai SRC DST                GPT-2 as OpenAI uploaded it: no
                                          "transformer." prefix, plus the
                                          causal-mask buffers h.N.attn.bias
  hf_dir.py truncate SRC DST              model.safetensors cut short
  hf_dir.py unlisted SRC DST              a shard (of 2) holds a tensor the
                                          index does not list
  hf_dir.py fuse SRC DST                  Mixtral's per-expert tensors
                                          (block_sparse_moe.experts.e.w1..)
                                          as transformers 5's module state:
                                          mlp.gate.weight,
                                          mlp.experts.gate_up_proj [E, 2F, H]
                                          (w1[e] then w3[e]), down_proj
"""

import json
import os
import shutil
import struct
import sys

WEIGHTS = "model.safetensors"
SIZES = {"F64": 8, "F32": 4, "BF16": 2, "F16": 2}


def load(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    metadata = header.pop("__metadata__", None)
    tensors = {}
    for name, info in sorted(header.items(),
                             key=lambda kv: kv[1]["data_offsets"][0]):
        begin, end = info["data_offsets"]
        tensors[name] = (info["dtype"], info["shape"], data[begin:end])
    return metadata, tensors


def save(path, metadata, tensors):
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    data = b""
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def main():
    command, src, dst, *rest = sys.argv[1:]
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    weights = os.path.join(dst, WEIGHTS)
    if command == "config":
        path = os.path.join(dst, "config.json")
        with open(path) as f:
            config = json.load(f)
        for item in rest:
            key, value = item.split("=", 1)
            if value == "-":
                config.pop(key, None)
            else:
                config[key] = json.loads(value)
        with open(path, "w") as f:
            json.dump(config, f)
        return
    if command == "truncate":
        with open(weights, "rb") as f:
            blob = f.read()
        with open(weights, "wb") as f:
            f.write(blob[:len(blob) - 100])
        return
    metadata, tensors = load(weights)
    if command in ("shard", "unlisted"):
        count = 2 if command == "unlisted" else int(rest[0])
        names = list(tensors)
        os.remove(weights)
        weight_map = {}
        for i in range(count):
            shard = f"model-{i + 1:05d}-of-{count:05d}.safetensors"
            part = {n: tensors[n] for n in names[i::count]}
            save(os.path.join(dst, shard), metadata, part)
            weight_map.update({n: shard for n in part})
        if command == "unlisted":
            weight_map.pop(names[0])
        with open(os.path.join(dst, WEIGHTS + ".index.json"), "w") as f:
            json.dump({"metadata": {}, "weight_map": weight_map}, f)
        return
    if command == "fuse":
        fused, experts = {}, {}
        for name, (dtype, shape, raw) in tensors.items():
            if ".block_sparse_moe.experts." not in name:
                fused[name.replace(".block_sparse_moe.gate.", ".mlp.gate.")] = (
                    dtype, shape, raw)
                continue
            layer, rest_ = name.split(".block_sparse_moe.experts.")
            expert, weight = rest_.split(".")[:2]
            experts.setdefault(layer, {})[(int(expert), weight)] = (
                dtype, shape, raw)
        for layer, table in experts.items():
            count = 1 + max(e for e, _ in table)
            dtype, (f, h), _ = table[(0, "w1")]
            fused[layer + ".mlp.experts.gate_up_proj"] = (
                dtype, [count, 2 * f, h],
                b"".join(table[(e, "w1")][2] + table[(e, "w3")][2]
                         for e in range(count)))
            fused[layer + ".mlp.experts.down_proj"] = (
                dtype, [count, h, f],
                b"".join(table[(e, "w2")][2] for e in range(count)))
        save(weights, metadata, fused)
        return
    if command == "openai":
        renamed = {}
        for name, tensor in tensors.items():
            renamed[name[len("transformer."):]] = tensor
            if name.endswith(".ln_1.weight"):
                n = 4
                mask = [1.0 if j <= i else 0.0 for i in range(n)
                        for j in range(n)]
                layer = name[len("transformer."):-len(".ln_1.weight")]
                renamed[layer + ".attn.bias"] = (
                    "F32", [1, 1, n, n], struct.pack(f"<{n * n}f", *mask))
        save(weights, metadata, renamed)
        return
    name = rest[0]
    dtype, shape, raw = tensors[name]
    if command == "drop":
        del tensors[name]
    elif command == "copy":
        # "\\n" in NEW stands for a newline (a name no shell quotes easily).
        tensors[rest[1].replace("\\n", "\n")] = tensors[name]
    elif command == "pad-rows":
        rows = int(rest[1])
        width = len(raw) // shape[0]
        tensors[name] = (dtype, [shape[0] + rows] + shape[1:],
                         raw + b"\0" * (width * rows))
    elif command in ("nan", "perturb"):
        (first,) = struct.unpack("<f", raw[:4])
        value = float("nan") if command == "nan" else first + 1.0
        tensors[name] = (dtype, shape, struct.pack("<f", value) + raw[4:])
    elif command == "f64":
        count = len(raw) // 4
        values = struct.unpack(f"<{count}f", raw)
        tensors[name] = ("F64", shape, struct.pack(f"<{count}d", *values))
    else:
        sys.exit(f"hf_dir.py: unknown command {command}")
    save(weights, metadata, tensors)


if __name__ == "__main__":
    main()
