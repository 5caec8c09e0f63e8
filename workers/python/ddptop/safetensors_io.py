"""safetensors_io.py — the safetensors file format, written without the
safetensors package when it is not installed.

The format: 8 bytes little-endian header length, a JSON header naming each
tensor's dtype, shape and [begin, end) byte offsets into the data that
follows (plus "__metadata__", strings only), padded with spaces to a
multiple of 8, then the tensors' bytes back to back, little-endian, C order.
"""
import json
import struct

import torch

DTYPES = {torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
          torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8",
          torch.uint8: "U8", torch.bool: "BOOL"}


def _bytes(t):
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:      # numpy has no bfloat16: same bits as int16
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def encode(tensors, metadata=None):
    """The bytes of a .safetensors file holding `tensors` (name -> tensor);
    metadata: str -> str."""
    header, blobs, at = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name]
        if t.dtype not in DTYPES:
            raise ValueError(f"{name}: dtype {t.dtype} has no safetensors name")
        b = _bytes(t)
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [at, at + len(b)]}
        blobs.append(b)
        at += len(b)
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def save(tensors, path, metadata=None):
    """Write with the safetensors package when present, else with encode()."""
    tensors = {k: v.detach().cpu().contiguous().clone() for k, v in tensors.items()}
    metadata = {str(k): str(v) for k, v in (metadata or {}).items()} or None
    try:
        from safetensors.torch import save_file
    except ImportError:
        save_file = None
    if save_file is not None:
        save_file(tensors, path, metadata=metadata)
        return
    with open(path, "wb") as f:
        f.write(encode(tensors, metadata))
