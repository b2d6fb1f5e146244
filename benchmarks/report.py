"""Render bench-results/*.json as the Markdown tables of the README.

python benchmarks/report.py [bench-results]
"""

import json
import os
import sys


def _load(d, name):
    p = os.path.join(d, name)
    return json.load(open(p))["records"] if os.path.exists(p) else []


def _size(b):
    return f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB" if b >= 1024 else f"{b} B"


def primitives(d):
    recs = _load(d, "primitives.json")
    if not recs:
        return ""
    bw = {}
    for r in recs:
        if "gbps" in r:
            bw.setdefault(r["bytes"], {})[(r["op"], r["impl"])] = r["gbps"]
    out = [
        "| bytes | memcpy GB/s | put GB/s | get GB/s | put/memcpy | put, block_dim=2 GB/s |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for b in sorted(bw):
        m = bw[b]
        mc, pu, ge = m.get(("copy", "memcpy (1 thread)")), m.get(("put", "hpshmem")), m.get(("get", "hpshmem"))
        p2 = m.get(("put", "hpshmem block_dim=2"))
        out.append(
            f"| {_size(b)} | {mc:.2f} | {pu:.2f} | {ge:.2f} | {pu / mc:.2f}x | {'' if p2 is None else f'{p2:.2f}'} |"
        )
    lat = {r["op"]: r for r in recs if "gbps" not in r}
    out += ["", "| operation (C++) | measured | goal |", "|---|---:|---:|"]
    if "put_signal_latency" in lat:
        out.append(
            "| 8-byte put-with-signal, one-way (ping-pong / 2) | "
            f"{lat['put_signal_latency']['median_us']:.3f} µs | ≤ 1 µs |"
        )
    if "atomic_add" in lat:
        out.append(f"| remote atomic ADD, one initiator | {lat['atomic_add']['mops']:.1f} M/s | ≥ 20 M/s |")
    if "barrier" in lat:
        out.append(f"| barrier | {lat['barrier']['median_us']:.3f} µs | ≤ 1 µs |")
    return "\n".join(out)


def python_primitives(d):
    recs = _load(d, "python_primitives.json")
    if not recs:
        return ""
    out = ["| operation (Python, 8 bytes) | impl | µs |", "|---|---|---:|"]
    for r in recs:
        out.append(f"| {r['op']} | {r['impl']} | {r['median_us']:.2f} |")
    return "\n".join(out)


def collectives(d, name="collectives.json"):
    recs = _load(d, name)
    if not recs:
        return ""
    ranks = recs[0]["ranks"]
    out = []
    for op in ("allgather", "alltoall"):
        t = {}
        for r in recs:
            if r["op"] == op:
                t.setdefault(r["bytes"], {})[r["impl"]] = r["median_us"]
        out += [
            f"**{op}, {ranks} ranks** (time per call in µs; bytes = what each rank contributes)",
            "",
            "| bytes/rank | ours (push) | ours (pull) | gloo | Open MPI | gloo / ours | Open MPI / ours |",
            "|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for b in sorted(t):
            row = t[b]
            ours = row.get("hyper_parallel push")
            cells = [
                f"{row[k]:.1f}" if k in row else "–"
                for k in ("hyper_parallel push", "hyper_parallel pull", "gloo", "Open MPI")
            ]
            ratios = [f"{row[k] / ours:.1f}x" if k in row and ours else "–" for k in ("gloo", "Open MPI")]
            out.append(f"| {_size(b)} | " + " | ".join(cells + ratios) + " |")
        out.append("")
    fused = [r for r in recs if r["op"] in ("ag_matmul", "matmul_rs")]
    if fused:
        out += [
            f"**fused ops, {ranks} ranks, {fused[0].get('shape', '')}** (ms per call)",
            "",
            "| op | dtype | fused | ours unfused | gloo unfused | unfused / fused |",
            "|---|---|---:|---:|---:|---:|",
        ]
        for op in ("ag_matmul", "matmul_rs"):
            for dt in ("float32", "bfloat16"):
                row = {r["impl"].split()[0]: r["median_us"] for r in fused if r["op"] == op and r["impl"].endswith(dt)}
                if "fused" in row:
                    out.append(
                        f"| {op} | {dt} | {row['fused'] / 1e3:.2f} | {row.get('ours', 0) / 1e3:.2f} | "
                        f"{row.get('gloo', 0) / 1e3:.2f} | {row.get('ours', 0) / row['fused']:.2f}x |"
                    )
    return "\n".join(out)


def adapters(d):
    recs = _load(d, "adapters.json")
    if not recs:
        return ""
    out = [
        "| operation (2 ranks) | bytes/rank | torch handler µs | MindSpore handler µs | MindSpore / torch |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in recs:
        out.append(
            f"| {r['op']} | {_size(r['bytes'])} | {r['torch_us']:.2f} | {r['mindspore_us']:.2f} | "
            f"{r['mindspore_over_torch']:.2f}x |"
        )
    return "\n".join(out)


def oversubscribed(d):
    """One row per (op, size); per world size: ours, Open MPI (µs; pingpong one-way)."""
    recs = _load(d, "oversubscribed.json")
    t = {(r["op"], r["bytes"], r["ranks"], r["impl"]): r["median_us"] for r in recs}
    worlds = sorted({r["ranks"] for r in recs})
    head = "| op | bytes | " + " | ".join(f"W={w}: ours | Open MPI" for w in worlds) + " |"
    out = [head, "|---|---:|" + "---:|---:|" * len(worlds)]
    for op in ("barrier", "allgather", "alltoall", "pingpong"):
        for b in sorted({k[1] for k in t if k[0] == op}):
            cells = []
            for w in worlds:
                ours, theirs = t.get((op, b, w, "hyper_parallel")), t.get((op, b, w, "Open MPI"))
                bold = ours is not None and theirs is not None and ours <= theirs
                cells.append((f"**{ours:.1f}**" if bold else f"{ours:.1f}") if ours is not None else "–")
                cells.append(f"{theirs:.1f}" if theirs is not None else "–")
            out.append(f"| {op} | {'–' if op == 'barrier' else _size(b)} | " + " | ".join(cells) + " |")
    return "\n".join(out)


if __name__ == "__main__":
    d = sys.argv[1] if len(sys.argv) > 1 else "bench-results"
    print(primitives(d))
    print()
    print(python_primitives(d))
    print()
    print(collectives(d))
    print()
    print(collectives(d, "collectives_4ranks.json"))
    print()
    print(oversubscribed(d))
    print()
    print(adapters(d))
