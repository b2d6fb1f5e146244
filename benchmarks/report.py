"""Render bench-results/*.json as the documentation's page of benchmark tables, docs/benchmarks.md.

python benchmarks/report.py [bench-results] [--out docs/benchmarks.md]    (--out -: print the page)

`make bench` runs it after the benchmarks. The page holds the tables this script derives from the
JSON; the narrative that reads them, and the tables it does not produce, are in docs/performance.md.
"""

import argparse
import json
import os


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
    if not recs:
        return ""
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


def realhosts(d):
    """One row per (op, size); per world size: ours, Open MPI (µs), from the two-real-hosts run."""
    recs = _load(d, "realhosts.json")
    if not recs:
        return ""
    t = {(r["op"], r["bytes"], r["ranks"], r["impl"]): r["median_us"] for r in recs}
    worlds = sorted({r["ranks"] for r in recs if r["impl"] == "hyper_parallel"})
    head = "| op | bytes per rank | " + " | ".join(f"{w} ranks: ours | Open MPI" for w in worlds) + " |"
    out = [head, "|---|---:|" + "---:|---:|" * len(worlds)]
    ops = ("put_signal_one_way", "barrier", "allgather", "alltoall", "allreduce", "reduce_scatter", "broadcast")
    for op in ops:
        for b in sorted({k[1] for k in t if k[0] == op and k[3] == "hyper_parallel"}):
            cells = []
            for w in worlds:
                ours = t.get((op, b, w, "hyper_parallel"))
                theirs = t.get((op, b, w, "Open MPI"))
                bold = ours is not None and theirs is not None and ours <= theirs
                cells.append((f"**{ours:.1f}**" if bold else f"{ours:.1f}") if ours is not None else "–")
                cells.append(f"{theirs:.1f}" if theirs is not None else "–")
            out.append(f"| {op} | {'–' if op == 'barrier' else _size(b)} | " + " | ".join(cells) + " |")
    engine = [r for r in recs if r["impl"].startswith("ucx_perftest")]
    if engine:
        out += ["", "| the wire (`ucx_perftest`) | bytes | µs |", "|---|---:|---:|"]
        out += [f"| {r['impl']} | {_size(r['bytes'])} | {r['median_us']:.1f} |" for r in engine]
    return "\n".join(out)


def moe(d):
    recs = _load(d, "moe.json")
    steps = [r for r in recs if r["op"] == "dispatch+combine"]
    if not steps:
        return ""
    out = [
        "| ranks | hidden, top-k, experts | tokens per rank | KiB per rank | ours µs | gloo µs | Open MPI µs | "
        "vs gloo | vs Open MPI |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    by = {}
    for r in steps:
        by.setdefault((r["ranks"], r["hidden"], r["topk"], r["experts"], r["tokens"]), {})[r["impl"]] = r["median_us"]
    for (w, h, k, e, t), v in sorted(by.items()):
        ours, gloo, mpi = v.get("hyper_parallel"), v.get("gloo"), v.get("mpi4py (Open MPI)")
        cells = [f"{x:.1f}" if x else "–" for x in (ours, gloo, mpi)]
        ratios = [f"{x / ours:.1f}x" if x and ours else "–" for x in (gloo, mpi)]
        out.append(f"| {w} | {h}, {k}, {e} | {t} | {t * h * 4 // 1024} | " + " | ".join(cells + ratios) + " |")
    skew = [r for r in recs if r["op"] == "skew"]
    if skew:
        out += [
            "",
            "| ranks | last rank late by | ours: on-time tokens held after µs | gloo: after µs |",
            "|---:|---:|---:|---:|",
        ]
        cells = {}
        for r in skew:
            cells.setdefault((r["ranks"], r["delay_ms"]), {})[r["impl"]] = r["ready_us"]
        for (w, ms), v in sorted(cells.items()):
            out.append(f"| {w} | {ms} ms | {v.get('hyper_parallel', 0):.1f} | {v.get('gloo', 0):.1f} |")
    return "\n".join(out)


_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join(_ROOT, "docs", "benchmarks.md")

# (heading, what was measured and where it comes from, the table's function)
_SECTIONS = [
    (
        "C++ runtime: bandwidth and latency",
        "`benchmarks/bench_primitives.cc` (`bench-results/primitives.json`): 2 ranks, one initiator, against a "
        "single-thread `memcpy` of the same size in the same run.",
        primitives,
    ),
    (
        "Python calls",
        "`benchmarks/bench_python.py` (`bench-results/python_primitives.json`): one call of the public API from "
        "Python, 2 ranks, 8 bytes, every argument check included; one-way figures are half a ping-pong; gloo and "
        "mpi4py over Open MPI measured in the same run.",
        python_primitives,
    ),
    (
        "Collectives and fused ops, 2 ranks",
        "`benchmarks/bench_collectives.py --ranks 2` (`bench-results/collectives.json`): ours, gloo and Open MPI "
        "(mpi4py) on the same host, one thread per rank; medians over timed batches as seen by rank 0, ours and "
        "Open MPI's alternated twice, each keeping its best median.",
        collectives,
    ),
    (
        "Collectives and fused ops, 4 ranks",
        "`benchmarks/bench_collectives.py --ranks 4 --repeat 1` (`bench-results/collectives_4ranks.json`): 4 ranks "
        "on the 2 cores, one run.",
        lambda d: collectives(d, "collectives_4ranks.json"),
    ),
    (
        "Ranks outnumbering cores",
        "`benchmarks/bench_oversubscribed.py --ranks 2,4,8` (`bench-results/oversubscribed.json`): W ranks on the "
        "2-core host beside Open MPI (`mpirun --oversubscribe`); µs per call, rank 0's median, best of two "
        "alternated runs; pingpong is one-way; **bold**: ours at or ahead of Open MPI.",
        oversubscribed,
    ),
    (
        "Two real hosts",
        "`benchmarks/bench_realhosts.py --repeat 3` (`bench-results/realhosts.json`; root): two network "
        "namespaces joined by a veth pair, each node with a private `/dev/shm`; 1 or 2 ranks per node under "
        "torchrun beside Open MPI (mpi4py, one `mpirun` spanning both nodes, btl tcp and vader, yielding when "
        "idle) and `ucx_perftest` on the same wire; µs per call, rank 0's median, best of the alternated runs; "
        "put_signal_one_way is Open MPI's Send/Recv one way; **bold**: ours at or ahead of Open MPI.",
        realhosts,
    ),
    (
        "MindSpore adapter against torch's",
        "`benchmarks/bench_adapters.py` (`bench-results/adapters.json`): the same code through the torch handler "
        "and the MindSpore handler, 2 ranks; the two jobs alternate three times and each figure is the best of its "
        "three.",
        adapters,
    ),
    (
        "MoE dispatch + combine",
        "`benchmarks/bench_moe.py` (`bench-results/moe.json`): one step = `shmem_moe_dispatch` + "
        "`shmem_moe_combine` (float32, rank_major, random distinct top-k) beside a count `all_to_all_single` "
        "then the tokens' and ids' `all_to_all_single` with splits and the combine's back with `index_add_` on "
        "gloo, and the same with `Alltoall`/`Alltoallv` on Open MPI (mpi4py); rank 0's median. Then the skew "
        "test: the last rank enters 1 or 10 ms late and the on-time ranks time how long until they hold the "
        "on-time ranks' tokens.",
        moe,
    ),
]


def page(d):
    """The whole page: a generated-file notice, a title, then one section per table that has data."""
    out = [
        "<!-- Generated by `python benchmarks/report.py bench-results` from bench-results/*.json: do not edit. -->",
        "",
        "# Benchmark tables",
        "",
        "*Generated by `python benchmarks/report.py bench-results` from `bench-results/*.json` (`make bench` "
        "writes both). What the numbers mean, and the tables this script does not produce, are on "
        "[Performance](performance.md).*",
    ]
    for heading, about, table in _SECTIONS:
        body = table(d)
        if body:
            out += ["", f"## {heading}", "", about, "", body.rstrip("\n")]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="?", default="bench-results", help="folder of the benchmarks' JSON files")
    ap.add_argument("--out", default=DEFAULT_OUT, help="page to write (default: docs/benchmarks.md; -: stdout)")
    args = ap.parse_args()
    text = page(args.results)
    if args.out == "-":
        print(text, end="")
    else:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
        print(f"wrote {os.path.relpath(args.out)}")
