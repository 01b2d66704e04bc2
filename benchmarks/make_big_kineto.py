"""Make a big Kineto trace from a real one: more steps of the same program, in Kineto's own layout.

The events of the source trace (default: the H200 training-step recording) are repeated along time,
each repeat shifted by the source's span, with its ``External id`` and ``correlation`` values moved
past the previous repeat's so the links between operators, launches and kernels stay one to one.

    python benchmarks/make_big_kineto.py OUT.json --mb 1024 [--source TRACE.json[.xz]]
"""

from __future__ import annotations

import argparse
import json
import lzma
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO / "tests/data/recordings/torch/torch_train.json.xz"
_IDS = ("External id", "correlation")


def _load(path: Path) -> dict:
    raw = path.read_bytes()
    return json.loads(lzma.decompress(raw) if path.suffix == ".xz" else raw)


def _event_text(e: dict) -> str:
    """One event as Kineto writes it: its own block, keys on indented lines."""
    return "  {\n    " + json.dumps(e, separators=(", ", ": "))[1:-1] + "\n  }"


def make(out: Path, mb: int, source: Path = SOURCE) -> int:
    doc = _load(source)
    events = doc.pop("traceEvents")
    timed = [e for e in events if isinstance(e, dict) and "ts" in e and e.get("ph") in ("X", "i", "s", "f")]
    t0 = min(float(e["ts"]) for e in timed)
    t1 = max(float(e["ts"]) + float(e.get("dur", 0)) for e in timed)
    span = t1 - t0 + 1000.0
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
            shift = rep * span
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
    a = ap.parse_args()
    n = make(a.out, a.mb, a.source)
    print(f"wrote {a.out} ({a.out.stat().st_size / 2**20:,.0f} MiB, {n:,} events)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
