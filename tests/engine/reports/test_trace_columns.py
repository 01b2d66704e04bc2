"""``trace.columns``: the engine's integer columns equal the pandas tables, on every nsys export we have.

The fixtures (../shared/fixtures/nsys) and the recordings (tests/data/recordings/nsys) are read once
through the export's columnar cache (``NsysSqliteTrace.columns``) and once through the default that
every other trace uses (``Trace.columns`` over the pandas tables); both must give the table's values,
NULL where the table has NaN/None.
"""

from __future__ import annotations

import lzma
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from engine.reports import open_report
from engine.reports.base import NULL, TABLES, Trace
from engine.reports.nsys import schema
from engine.reports.nsys.sqlite_trace import NsysSqliteTrace
from engine.reports.trace_columns import (
    DERIVED,
    TEXT,
    Where,
    as_int64,
    ends_by,
    launches_of,
    name_in,
    starts_from,
)
from tests.conftest import NSYS_SQLITE, REPO

RECORDINGS = sorted((REPO / "tests" / "data" / "recordings" / "nsys").glob("*/*.sqlite.xz"))


@pytest.fixture(scope="module")
def recordings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("recordings")
    out = {}
    for xz in RECORDINGS:
        out[xz.name] = folder / xz.name[: -len(".xz")]
        out[xz.name].write_bytes(lzma.decompress(xz.read_bytes()))
    return out


def _exports(recordings: dict[str, Path]) -> list[Path]:
    return [*NSYS_SQLITE, *recordings.values()]


def _int_names(table: str) -> list[str]:
    ints = [c for c in TABLES[table][0] if c not in TEXT.get(table, ())]
    return ints + [n for n in DERIVED.get(table, {}) if n not in ints and n != "rowid"]


def _expected(df: pd.DataFrame, table: str, name: str) -> np.ndarray:
    if name == "duration":
        s, e = as_int64(df["start"]), as_int64(df["end"])
        return np.where((s == NULL) | (e == NULL), NULL, e - s)
    if name == "tid" and table == "sync":  # pragma: no cover - sync has no tid
        raise KeyError(name)
    if name == "pid" and table == "sync":
        g = as_int64(df["globalPid"])
        return np.where(g == NULL, NULL, (g // 2**24) % 2**24)
    if name in ("gridShape", "blockShape"):
        w = name[: -len("Shape")]
        x, y, z = (as_int64(df[f"{w}{a}"]) for a in "XYZ")
        fits = (x >= 0) & (x < 2**31) & (y >= 0) & (y < 2**16) & (z >= 0) & (z < 2**16)
        return np.where(fits, x * 2**32 + y * 2**16 + z, NULL)
    if name == "gpu":
        return as_int64(df["gpu"])
    return as_int64(df[name])


def _check_trace(trace: Trace, read: Callable[[str, list[str]], dict[str, np.ndarray]],
                 strings: Callable[[], dict[int, str]]) -> int:
    """Compare every integer and id column of every table; the number of NULLs met."""
    nulls = 0
    for table in TABLES:
        names = _int_names(table)
        got = read(table, names)
        df = trace.table(table)
        for n in names:
            d = DERIVED.get(table, {}).get(n)
            col = np.asarray(got[n], dtype=np.int64)
            assert len(col) == len(df), (trace.info.path, table, n)
            if d is not None and d.how == "id":
                texts = df[d.source[0]].tolist()
                s = strings()
                for v, text in zip(col.tolist(), texts, strict=True):
                    if v == NULL:  # nsys keeps some NVTX texts inline: no id, the text is in `text`
                        assert text is None or text != text or n == "textId"
                    else:
                        assert s[v] == text, (trace.info.path, table, n)
                continue
            np.testing.assert_array_equal(col, _expected(df, table, n),
                                          err_msg=f"{trace.info.path} {table}.{n}")
            nulls += int((col == NULL).sum())
    return nulls


def test_nsys_columns_equal_the_tables(recordings: dict[str, Path]) -> None:
    nulls = 0
    for path in _exports(recordings):
        with open_report(path) as trace:
            assert isinstance(trace, NsysSqliteTrace)
            nulls += _check_trace(trace, trace.columns, trace.strings)
    assert nulls > 1000  # the exports have NULLs (marks without an end, columns older nsys lacks)


def test_default_columns_from_the_tables_equal_the_tables(recordings: dict[str, Path]) -> None:
    """The default (Kineto, ncu, snapshots) on the same exports: ``Trace.columns`` over the tables."""
    for path in [*NSYS_SQLITE[:2], recordings["multistream.sqlite.xz"]]:
        with open_report(path) as trace:
            def default(table: str, names: list[str], trace: Trace = trace) -> dict[str, np.ndarray]:
                return Trace.columns_async(trace, table, names).result()

            def own_strings(trace: Trace = trace) -> dict[int, str]:
                return Trace.strings(trace)

            _check_trace(trace, default, own_strings)
            # the default's ids are its own (not StringIds): compare through the texts
            ids = Trace.columns_async(trace, "kernels", ["nameId"]).result()["nameId"]
            own = Trace.strings(trace)
            assert [own[int(i)] for i in ids] == trace.table("kernels", ["name"])["name"].tolist()


def test_legacy_export_reads_absent_columns_as_null() -> None:
    (legacy,) = [p for p in NSYS_SQLITE if p.name.startswith("legacy2022")]
    with open_report(legacy) as trace:
        assert isinstance(trace, NsysSqliteTrace)
        assert "greenContextId" not in trace.column_names(schema.MEMCPY)
        cols = trace.columns("memcpy", ["start", "greenContextId"])
        assert len(cols["start"]) > 0
        assert (cols["greenContextId"] == NULL).all()
        assert trace.columns("osrt", ["start"])["start"].dtype == np.int64


def test_nvtx_named_filters(recordings: dict[str, Path]) -> None:
    with open_report(recordings["multistream.sqlite.xz"]) as trace:
        df = trace.table("nvtx")
        for where, types, need_start in (("ranges", (59, 60), True), ("ended_ranges", (59, 60), False),
                                         ("domain_create", (75,), False)):
            got = trace.columns("nvtx", ["start", "end", "eventType", "rowid"], where=where)
            keep = df["eventType"].isin(types) & (df["start"].notna() | (not need_start))
            if where != "domain_create":
                keep &= df["end"].notna()
            want = df[keep]
            assert len(got["start"]) == len(want) > 0, where
            np.testing.assert_array_equal(got["start"], as_int64(want["start"]))
            np.testing.assert_array_equal(got["end"], as_int64(want["end"]))
            assert np.all(np.diff(got["rowid"]) > 0)  # in table order
            default = Trace.columns_async(trace, "nvtx", ["start", "end"], where=where).result()
            np.testing.assert_array_equal(default["start"], got["start"])
            np.testing.assert_array_equal(default["end"], got["end"])
        with pytest.raises(KeyError, match="no filter"):
            trace.columns("nvtx", ["start"], where="nope")


def _printed(names: tuple[np.ndarray, list[tuple[str | None, str | None]]]) -> list[str]:
    code, pairs = names
    labels = [f"{d or ''}:{x or ''}" for d, x in pairs]
    return [labels[c] for c in code.tolist()]


@pytest.mark.parametrize("few_groups", [64, 1], ids=["coded-in-sql", "grouped-by-sqlite"])
def test_nvtx_names_equal_the_tables(recordings: dict[str, Path], few_groups: int, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """An export's names from a code column (or SQLite's groups) equal the nvtx table's, row for row."""
    from engine.reports.nsys import nvtx_ranges

    monkeypatch.setenv("KERNELSCOPE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(nvtx_ranges, "_FEW_GROUPS", few_groups)
    named = 0
    for path in _exports(recordings):
        with open_report(path) as trace:
            for where in ("pushed_ranges", "own_thread_ranges", "ended_ranges", "pushpop_ranges",
                          "startend_ranges", "ranges"):
                rows = trace.columns("nvtx", ["rowid"], where=where)["rowid"]
                got = trace.nvtx_names(where)
                default = Trace.nvtx_names(trace, where)
                assert len(got[0]) == len(rows) == len(default[0]), (path.name, where)
                assert _printed(got) == _printed(default), (path.name, where)
                named += len(rows)
    assert named > 1000


def test_pushed_and_own_thread_filters(recordings: dict[str, Path]) -> None:
    """Push/pop ranges popped or not; ranges of both styles except those ended on another thread."""
    import sqlite3

    path = recordings["multistream.sqlite.xz"]
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        pushed = [r for (r,) in con.execute("SELECT rowid FROM NVTX_EVENTS WHERE eventType IN (59, 70)")]
        own = [r for (r,) in con.execute("SELECT rowid FROM NVTX_EVENTS WHERE eventType IN (59, 70, 60, 71) "
                                         "AND endGlobalTid IS NULL")]
    finally:
        con.close()
    assert pushed and own
    with open_report(path) as trace:
        for where, want in (("pushed_ranges", pushed), ("own_thread_ranges", own)):
            got = trace.columns("nvtx", ["eventType", "rowid"], where=where)
            assert got["rowid"].tolist() == want, where
        # the tables' default: the same push/pop rows (by place in the table); it has no ending thread
        df = trace.table("nvtx", ["eventType"])
        default = Trace.columns_async(trace, "nvtx", ["rowid"], where="pushed_ranges").result()
        assert len(default["rowid"]) == len(pushed)
        assert df["eventType"].to_numpy()[default["rowid"] - 1].tolist() == [59] * len(pushed)


def test_name_and_window_filters(recordings: dict[str, Path]) -> None:
    with open_report(recordings["train_bad.sqlite.xz"]) as trace:
        api = trace.columns("api", ["start", "end", "nameId"])
        uniq, counts = np.unique(api["nameId"], return_counts=True)
        ids = uniq[np.argsort(-counts)[:3]].tolist()  # the three commonest calls
        lo = int(np.median(api["start"]))
        hi = int(np.percentile(api["end"], 90))
        where = name_in(ids) & starts_from(lo) & ends_by(hi)
        got = trace.columns("api", ["start", "nameId"], where=where)
        keep = np.isin(api["nameId"], ids) & (api["start"] >= lo) & (api["end"] <= hi)
        assert 0 < keep.sum() < len(keep)
        np.testing.assert_array_equal(got["start"], api["start"][keep])
        np.testing.assert_array_equal(got["nameId"], api["nameId"][keep])
        default = Trace.columns_async(trace, "api", ["start"], where=starts_from(lo) & ends_by(hi)).result()
        window = (api["start"] >= lo) & (api["end"] <= hi)
        np.testing.assert_array_equal(default["start"], api["start"][window])


def test_kernel_launches_filter(recordings: dict[str, Path]) -> None:
    """The calls sharing a correlation id with a kernel: the export's semi-join, the tables' isin."""
    seen = 0
    for path in _exports(recordings):
        with open_report(path) as trace:
            api = trace.table("api", ["start", "correlationId"]) if trace.has("api") else pd.DataFrame()
            corr = trace.table("kernels", ["correlationId"])["correlationId"] if trace.has("kernels") \
                else pd.Series([], dtype="Int64")
            want = api[api["correlationId"].isin(corr.dropna())] if len(api) else api
            for where in ("kernel_launches", launches_of("kernels")):
                got = trace.columns("api", ["start", "correlationId", "rowid"], where=where)
                assert len(got["start"]) == len(want), (path.name, where)
                if len(want):
                    np.testing.assert_array_equal(got["start"], as_int64(want["start"]))
                    np.testing.assert_array_equal(got["correlationId"], as_int64(want["correlationId"]))
                    assert np.all(np.diff(got["rowid"]) > 0)  # in table order
                default = Trace.columns_async(trace, "api", ["start"], where=where).result()
                np.testing.assert_array_equal(default["start"], got["start"])
            seen += bool(len(want)) and len(want) < len(api)
    assert seen >= 3  # exports where only some calls launch kernels
    sql = schema.where_sql("api", launches_of("kernels"), {"correlationId"})
    assert sql == '"correlationId" IN (SELECT "correlationId" FROM CUPTI_ACTIVITY_KIND_KERNEL)'


def test_async_and_prefetch_give_the_same_columns(recordings: dict[str, Path]) -> None:
    with open_report(recordings["ddp_rank1.sqlite.xz"]) as trace:
        names = ["start", "end", "nameId", "pid", "tid", "correlationId"]
        trace.prefetch_columns("api", names)
        pending = trace.columns_async("api", names)
        got = pending.result()
        again = trace.columns("api", names)
        for n in names:
            np.testing.assert_array_equal(got[n], again[n])
        assert got["nameId"].dtype == np.int32  # ids are narrow
        assert got["start"].dtype == np.int64


def test_text_columns_and_unknown_tables_are_refused() -> None:
    with open_report(NSYS_SQLITE[0]) as trace:
        with pytest.raises(KeyError, match="nameId"):
            trace.columns("kernels", ["name"])
        with pytest.raises(KeyError, match="unknown table"):
            trace.columns("CUPTI_ACTIVITY_KIND_KERNEL", ["start"])
        with pytest.raises(KeyError, match="nameId"):
            Trace.columns(trace, "api", ["baseName"])


def test_schema_sql_of_columns_and_filters() -> None:
    have = {"start", "end", "shortName", "globalPid"}
    assert schema.column_sql("kernels", "nameId", have) == '"shortName"'
    assert schema.column_sql("kernels", "nameId", have | {"demangledName"}) == schema.KERNEL_NAME_ID
    assert schema.column_sql("kernels", "duration", {"start"}) == "NULL"
    assert schema.column_sql("kernels", "pid", have) == '"globalPid" / 16777216 % 16777216'
    assert schema.decode_global_tid is __import__("engine.reports.base").reports.base.decode_global_tid
    sql = schema.where_sql("nvtx", Where(()) & name_in([3, 1]) & ends_by(9), {"nameId", "end"})
    assert sql == '"nameId" IN (1, 3) AND "end" <= 9'


def test_cached_columns_and_stored_columns(recordings: dict[str, Path], tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """columns_cached answers only once the cache holds every column; has_columns tells stored ones."""
    monkeypatch.setenv("KERNELSCOPE_CACHE", str(tmp_path / "cache"))
    with open_report(recordings["twoproc.sqlite.xz"]) as trace:
        assert trace.columns_cached("kernels", ["start", "duration"]) is None
        read = trace.columns("kernels", ["start", "duration"])
        cached = trace.columns_cached("kernels", ["start", "duration"])
        assert cached is not None
        assert isinstance(cached["start"], np.memmap) and isinstance(read["start"], np.memmap)
        np.testing.assert_array_equal(cached["duration"], read["duration"])
        assert trace.columns_cached("kernels", ["start", "end"]) is None  # "end" alone: not read yet
        assert trace.has_columns("kernels", ["start", "nameId", "pid", "gridShape"])
        assert not trace.has_columns("kernels", ["start", "noSuchColumn"])
        assert not trace.has_columns("osrt", ["start"]) or trace.has("nvtx")
    (legacy,) = [p for p in NSYS_SQLITE if p.name.startswith("legacy2022")]
    with open_report(legacy) as trace:
        assert not trace.has_columns("memcpy", ["greenContextId"])
        assert trace.has_columns("memcpy", ["start", "copyKind"])


def test_small_tables_as_stored_and_the_system_env(recordings: dict[str, Path]) -> None:
    with open_report(recordings["ddp_rank0.sqlite.xz"]) as trace:
        assert isinstance(trace, NsysSqliteTrace)
        rows = trace.stored_rows("gpus", ["id", "name", "noSuchColumn"])
        table = trace.table("gpus", ["id", "name"])
        assert [(r[0], r[1]) for r in rows] == list(zip(table["id"], table["name"], strict=True))
        assert all(r[2] is None for r in rows)
        threads = trace.stored_rows("threads", ["globalTid", "nameId"])
        names = trace.strings()
        assert [names.get(int(str(n))) for _g, n in threads] == trace.table("threads")["name"].tolist()
        driver = trace.system_env("NvDriverVersion")
        assert driver is not None and driver[0].isdigit()
        assert trace.system_env("NoSuchName") is None
        assert Trace.system_env(trace, "NvDriverVersion") is None  # the default: not recorded


def test_kineto_traces_answer_the_same_call(tmp_path: Path) -> None:
    """A PyTorch profiler trace answers trace.columns from its tables: the same values, ids of its texts."""
    from tests.conftest import FIXTURES

    xz = REPO / "tests" / "data" / "recordings" / "nsys" / "ddp" / "ddp_kineto_rank0_kineto.json.xz"
    rank0 = tmp_path / "rank0.json"
    rank0.write_bytes(lzma.decompress(xz.read_bytes()))
    for path in (FIXTURES / "torch" / "torch_sdpa_trace.json", rank0):
        with open_report(path) as trace:
            assert not isinstance(trace, NsysSqliteTrace)
            _check_trace(trace, trace.columns, trace.strings)
            assert len(trace.columns("kernels", ["start"])["start"]) > 0


@pytest.mark.parametrize("name", ["torch_train", "torch_conv"])
def test_kineto_name_ids_from_the_events_codes_equal_those_from_the_texts(
        name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # KinetoTrace.coded_text_ids gives nameId / shortNameId / textId without a column of texts; the
    # same ids, in the same order of first use, as TextIds.ids over the table's texts
    from engine.reports.kineto import KinetoTrace

    path = tmp_path / f"{name}.json"
    path.write_bytes(lzma.decompress((REPO / f"tests/data/recordings/torch/{name}.json.xz").read_bytes()))
    asks = [("kernels", ["nameId", "shortNameId", "start"]), ("api", ["nameId", "duration"]),
            ("cpu_ops", ["nameId"]), ("nvtx", ["textId", "end"])]
    coded = open_report(path)
    got = [coded.columns(t, cols) for t, cols in asks]
    with monkeypatch.context() as m:
        m.setattr(KinetoTrace, "coded_text_ids", lambda *a: None)  # the column of texts, as before
        plain = open_report(path)
        want = [plain.columns(t, cols) for t, cols in asks]
    assert coded.strings() == plain.strings() and len(coded.strings()) > 50
    for (t, cols), g, w in zip(asks, got, want, strict=True):
        for c in cols:
            np.testing.assert_array_equal(g[c], w[c], err_msg=f"{t}.{c}")
        ids = g[cols[0]]
        texts = plain.table(t, ["text" if t == "nvtx" else "name"]).iloc[:, 0].tolist()
        assert [coded.strings()[int(k)] for k in ids] == texts and len(texts) > 10


@pytest.mark.parametrize("table", ["kernels", "memcpy", "api", "cpu_ops", "nvtx"])
def test_kineto_times_straight_from_the_events_equal_the_tables(table: str, tmp_path: Path) -> None:
    from engine.reports.base import Trace as BaseTrace

    path = tmp_path / "torch_train.json"
    path.write_bytes(lzma.decompress((REPO / "tests/data/recordings/torch/torch_train.json.xz").read_bytes()))
    trace = open_report(path)
    got = trace.columns(table, ["end", "duration", "start"])
    want = BaseTrace.columns_async(trace, table, ["end", "duration", "start"]).result()  # through the table
    assert len(got["start"]) == len(trace.table(table, ["start"])) > 0
    for c in ("start", "end", "duration"):
        np.testing.assert_array_equal(got[c], want[c], err_msg=c)
        assert got[c].dtype == want[c].dtype
