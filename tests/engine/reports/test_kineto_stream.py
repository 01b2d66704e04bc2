"""The streaming Kineto reader gives what json.load gives, for plain, gzipped and odd traces."""

from __future__ import annotations

import gzip
import json
import lzma
from pathlib import Path

import numpy as np
import pytest

from engine.reports.kineto_columns import NULL
from engine.reports.kineto_stream import TraceFormatError, read_columns
from tests.conftest import FIXTURES, REPO

TRACES = [FIXTURES / "torch" / "torch_sdpa_trace.json",
          REPO / "tests/data/recordings/torch/torch_conv.json.xz"]


def _text(path: Path) -> str:
    raw = path.read_bytes()
    return (lzma.decompress(raw) if path.suffix == ".xz" else raw).decode()


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name)
@pytest.mark.parametrize("gz", [False, True])
def test_columns_equal_json_load(path: Path, gz: bool, tmp_path: Path) -> None:
    text = _text(path)
    f = tmp_path / ("t.json.gz" if gz else "t.json")
    f.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
    c = read_columns(f, block=4096)  # small blocks: events cross every block boundary
    doc = json.loads(text)
    ev = [e for e in doc["traceEvents"] if e.get("ph") == "X" and "ts" in e]
    assert c.n == len(ev)
    assert np.array_equal(c.ts, [float(e["ts"]) for e in ev])
    assert [c.names[i] for i in c.name] == [e["name"] for e in ev]
    assert [c.cats[i] for i in c.cat] == [e["cat"] for e in ev]
    for key in ("External id", "correlation", "bytes", "stream"):
        assert c.ints[key].tolist() == [e.get("args", {}).get(key, NULL) for e in ev]
    grid = [c.text_values[i] for i in c.texts["grid"]]
    want = [str(e["args"]["grid"]).replace(" ", "") if "grid" in e.get("args", {}) else "" for e in ev]
    assert grid == want
    mem = [e for e in doc["traceEvents"] if e.get("name") == "[memory]"]
    assert c.memory["allocated"].tolist() == [e["args"]["Total Allocated"] for e in mem]
    assert c.meta == {k: v for k, v in doc.items() if k != "traceEvents"}


def test_bad_traces(tmp_path: Path) -> None:
    text = _text(TRACES[0])
    cut = tmp_path / "cut.json"
    cut.write_text(text[: len(text) // 2])
    with pytest.raises(TraceFormatError, match="broken or truncated"):
        read_columns(cut, block=1000)
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"a": [1, 2, 3]}))
    with pytest.raises(TraceFormatError, match="no traceEvents"):
        read_columns(other)
    bare = tmp_path / "bare.json"  # a bare list of events (some writers): read as json.load reads it
    bare.write_text(json.dumps([{"ph": "X", "ts": 1, "dur": 2, "name": "k"}, {"ph": "i", "ts": 0.5}]))
    c = read_columns(bare)
    assert c.n == 1 and c.names == ["k"] and c.meta == {} and c.origin_us == 0.5


def test_parts_cut_at_event_boundaries_merge_to_the_whole(tmp_path: Path) -> None:
    """What the worker processes read (a part each, cut where Kineto starts an event) joins to the whole."""
    import re

    from engine.reports.kineto_columns import merge
    from engine.reports.kineto_stream import _read_range

    f = tmp_path / "t.json"
    f.write_text(_text(REPO / "tests/data/recordings/torch/torch_conv.json.xz"))
    raw = f.read_bytes()
    boundary = re.compile(rb'\n  \{\n    "ph"')
    cuts = [0] + [m.start() for k in (1, 2) if (m := boundary.search(raw, len(raw) * k // 3))]
    whole = read_columns(f)
    parts = [_read_range(f, a, b, 4096) for a, b in zip(cuts, [*cuts[1:], None], strict=True)]
    assert len(parts) == 3 and all(p.n for p in parts)
    joined = merge(parts)
    assert joined.n == whole.n and joined.origin_us == whole.origin_us and joined.meta == whole.meta
    for name in ("ts", "dur"):
        assert np.array_equal(getattr(joined, name), getattr(whole, name))
    for col, table in (("cat", "cats"), ("name", "names"), ("pid", "pids"), ("tid", "tids")):
        assert [getattr(joined, table)[i] for i in getattr(joined, col)] == \
            [getattr(whole, table)[i] for i in getattr(whole, col)]
    for k in whole.ints:
        assert np.array_equal(joined.ints[k], whole.ints[k])
    for k in whole.texts:
        texts = [joined.text_values[i] for i in joined.texts[k]]
        assert texts == [whole.text_values[i] for i in whole.texts[k]]
    for k in whole.memory:
        assert np.array_equal(joined.memory[k], whole.memory[k])
    assert joined.processes == whole.processes and joined.threads == whole.threads


def test_flow_events_are_skipped_but_their_time_counts(tmp_path: Path) -> None:
    """Flow arrows (ph s/f) are not decoded, yet the earliest one is still the time origin."""
    def event(fields: str) -> str:
        return "  {\n    " + fields + "\n  }"

    events = [event('"ph": "s", "id": 7, "pid": 1, "tid": 2, "ts": 5.5,\n    "cat": "ac2g", "name": "ac2g"'),
              event('"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7,\n'
                    '    "ts": 10.25, "dur": 2,\n'
                    '    "args": {\n      "correlation": 7, "grid": [1, 2, 3]\n    }'),
              event('"ph": "f", "id": 7, "pid": 0, "tid": 7, "ts": 10.25,\n'
                    '    "cat": "ac2g", "name": "ac2g", "bp": "e"')]
    f = tmp_path / "t.json"
    f.write_text('{\n  "schemaVersion": 1,\n  "traceEvents": [\n' + ",\n".join(events) + "\n  ]\n}\n")
    c = read_columns(f)
    assert c.n == 1 and c.names == ["k"] and c.origin_us == 5.5
    assert c.ints["correlation"].tolist() == [7] and c.text_values[c.texts["grid"][0]] == "[1,2,3]"
    assert c.meta == {"schemaVersion": 1}


def _decoded(c: object) -> dict[str, object]:
    """Every column of ``c`` as values (codes looked up), to compare two reads whatever their codes."""
    from engine.reports.kineto_columns import KinetoColumns

    assert isinstance(c, KinetoColumns)
    out: dict[str, object] = {"n": c.n, "ts": c.ts.tolist(), "dur": c.dur.tolist(), "meta": c.meta,
                              "origin": c.origin_us, "processes": c.processes, "threads": c.threads}
    for col, table in (("cat", "cats"), ("name", "names"), ("pid", "pids"), ("tid", "tids")):
        out[col] = [getattr(c, table)[i] for i in getattr(c, col)]
    out.update({f"int {k}": v.tolist() for k, v in c.ints.items()})
    out.update({f"text {k}": [c.text_values[i] for i in v] for k, v in c.texts.items()})
    out.update({f"memory {k}": v.tolist() for k, v in c.memory.items()})
    return out


ODD_EVENTS = [
    {"ph": "X", "ts": "12.5", "dur": None, "name": 7, "cat": None, "pid": "p", "tid": True,
     "args": {"External id": "9", "grid": [1, 2], "Input Dims": [], "bytes": 2**70}},
    {"ph": "X", "ts": 3, "dur": 1.5, "name": "k", "cat": "kernel", "pid": 1, "tid": 2,
     "args": {"correlation": True, "stream": 2**63, "block": "a b", "device": 0}},
    {"ph": "X", "ts": 5, "name": 2**70, "pid": 2**64, "tid": 1},
    {"ph": "X", "name": "no ts"}, {"ph": "i", "ts": 0.25, "name": "[memory]",
                                   "args": {"Total Allocated": 5, "Bytes": "6"}},
    {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "main"}},
    {"ph": "X", "ts": 4, "dur": 0, "name": "k", "cat": "kernel", "pid": 1, "tid": 2, "args": ["odd"]},
]
#: lists whose orjson bytes are alike ([null]) but whose texts differ (None, NaN, an infinity), among
#: events a batch reads column by column
ALIKE = [
    {"ph": "X", "ts": 6, "dur": 1, "name": "op",
     "args": {"Input Dims": [[2, None]], "Input type": ["float", None]}},
    {"ph": "X", "ts": 7, "dur": 1, "name": "op", "args": {"Input Dims": [[2, float("nan")]]}},
    {"ph": "X", "ts": 8, "dur": 1, "name": "op",
     "args": {"Input Dims": [[2, float("inf")]], "grid": [1, 2**70]}},
    {"ph": "X", "ts": 9, "dur": 1, "name": "op", "args": {"Input Dims": [[2, None]], "grid": [1, 2**70]}},
]


@pytest.mark.parametrize("layout", ["kineto", "compact"])
def test_batches_parsed_by_orjson_equal_the_stdlib_reader(layout: str, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """orjson's batches give the columns the C JSON decoder's event-by-event path gives, odd values too."""
    import engine.reports.kineto_columns as kc
    import engine.reports.kineto_stream as ks

    assert ks.orjson is not None  # type: ignore[attr-defined]  # a dependency: the batched path is the one tested here
    add_batch = ks.ColumnBuilder.add_batch
    doc = json.loads(_text(TRACES[1]))
    events = doc["traceEvents"]
    half = len(events) // 2
    doc["traceEvents"] = (ODD_EVENTS + events[:half] + ALIKE + events[half:] + ODD_EVENTS
                          + [{"ph": "X", "ts": float("nan")}])
    f = tmp_path / "t.json"
    f.write_text(json.dumps(doc, indent=2) if layout == "kineto" else json.dumps(doc, separators=(",", ":")))
    monkeypatch.setattr(ks, "BATCH", 2000)  # many batches, cut at many places
    batches: list[int] = []

    def counted(self: ks.ColumnBuilder, events: list[object]) -> None:
        batches.append(len(events))
        add_batch(self, events)

    monkeypatch.setattr(ks.ColumnBuilder, "add_batch", counted)
    batched = _decoded(read_columns(f, block=50_000))
    assert len(batches) > 50 and sum(batches) > len(doc["traceEvents"]) // 2
    monkeypatch.setattr(ks, "orjson", None)
    monkeypatch.setattr(kc, "orjson", None)
    alone = _decoded(read_columns(f, block=50_000))
    assert batched.keys() == alone.keys()
    for k in alone:
        assert batched[k] == alone[k] or (k == "ts" and str(batched[k]) == str(alone[k])), k


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name)
def test_without_orjson_the_columns_are_the_same(path: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The stdlib path (orjson missing) reads what the batched path reads."""
    import engine.reports.kineto_columns as kc
    import engine.reports.kineto_stream as ks

    f = tmp_path / "t.json"
    f.write_text(_text(path))
    batched = _decoded(read_columns(f))
    monkeypatch.setattr(ks, "orjson", None)
    monkeypatch.setattr(kc, "orjson", None)
    assert _decoded(read_columns(f)) == batched
