#!/usr/bin/env python3
# Fraction of each rank's collective time hidden behind its forward/backward, from a merged
# multi-rank Chrome trace (runtime.trace): comm-lane spans overlapped with the model's spans.
import json
import sys


def main(path):
    events = json.load(open(path))["traceEvents"]
    lanes = {(e["pid"], e["tid"]): e["args"]["name"]
             for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
    spans = [e for e in events if e.get("ph") == "X"]
    for pid in sorted({e["pid"] for e in spans}):
        comm = [(e["ts"], e["ts"] + e["dur"]) for e in spans
                if e["pid"] == pid and lanes.get((pid, e["tid"])) == "comm lane"]
        model = [(e["ts"], e["ts"] + e["dur"]) for e in spans
                 if e["pid"] == pid and e.get("cat") == "model"]
        busy = sum(b - a for a, b in comm)
        hidden = sum(max(0.0, min(b, d) - max(a, c)) for a, b in comm for c, d in model)
        frac = hidden / busy if busy else 0.0
        print(f"rank {pid}: {len(comm)} collectives, {busy / 1e3:.1f} ms on the comm lane, "
              f"{100 * frac:.1f}% of it during forward/backward")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: comm_overlap.py TRACE.json")
    main(sys.argv[1])
