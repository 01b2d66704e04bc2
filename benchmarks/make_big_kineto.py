"""Make a big Kineto trace from a real one: more steps of the same program, in Kineto's own layout.

The events of the source trace (default: the H200 training-step recording) are repeated along time,
each repeat shifted by the source's span, with its ``External id`` and ``correlation`` values moved
past the previous repeat's so the links between operators, launches and kernels stay one to one.

    python benchmarks/make_big_kineto.py OUT.json --mb 1024 [--source TRACE.json[.xz]]

More ranks of the same program: ``--ranks N`` writes ``OUT_rank0.json`` ... ``OUT_rank{N-1}.json``, ``--mb``
in all, from the real 2-rank H100 DDP recording (rank r repeats that recording's rank ``r % 2``), each with
its ``distributedInfo`` rank and world size set and its clock off by up to ``--clock-us`` (seeded), as the
hosts of a real job are:

    python benchmarks/make_big_kineto.py /work/bigdata/kjob/job.json --mb 1024 --ranks 8
"""

from __future__ import annotations

import argparse
import json
import lzma
import random
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO / "tests/data/recordings/torch/torch_train.json.xz"
DDP = [REPO / f"tests/data/recordings/nsys/ddp/ddp_kineto_rank{r}_kineto.json.xz" for r in (0, 1)]
_IDS = ("External id", "correlation")


def _load(path: Path) -> dict:
    raw = path.read_bytes()
    doc: dict = json.loads(lzma.decompress(raw) if path.suffix == ".xz" else raw)
    return doc


def _event_text(e: dict) -> str:
    """One event as Kineto writes it: its own block, keys on indented lines."""
    return "  {\n    " + json.dumps(e, separators=(", ", ": "))[1:-1] + "\n  }"


def _as_rank(doc: dict, rank: int, world: int) -> None:
    """Make the trace's ``distributedInfo`` say rank ``rank`` of ``world``."""
    info = dict(doc.get("distributedInfo") or {"backend": "nccl"})
    info.update(rank=rank, world_size=world)
    groups = info.get("pg_config", [])
    info["pg_config"] = [dict(pg, pg_size=world, ranks=list(range(world))) for pg in groups]
    doc["distributedInfo"] = info


def _span(events: list) -> tuple[float, float]:
    """First time stamp and span of a trace's timed events (plus 1 ms between repeats)."""
    timed = [e for e in events if isinstance(e, dict) and "ts" in e and e.get("ph") in ("X", "i", "s", "f")]
    t0 = min(float(e["ts"]) for e in timed)
    t1 = max(float(e["ts"]) + float(e.get("dur", 0)) for e in timed)
    return t0, t1 - t0 + 1000.0


def make(out: Path, mb: float, source: Path = SOURCE, rank: tuple[int, int] | None = None,
         clock_us: float = 0.0, span: float | None = None) -> int:
    """Write ``out`` (about ``mb`` MiB): ``source`` repeated every ``span`` us (default: its own span).

    ``rank``: (rank, world size) for the trace's ``distributedInfo``; ``clock_us`` moves every time stamp.
    """
    doc = _load(source)
    if rank is not None:
        _as_rank(doc, *rank)
    events = doc.pop("traceEvents")
    span = span or _span(events)[1]
    top = max(int(e.get("args", {}).get(k, 0) or 0) for e in events if isinstance(e.get("args"), dict)
              for k in _IDS if isinstance(e.get("args", {}).get(k, 0), int)) + 1
    once = [e for e in events if e.get("ph") == "M"]
    rest = [e for e in events if e.get("ph") != "M"]
    head = json.dumps(doc, indent=2)[:-2] + ',\n  "traceEvents": [\n'
    written = 0
    n = 0
    with open(out, "w") as f:
        f.write(head)
        first = True
        for e in once:
            f.write(("" if first else ",\n") + _event_text(e))
            first = False
        rep = 0
        while written < mb * 2**20:
            shift = rep * span + clock_us
            off = rep * top
            for e in rest:
                e2 = dict(e)
                if "ts" in e2:
                    e2["ts"] = round(float(e2["ts"]) + shift, 3)
                if e2.get("ph") in ("s", "f") and "id" in e2:
                    e2["id"] = int(e2["id"]) + off
                a = e2.get("args")
                if isinstance(a, dict) and any(k in a for k in _IDS):
                    a = dict(a)
                    for k in _IDS:
                        if isinstance(a.get(k), int) and a[k] > 0:
                            a[k] += off
                    e2["args"] = a
                text = ",\n" + _event_text(e2)
                f.write(text)
                written += len(text)
                n += 1
            rep += 1
        f.write("\n  ]\n}\n")
    return n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--mb", type=int, default=1024)
    ap.add_argument("--source", type=Path, default=SOURCE)
    ap.add_argument("--ranks", type=int, default=0, help="write this many rank traces (OUT_rank<N>.json)")
    ap.add_argument("--clock-us", type=float, default=800.0, help="largest clock error of a rank, in us")
    ap.add_argument("--seed", type=int, default=26)
    a = ap.parse_args()
    if a.ranks <= 0:
        n = make(a.out, a.mb, a.source)
        print(f"wrote {a.out} ({a.out.stat().st_size / 2**20:,.0f} MiB, {n:,} events)")
        return 0
    rng = random.Random(a.seed)
    span = max(_span(_load(src)["traceEvents"])[1] for src in DDP)  # the ranks' steps stay in step
    a.out.parent.mkdir(parents=True, exist_ok=True)
    for r in range(a.ranks):
        out = a.out.with_name(f"{a.out.stem}_rank{r}{a.out.suffix}")
        n = make(out, a.mb / a.ranks, DDP[r % len(DDP)], (r, a.ranks), rng.uniform(-a.clock_us, a.clock_us),
                 span)
        print(f"wrote {out} ({out.stat().st_size / 2**20:,.0f} MiB, {n:,} events)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
