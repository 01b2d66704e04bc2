"""Issue 16: findings, summary and the HTML export of an nsys export run without pandas, same bytes.

The numpy paths (``tables.table_records``, ``ranges.Ranges``, ``summary.sum_count``,
``findings.copycalls``, ``nsys.analyze.rule_rows``) stand in for pandas tables; each is checked
here against the pandas table it replaces, on every fixture and recording, and the commands are
run in a subprocess where importing pandas fails, their output compared byte for byte with a
normal run's.
"""

from __future__ import annotations

import lzma
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from engine.analysis import tables
from engine.analysis.findings.copycalls import calls_from_table, copies_table, copy_calls
from engine.analysis.nsys import analyze
from engine.analysis.nsys.analyze.rule_rows import rule_rows
from engine.analysis.steps import normalise_range, pandas_order, range_label, ranges_table
from engine.analysis.summary import sum_count
from engine.reports import open_report
from tests.conftest import NSYS_SQLITE, REPO

REC = REPO / "tests" / "data" / "recordings" / "nsys"
RECORDINGS = ["ddp/ddp_rank0", "ddp/ddp_torchrun", "single/train_hostbound300", "multistream/multistream",
              "twoproc/twoproc", "single/train_bad"]

#: runs a kernelscope command with every import of pandas failing
NO_PANDAS = """
import runpy, sys
class _Block:
    def find_spec(self, name, path=None, target=None):
        if name == "pandas" or name.startswith("pandas."):
            raise ImportError("pandas is blocked in this test")
sys.meta_path.insert(0, _Block())
sys.argv = ["kernelscope"] + sys.argv[1:]
runpy.run_module("engine.cli", run_name="__main__")
"""


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The fixtures' exports and the recordings' (unpacked)."""
    out = list(NSYS_SQLITE)
    folder = tmp_path_factory.mktemp("rec16")
    for name in RECORDINGS:
        src = REC / f"{name}.sqlite.xz"
        if src.exists():
            dst = folder / f"{Path(name).name}.sqlite"
            dst.write_bytes(lzma.decompress(src.read_bytes()))
            out.append(dst)
    assert len(out) >= 5
    return out


def _run(args: list[str], cache: Path, block: bool) -> bytes:
    env = {**os.environ, "KERNELSCOPE_CACHE": str(cache)}
    argv = [sys.executable, "-c", NO_PANDAS, *args] if block else [sys.executable, "-m", "engine.cli", *args]
    done = subprocess.run(argv, capture_output=True, env=env, cwd=REPO, timeout=300)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return done.stdout


@pytest.mark.parametrize("name", ["host_overhead_naive", "torch_sdpa_gemm", "train_hostbound300"])
def test_commands_run_without_pandas_with_the_same_bytes(reports: list[Path], name: str,
                                                          tmp_path: Path) -> None:
    path = next(p for p in reports if p.stem == name)
    for args in (["summary", "--json", str(path)], ["findings", "--json", str(path)],
                 ["findings", str(path)]):
        want = _run(args, tmp_path / "c1", block=False)
        got = _run(args, tmp_path / "c2", block=True)  # a cold cache, then...
        again = _run(args, tmp_path / "c2", block=True)  # ...from the cache the cold run left
        assert got == want and again == want, args
        assert len(want) > 500
    html = [tmp_path / f"{k}.html" for k in ("a", "b")]
    _run(["export", str(path), "--format", "html", "-o", str(html[0])], tmp_path / "c1", block=False)
    _run(["export", str(path), "--format", "html", "-o", str(html[1])], tmp_path / "c2", block=True)
    assert html[0].read_bytes() == html[1].read_bytes()
    assert b"<svg" in html[0].read_bytes()


def test_table_records_are_the_tables_records(reports: list[Path]) -> None:
    for path in reports:
        t = open_report(path)
        for name in ("gpus", "processes"):
            for cols in (None, ["id", "name"] if name == "gpus" else ["pid", "name"]):
                got = tables.table_records(t, name, cols)
                want = pd.DataFrame(open_report(path).table(name, cols)).to_dict("records")
                assert _same(got, want), (path.name, name)
        assert tables.table_records(t, "gpus")  # every report here names its GPUs


def test_table_records_type_columns_as_pandas_does(tmp_path: Path) -> None:
    """NULLs in an integer, a text and an all-NULL column; another column of mixed types (the table path)."""
    src = next(p for p in NSYS_SQLITE if p.stem == "host_overhead_naive")
    path = tmp_path / "nulls.sqlite"
    path.write_bytes(src.read_bytes())
    con = sqlite3.connect(path)
    row = con.execute("SELECT * FROM TARGET_INFO_GPU").fetchone()
    cols = [r[1] for r in con.execute("PRAGMA table_info(TARGET_INFO_GPU)")]
    extra = dict(zip(cols, row, strict=True))
    extra.update(id=extra["id"] + 1, smCount=None, name=None, uuid=None)
    con.execute(f"INSERT INTO TARGET_INFO_GPU ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                [extra[c] for c in cols])
    con.execute("UPDATE TARGET_INFO_GPU SET busLocation = NULL")
    con.execute("UPDATE PROCESSES SET name = 7 WHERE rowid = (SELECT min(rowid) FROM PROCESSES)")
    con.commit()
    con.close()
    got = tables.table_records(open_report(path), "gpus")
    want = open_report(path).table("gpus").to_dict("records")
    assert _same(got, want)
    assert isinstance(got[1]["smCount"], float) and np.isnan(got[1]["smCount"])  # NULL in ints: NaN
    assert isinstance(got[0]["smCount"], float)  # ...and the others floats
    assert got[1]["busLocation"] is None and got[1]["uuid"] != got[1]["uuid"]  # all NULL: None; text: NaN
    procs = open_report(path)
    assert _same(tables.table_records(procs, "processes"), procs.table("processes").to_dict("records"))


def _same(got: list[dict], want: list[dict]) -> bool:
    if len(got) != len(want):
        return False
    for a, b in zip(got, want, strict=True):
        if list(a) != list(b):
            return False
        for k in a:
            x, y = a[k], b[k]
            if isinstance(x, float) and isinstance(y, float) and np.isnan(x) and np.isnan(y):
                continue
            if type(x) is not type(y) or x != y:
                return False
    return True


def test_pid_keys_of_numeric_columns_as_pandas_gives_them() -> None:
    def ref(values: np.ndarray) -> list[str]:
        codes, uniques = pd.factorize(pd.Series(values, copy=False), use_na_sentinel=True)
        return np.array([tables._text(u) for u in uniques] + [""], dtype=object)[codes].tolist()

    rng = np.random.default_rng(16)
    cases = [np.array([3, 1, 3, 2**40, 5]), np.array([1.0, np.nan, 2.5, 3.0]), np.array([np.nan, np.nan]),
             np.array([], dtype=np.int64), np.array([-1, 5, -1]), np.array([7.0, 7.0]),
             rng.integers(0, 50, 10_000), rng.integers(0, 2**30, 5000).astype(float)]
    for v in cases:
        assert tables.pid_keys(v).tolist() == ref(v)


def test_ranges_equal_the_nvtx_tables(reports: list[Path]) -> None:
    """The coded ranges of an export, row for row, against the nvtx table's (pandas) ranges."""
    seen = 0
    for path in reports:
        r = ranges_table(open_report(path))
        nv = open_report(path).table("nvtx", ["start", "end", "eventType", "text", "domain", "pid", "tid"])
        w = nv[nv["eventType"].isin([59, 60]) & nv["end"].notna() & nv["start"].notna()]
        assert len(r) == len(w), path.name
        if not len(w):
            continue
        seen += 1
        names = [range_label(str(d) if d == d and d is not None else "",
                             normalise_range(str(t) if t == t else ""))
                 for d, t in zip(w["domain"], w["text"], strict=True)]
        assert [r.names[c] for c in r.name.tolist()] == names, path.name
        assert [r.pids[c] for c in r.pid.tolist()] == tables.pid_keys(w["pid"]).tolist()
        assert [r.tids[c] for c in r.tid.tolist()] == tables.pid_keys(w["tid"]).tolist()
        assert r.start.tolist() == w["start"].astype(np.int64).tolist()
        assert len(set(r.names)) == len(r.names)  # one code per label
    assert seen >= 4


def test_sum_count_orders_rows_as_pandas_does() -> None:
    rng = np.random.default_rng(3)
    for k in (3, 17, 40):  # up to 16 rows numpy's quicksort is an insertion sort; more: not stable
        labels = [f"n{j % (k - 2)}" for j in range(k)]  # two codes share a label
        codes = rng.integers(-1, k, 2000)
        values = rng.integers(0, 4, 2000) * 1000  # many equal sums
        mask = rng.random(2000) < 0.8
        got = sum_count(codes, values, labels, mask)
        df = pd.DataFrame({"label": np.array(labels + ["?"], dtype=object)[codes], "v": values})
        df = df[(codes >= 0) & mask]
        want = df.groupby("label")["v"].agg(["sum", "count"]).sort_values("sum", ascending=False)
        assert got == [(str(i), int(r["sum"]), int(r["count"])) for i, r in want.iterrows()]
        s = pd.Series(values[:300])
        assert pandas_order(values[:300], ascending=False).tolist() == \
            s.sort_values(ascending=False).index.tolist()


def test_copy_calls_equal_the_joined_tables(reports: list[Path]) -> None:
    found = 0
    for path in reports:
        fast = copy_calls(open_report(path))
        slow = calls_from_table(copies_table(open_report(path)))
        assert len(fast) == len(slow), path.name
        if not len(fast):
            continue
        found += 1
        for col in ("start", "end", "nbytes", "has_call"):
            assert getattr(fast, col).tolist() == getattr(slow, col).tolist(), (path.name, col)
        assert [fast.kinds[c] for c in fast.kind.tolist()] == [slow.kinds[c] for c in slow.kind.tolist()]
        assert [int(s) for s in fast.stream.tolist()] == [int(s) for s in slow.stream.tolist()]
        got = fast.has_call
        assert fast.api_start[got].tolist() == slow.api_start[got].tolist()
        assert fast.api_end[got].tolist() == slow.api_end[got].tolist()
        names = lambda c: [c.api_names[i] if i >= 0 else None for i in c.api.tolist()]  # noqa: E731
        assert names(fast) == names(slow), path.name
    assert found >= 5


@pytest.mark.parametrize("rule", ["cuda_api_sync", "gpu_gaps", "gpu_time_util", "cuda_memset_sync"])
def test_rule_rows_equal_the_rules_tables(reports: list[Path], rule: str) -> None:
    fired = 0
    for path in reports:
        rows = rule_rows(open_report(path), rule)
        res = analyze.run_rule(open_report(path), rule, rows=-1)
        if rows is None:  # the rule's own path (synchronous memsets found): nothing to compare
            assert rule == "cuda_memset_sync" and not res.table.empty
            continue
        assert rows.n == len(res.table), (path.name, rule)
        if not rows.n:
            continue
        fired += 1
        assert (rows.explanation, rows.fix) == (res.explanation, res.fix)
        want = sorted(zip(res.table["Start (ns)"].astype(np.int64),
                          res.table["Duration (ns)"].astype(np.int64), strict=True))
        assert sorted(zip(rows.start.tolist(), rows.dur.tolist(), strict=True)) == \
            [(int(a), int(b)) for a, b in want]
    assert fired >= (0 if rule == "cuda_memset_sync" else 3), rule


def test_ranges_coded_in_sql_equal_the_grouped_rows(reports: list[Path], tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The CASE-coded groups (few texts) give the ranges SQLite's GROUP BY gives, quotes and NULLs too."""
    from engine.analysis import ranges
    from engine.reports.nsys import nvtx_ranges

    odd = tmp_path / "odd.sqlite"
    odd.write_bytes(next(p for p in NSYS_SQLITE if p.stem == "host_overhead_naive").read_bytes())
    con = sqlite3.connect(odd)
    con.execute("UPDATE NVTX_EVENTS SET text = 'it''s ' || text WHERE rowid % 3 = 0 AND text IS NOT NULL")
    con.execute("UPDATE NVTX_EVENTS SET text = NULL WHERE rowid % 7 = 0 AND eventType IN (59, 60)")
    con.commit()
    con.close()
    label = lambda d, t: range_label(d, normalise_range(t))  # noqa: E731
    for path in [*reports, odd]:
        coded = ranges.ranges_columns(open_report(path), label)
        monkeypatch.setattr(nvtx_ranges, "_FEW_GROUPS", -1)  # every report through GROUP BY
        grouped = ranges.ranges_columns(open_report(path), label)
        monkeypatch.undo()
        assert coded is not None and grouped is not None
        assert [coded.names[c] for c in coded.name.tolist()] == \
            [grouped.names[c] for c in grouped.name.tolist()]
        assert coded.start.tolist() == grouped.start.tolist()
        assert [coded.tids[c] for c in coded.tid.tolist()] == [grouped.tids[c] for c in grouped.tid.tolist()]
    assert any("it's" in n for n in ranges.ranges_columns(open_report(odd), label).names)


def test_steps_arrays_seeded_by_the_build_equal_the_steps(reports: list[Path]) -> None:
    """_build hands Steps its starts, ends and warm-up flags: the same as built from the Step objects."""
    from dataclasses import replace

    from engine.analysis.steps import steps_per_process

    seen = 0
    for path in reports:
        for st in steps_per_process(open_report(path)):
            fresh = replace(st)  # a copy computes them from its steps
            for name in ("_starts", "_ends", "_steady_mask"):
                assert getattr(st, name).tolist() == getattr(fresh, name).tolist(), (path.name, name)
                assert getattr(st, name).dtype == getattr(fresh, name).dtype
            assert st.warmup_count == fresh.warmup_count and st.steady_median_ns == fresh.steady_median_ns
            seen += 1
    assert seen >= 5


def test_steps_locate_equals_contains(reports: list[Path]) -> None:
    """One search for both masks: the same as contains() and contains(steady_only=True)."""
    from engine.analysis.steps import Step, Steps, steps_per_process

    rng = np.random.default_rng(8)
    every = [st for path in reports for st in steps_per_process(open_report(path))]
    # hand-made: touching steps, a zero-length one, all warm-up; and overlapping ones (fallback)
    touching = (Step(0, 10, 20, True), Step(1, 20, 20, False), Step(2, 20, 35, False), Step(3, 40, 50, False))
    overlapping = (Step(0, 10, 30, False), Step(1, 20, 25, False), Step(2, 28, 60, False))
    every += [Steps("s", "nvtx", "1", touching, 0, 0), Steps("s", "nvtx", "1", overlapping, 0, 0),
              Steps("s", "nvtx", "1", tuple(Step(i, 10 * i, 10 * i + 5, True) for i in range(4)), 0, 0)]
    for st in every:
        lo, hi = st.steps[0].start_ns - 5, st.steps[-1].end_ns + 5
        t = np.concatenate([rng.integers(lo, hi, 5000), [s.start_ns for s in st.steps],
                            [s.end_ns for s in st.steps]]).astype(np.int64)
        in_any, in_steady = st.locate(t)
        assert in_any.tolist() == st.contains(t).tolist()
        assert in_steady.tolist() == st.contains(t, steady_only=True).tolist()
    assert len(every) >= 8


def test_gpu_blocks_of_disjoint_operations_give_the_merged_blocks_busy_time(reports: list[Path]) -> None:
    """GpuOps.blocks keeps never-overlapping operations as they are: same busy time, first start, last end."""
    from engine.analysis.ops import gpu_op_columns
    from engine.analysis.summary import busy_between

    for path in reports:
        o = gpu_op_columns(open_report(path))
        for pid in [None, *o.pids]:
            bs, be = o.blocks(pid)
            sel = o.sorted_col(o.of_pid(pid)) if pid is not None else np.ones(o.n, dtype=bool)
            ms, me = tables.blocks_sorted(o.sorted_start[sel], o.sorted_end[sel])
            assert (bs[0], be[-1]) == (ms[0], me[-1])
            cuts = np.sort(np.random.default_rng(1).integers(int(ms[0]) - 10, int(me[-1]) + 10, 400))
            a, b = cuts[::2], cuts[1::2]
            assert busy_between(bs, be, a, b).tolist() == busy_between(ms, me, a, b).tolist()
    # the recordings' operations never touch: touching and zero-length ones, made by hand
    s = np.array([0, 10, 10, 20, 30, 45], dtype=np.int64)
    e = np.array([10, 10, 20, 25, 45, 50], dtype=np.int64)
    assert tables.disjoint_sorted(s, e)
    ms, me = tables.blocks_sorted(s, e)
    assert len(ms) < len(s)
    a, b = np.arange(-5, 55, 3), np.arange(-5, 55, 3) + 7
    assert busy_between(s, e, a, b).tolist() == busy_between(ms, me, a, b).tolist()
