"""Rank 0's throughput line from an exported recording, as one table cell.

    python3 tests/gpu/throughput_row.py RUN.jsonl

Prints "S steps/s; step A ms, between steps B (evaluation C), telemetry D";
exits 1 when the recording has no such line (the run did not finish).
"""
import json
import re
import sys

FIELDS = [("steps/s", r"\(([0-9.]+) steps/s\)"), ("step", r"step ([0-9.]+) ms,"),
          ("between", r"between steps ([0-9.]+) ms"), ("evaluation", r"evaluation ([0-9.]+)"),
          ("telemetry", r"telemetry ([0-9.]+) ms")]

for line in open(sys.argv[1]):
    m = json.loads(line)
    text = m.get("text", "")
    if m.get("k") == "log" and m.get("r") == 0 and text.startswith("throughput:"):
        v = {}
        for name, pattern in FIELDS:
            found = re.search(pattern, text)
            if not found:
                sys.exit(f"throughput line without {name}: {text}")
            v[name] = found.group(1)
        print(f"{v['steps/s']} steps/s; step {v['step']} ms, between steps {v['between']} "
              f"(evaluation {v['evaluation']}), telemetry {v['telemetry']}")
        sys.exit(0)
sys.exit("no throughput line from rank 0")
