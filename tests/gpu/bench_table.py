#!/usr/bin/env python3
"""bench_table.py — the table of `make bench-gpu`, from the JSON lines that
bench_gpu and bench_torch.py print (one file, any order), with issue 18's
targets beside the figures:

  bf16 step at least 2x PyTorch eager DDP under autocast(bf16),
  faster than torch.compile'd DDP (autocast bf16),
  within 1.5x of the floor (the step's own products in bf16, cuBLASLt).

ddptop's bf16 figure is its fastest bf16 row (graph on or off). Prints
"target met" / "target missed" / "not measured" per target; exit 0 unless
there are no results (the targets are figures to report, not a test).

  python3 bench_table.py RESULTS.jsonl
"""
import json
import sys

ORDER = ["ddptop-fp32", "ddptop-fp32-nofuse", "ddptop-tf32", "ddptop-bf16", "ddptop-bf16-graph",
         "ddptop-bf16-nofuse", "ddptop-fp32-graph", "pytorch-eager", "pytorch-ddp", "pytorch-ddp-autocast",
         "pytorch-ddp-compile"]
LABEL = {
    "ddptop-fp32": "ddptop fp32 (fused)",
    "ddptop-fp32-nofuse": "ddptop fp32 (no fusion)",
    "ddptop-fp32-graph": "ddptop fp32 (fused, graph)",
    "ddptop-tf32": "ddptop tf32 (fused)",
    "ddptop-bf16": "ddptop bf16 (fused)",
    "ddptop-bf16-graph": "ddptop bf16 (fused, graph)",
    "ddptop-bf16-nofuse": "ddptop bf16 (no fusion)",
    "pytorch-eager": "PyTorch eager fp32, no DDP",
    "pytorch-ddp": "PyTorch eager DDP fp32",
    "pytorch-ddp-autocast": "PyTorch eager DDP autocast(bf16)",
    "pytorch-ddp-compile": "torch.compile DDP autocast(bf16)",
}


def main(path):
    rows, skips = {}, []
    for line in open(path):
        line = line.strip()
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        if "skip" in r:
            skips.append("%s: %s" % (r.get("who", "?"), r["skip"]))
            continue
        rows[r["who"]] = r
    runs = [r for r in rows.values() if "steps_per_s" in r]
    if not runs:
        print("bench-gpu: no results" + ("".join("\n  skipped " + s for s in skips)))
        return 1
    head = runs[0]
    gpu = next((r["gpu"] for r in runs if "gpu" in r), "?")
    print("bench-gpu: MLP %s, batch %d, %s, world size 1, %d steps after warm-up, %s" % (
        head["model"].split(":", 1)[1].replace(",", "-"), head["batch"], head.get("optimizer", "?"),
        head["steps"], gpu))
    print("%-36s %9s %9s %9s %13s %9s" % ("", "steps/s", "step ms", "compute", "exposed comm", "overhead"))
    for who in ORDER + sorted(set(rows) - set(ORDER)):
        r = rows.get(who)
        if not r or "steps_per_s" not in r:
            continue
        exposed = r.get("exposed_comm_ms", 0.0)
        compute = r["compute_ms"] - (exposed if who.startswith("pytorch-ddp") else 0.0)
        print("%-36s %9.1f %9.3f %9.3f %13.3f %9.3f" % (LABEL.get(who, who), r["steps_per_s"], r["step_ms"],
                                                       compute, exposed, r["step_ms"] - compute - exposed))
    fl = rows.get("floor")
    if fl:
        print("%-36s %9.1f %9.3f   (the step's products in bf16 at %.1f TFLOP/s)" % (
            "floor (cuBLASLt bf16 products)", 1e3 / fl["floor_ms"], fl["floor_ms"], fl["bf16_tflops"]))
    for s in skips:
        print("skipped: " + s)

    bf = [rows[w] for w in ("ddptop-bf16", "ddptop-bf16-graph") if w in rows]
    best = max(bf, key=lambda r: r["steps_per_s"]) if bf else None
    print("targets (ddptop bf16: %s):" % (LABEL[best["who"]] if best else "not measured"))

    def target(what, ok, figure):
        state = "not measured" if ok is None else ("target met" if ok else "target missed")
        print("  %-44s %-14s %s" % (what, state, figure))

    a, c = rows.get("pytorch-ddp-autocast"), rows.get("pytorch-ddp-compile")
    if best and a:
        x = best["steps_per_s"] / a["steps_per_s"]
        target(">= 2x PyTorch eager DDP autocast(bf16)", x >= 2.0, "%.2fx" % x)
    else:
        target(">= 2x PyTorch eager DDP autocast(bf16)", None, "")
    if best and c:
        x = best["steps_per_s"] / c["steps_per_s"]
        target("faster than torch.compile DDP", x > 1.0, "%.2fx" % x)
    else:
        target("faster than torch.compile DDP", None, "")
    if best and fl:
        x = best["step_ms"] / fl["floor_ms"]
        target("within 1.5x of the floor", x <= 1.5, "%.2fx the floor" % x)
    else:
        target("within 1.5x of the floor", None, "")
    d, p = rows.get("ddptop-fp32"), rows.get("pytorch-ddp")
    if d and p:
        print("ddptop fp32 / PyTorch DDP fp32: %.2fx steps/s" % (d["steps_per_s"] / p["steps_per_s"]))
    print("raw:")
    for r in rows.values():
        print("  " + json.dumps(r))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
