"""make_seeds.py — the seed corpora of tests/fuzz/ (codec, store,
safetensors; the recordings come from tests/tools/tool_rec). Run from the
repository root with a Python that has msgpack and numpy:

    build/pyenv/bin/python tests/fuzz/make_seeds.py
    build/tests/tool_rec write tests/fuzz/corpus/record/synthetic-2rank-3steps.rec --ranks 2 --steps 3

Seeds are small on purpose: libFuzzer mutates from them.
"""
import json
import os
import struct

import msgpack

D = "tests/fuzz/corpus"


def put(kind, name, data):
    os.makedirs(f"{D}/{kind}", exist_ok=True)
    with open(f"{D}/{kind}/{name}", "wb") as f:
        f.write(data)


def frame(m):
    return msgpack.packb(dict({"v": 1}, **m))


codec = {
    "hello": {"k": "hello", "r": 0, "t": 1, "local_rank": 0, "world": 2, "local_world": 2, "pid": 42,
              "host": "h", "device": "cpu", "backend": "gloo", "version": "x", "dataset": "synthetic",
              "model": "mlp:4,2", "params": 10, "batch": 8, "max_steps": 100, "steps_per_epoch": 10,
              "dataset_size": 80},
    "step": {"k": "step", "r": 3, "t": 1700000000123456789, "epoch": 2, "step": 471, "loss": 0.38,
             "lr": 0.001, "samples": 30144, "step_ms": 12.5, "fwd_ms": 3.25, "bwd_ms": 6.1, "opt_ms": 0.75,
             "comm_ms": 4.5, "exposed_ms": 1.06, "drops": 17},
    "step-nan": {"k": "step", "r": 1, "step": 7, "loss": float("nan"), "drops": 2**40},
    "coll": {"k": "coll", "r": 1, "seq": 5, "op": "allreduce", "bucket": 0, "step": 3, "bytes": 65536,
             "enq": 1, "start": 2, "done": 3, "algbw": 1.5, "busbw": 1.5},
    "shard": {"k": "shard", "r": 0, "epoch": 0, "seed": 1, "shuffle": True, "drop_last": False, "size": 10,
              "num_samples": 5, "total_size": 10, "padding": 0, "idx": [9, 3, 1, 7, 5]},
    "phase": {"k": "phase", "r": 0, "phase": "train", "detail": "resumed"},
    "ckpt": {"k": "ckpt", "r": 0, "step": 5, "epoch": 0, "ok": True, "path": "/ck/step-5", "bytes": 1000,
             "ms": 2.5, "error": ""},
    "log": {"k": "log", "r": 0, "level": "warn", "text": "caf\u00e9 \x1b[31m"},
    "beat": {"k": "beat", "r": 2, "step": 9, "phase": "train", "seq": 11, "op": "allreduce", "since": 5},
    "eval": {"k": "eval", "r": 0, "epoch": 0, "step": 10, "loss": 0.5, "accuracy": 0.8, "correct": 8,
             "total": 10},
    "bye": {"k": "bye", "r": 0, "status": 0, "step": 10},
    "cmd": {"k": "cmd", "id": 1, "op": "stop", "arg": 0},
    "cmd-stacks": {"k": "cmd", "id": 3, "op": "stacks", "arg": 3},
    "stack": {"k": "stack", "r": 1, "t": 1, "tok": 3, "cut": False,
              "text": 'Thread 0x00007f0000000001 (most recent call first):\n  File "t.py", line 9 in <module>\n'},
    "node": {"k": "node", "op": "join", "node": 1, "nnodes": 2, "nproc": 2, "host": "b", "pid": 7},
    "unknown": {"k": "future-kind", "r": 0, "x": [1, {"y": b"z"}]},
}
for name, m in codec.items():
    put("codec", name, frame(m))
put("codec", "version-2", msgpack.packb({"v": 2, "k": "step"}))
put("codec", "burst", frame({"k": "burst", "r": 3, "t": 1, "m": [frame(codec["step"]), frame(dict(codec["beat"], r=3)),
                                                                 frame(codec["hello"]), b"\xc1"]}))

store = {
    "set": {"k": "set", "r": 0, "key": "job/gloo/coll/0", "val": b"\x00\x01addr"},
    "get": {"k": "get", "r": 1, "key": "job/gloo/coll/0", "timeout_ms": 30000},
    "get-huge-timeout": {"k": "get", "r": 1, "key": "k", "timeout_ms": 2**63 - 1},
    "wait": {"k": "wait", "r": 1, "key": "job/shm", "timeout_ms": -1},
    "val": {"k": "val", "key": "job/gloo/coll/0", "ok": True, "val": b"addr"},
}
for name, m in store.items():
    put("store", name, frame(m))


def safetensors(tensors, meta):
    header, data = {}, b""
    if meta:
        header["__metadata__"] = meta
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + data


put("safetensors", "two-tensors", safetensors(
    {"0.weight": ("F32", [2, 3], struct.pack("<6f", *range(6))), "0.bias": ("F32", [2], struct.pack("<2f", 1, 2))},
    {"format": "pt"}))
put("safetensors", "trainer-meta", safetensors(
    {"state.0.weight.momentum_buffer": ("F32", [1], struct.pack("<f", 0.5)), "step": ("I64", [1], struct.pack("<q", 7))},
    {"step": "7", "world": "2", "model": "mlp:4,2"}))
put("safetensors", "empty", safetensors({}, None))
