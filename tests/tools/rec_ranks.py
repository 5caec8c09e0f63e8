"""rec_ranks.py — write a recording (docs/RECORDING.md, format 1) of a job of
N simulated ranks, with real msgpack frames, for screen tests of big jobs
without N processes: `ddptop replay` plays it through the same job model
and screen as a live run.

    python rec_ranks.py OUT.rec [--ranks N] [--stall R] [--steps S] [--secs T]

Every rank says hello (8 ranks a node), trains S steps at 10 steps/s (one
all-reduce of bucket 0, then the step, per step). With --stall R, rank R
stops after step S (it keeps beating, outside any collective) while every
other rank enters all-reduce S+1 and waits there, beating once a second
that it is inside it: the classic hang of one rank among many. The
recording lasts T seconds.
"""
import argparse
import struct
import zlib

import msgpack

NS = 1_000_000_000
CREATED = 1_700_000_000 * NS  # the recording's wall clock at t = 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--stall", type=int, default=-1)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--secs", type=float, default=6.0)
    a = ap.parse_args()
    n = a.ranks
    recs = []  # (t_ns, source, payload)

    def frame(t, src, kind, rank, **kv):
        m = {"v": 1, "k": kind, "r": rank, "t": CREATED + t}
        m.update(kv)
        recs.append((t, src, msgpack.packb(m)))

    for r in range(n):
        recs.append((0, 4, struct.pack("<iii", r, 10000 + r, 0)))  # start
    for r in range(n):
        frame(10_000_000 + r * 1000, 2, "hello", r, local_rank=r % 8, world=n, local_world=8, pid=10000 + r,
              host="node%d" % (r // 8), device="cpu", backend="gloo", version="rec_ranks", dataset="synthetic",
              model="mlp:64,128,10", params=9610, batch=32, max_steps=1000, steps_per_epoch=100,
              dataset_size=32 * n * 100)
        frame(20_000_000 + r * 1000, 1, "phase", r, phase="train", detail="")
    t0 = 100_000_000
    for s in range(1, a.steps + 1):
        for r in range(n):
            done = t0 + s * 100_000_000 + (r % 7) * 100_000
            start = done - 3_000_000
            frame(done, 1, "coll", r, seq=s, op="allreduce", bucket=0, step=s, bytes=1 << 20, enq=CREATED + start,
                  start=CREATED + start, done=CREATED + done, algbw=0.35, busbw=0.7)
            frame(done + 10_000, 1, "step", r, epoch=0, step=s, loss=2.3 - 0.01 * s - 0.0001 * r, lr=0.01,
                  samples=32 * s, step_ms=10.0, fwd_ms=3.0, bwd_ms=4.0, opt_ms=0.5, comm_ms=3.0, exposed_ms=1.0,
                  drops=0, dev_mem=0, dev_mem_total=0)
    # after the last step: the others enter the next all-reduce and wait for
    # the stalled rank; everybody beats once a second
    enq = t0 + a.steps * 100_000_000 + 50_000_000
    last = a.steps
    beat_t = t0 + a.steps * 100_000_000 + 200_000_000
    while beat_t < a.secs * NS:
        for r in range(n):
            if r == a.stall or a.stall < 0:
                frame(beat_t + r * 1000, 1, "beat", r, step=last, phase="train", seq=-1, op="", since=0, where="")
            else:
                frame(beat_t + r * 1000, 1, "beat", r, step=last, phase="train", seq=last + 1, op="allreduce",
                      since=CREATED + enq, where="")
        beat_t += NS
    recs.sort(key=lambda x: x[0])
    desc = ("rec_ranks.py: %d ranks, rank %d stalled after step %d" % (n, a.stall, last)).encode()
    out = bytearray(b"\x89DDPTOP\n")
    out += struct.pack("<HHIqII", 1, 1, 32 + len(desc), CREATED, n, len(desc)) + desc
    for t, src, payload in recs + [(int(a.secs * NS), 7, struct.pack("<Q", len(recs)))]:
        rest = struct.pack("<qq", t, CREATED + t)
        head8 = struct.pack("<IBBH", len(payload), src, 0, 0)
        crc = zlib.crc32(head8 + rest + payload)
        out += head8 + struct.pack("<I", crc) + rest + payload
    with open(a.out, "wb") as f:
        f.write(out)


if __name__ == "__main__":
    main()
