"""Minimal safetensors writer shared by Kiln's golden-data generators.

Debian's python3-torch ships without the safetensors package, so the
generators write the container themselves: an 8-byte little-endian header
length, a JSON header, then the raw little-endian tensor bytes.
"""
import json
import os
import struct

import torch

_DTYPES = {
    torch.float32: "F32",
    torch.float64: "F64",
    torch.bfloat16: "BF16",
    torch.int64: "I64",
    torch.int32: "I32",
    torch.int8: "I8",
    torch.uint8: "U8",
    torch.bool: "BOOL",
}


def _raw(t):
    t = t.detach().contiguous().cpu()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().tobytes()
    return t.numpy().tobytes()


def save(path, tensors, metadata=None):
    """Write a dict of name -> tensor to path atomically (temp file + rename)."""
    header = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    blobs = []
    off = 0
    for name in sorted(tensors):
        t = tensors[name]
        b = _raw(t)
        header[name] = {"dtype": _DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    js = json.dumps(header, separators=(",", ":")).encode()
    js += b" " * (-len(js) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(js)))
        f.write(js)
        for b in blobs:
            f.write(b)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def load(path):
    """Read a safetensors file into a dict of name -> torch tensor."""
    inv = {v: k for k, v in _DTYPES.items()}
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        body = f.read()
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        dt = inv[e["dtype"]]
        s, t = e["data_offsets"]
        buf = bytearray(body[s:t])
        if dt == torch.bfloat16:
            x = torch.frombuffer(buf, dtype=torch.int16).view(torch.bfloat16) if buf else torch.empty(0, dtype=dt)
        else:
            x = torch.frombuffer(buf, dtype=dt) if buf else torch.empty(0, dtype=dt)
        out[name] = x.reshape(e["shape"]).clone()
    return out
