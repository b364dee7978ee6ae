"""Reads a .safetensors file with numpy alone (bench/peers/hf_to_gguf.py and torch_lora_step.py share it)."""

import json
import sys

import numpy as np

DTYPES = {"F32": np.float32, "F16": np.float16}


def read_safetensors(path, who):
    """name -> numpy array, from the safetensors header (u64 length, JSON) and the raw little-endian data."""
    with open(path, "rb") as f:
        header_len = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(header_len))
        data = f.read()
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        if info["dtype"] not in DTYPES:
            sys.exit(f"{who}: {path}: tensor {name} has dtype {info['dtype']}; expected F32 or F16")
        tensors[name] = np.frombuffer(data[start:end], dtype=DTYPES[info["dtype"]]).reshape(info["shape"])
    return tensors
