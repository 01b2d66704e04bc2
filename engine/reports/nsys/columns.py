"""A columnar cache of an nsys SQLite export: integer columns as memory-mapped ``.npy`` files.

SQLite stores rows; the summaries, traces and rules read a few integer columns of tables with
millions of rows. :class:`ColumnStore` reads an integer SQL expression of a table once,
column-wise, and keeps it as ``<cache root>/columns/<file key>/<table>.<name>.npy``; every later
read, by any command or the GUI, opens that file memory-mapped (no parsing, pages shared with
the OS cache, only the columns asked for).

How a column is read from SQLite: the table's rowid range is cut into chunks of
``CHUNK_ROWS``; each chunk is one ``SELECT count(*), group_concat(expr, ',') ... WHERE rowid
BETWEEN`` on its own read-only connection in a thread (SQLite runs without Python's lock, so two
chunks use two cores), which numpy parses in C (``np.fromstring``). That is 3-4x faster than
fetching Python tuples, and the text of one chunk stays small (a few tens of MB), so a 69M-row
table is read with bounded memory. NULL becomes :data:`NULL` (group_concat would skip it).

Usage::

    store = ColumnStore(Path("report.sqlite"))
    pending = store.read_async("CUPTI_ACTIVITY_KIND_RUNTIME",
                               {"duration": '"end" - "start"', "nameId": '"nameId"'})
    cols = pending.result()        # {"duration": int64 array, "nameId": int64 array}

The file key covers the export's real path, size, mtime and inode (and this module's format
version), so an exported-again report never reads stale columns. Cache writes are atomic and
best-effort: a read-only or full cache directory only costs the speed-up.
"""

from __future__ import annotations

import hashlib
import os
import re
import sqlite3
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.reports.npy import load_npy
from engine.reports.nsys.pages import fan_out as _fan_out
from engine.reports.nsys.schema import NULL

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

#: Rows per chunk of a column-wise read.
CHUNK_ROWS = 1_000_000
#: values SQLite's path reads per scan of a table (whole columns in memory: 6 columns of 21M rows,
#: 1 at a time of 69M); the page reader writes into the cache files: every column in one scan
_SQL_PASS_VALUES = 130_000_000
_FORMAT = "1"  # bump when the files' meaning changes
#: a table's first and last rowid: two lookups (``min(rowid), max(rowid)`` in one SELECT scans it all)
_ROWID_SPAN = "SELECT (SELECT min(rowid) FROM {table}), (SELECT max(rowid) FROM {table})"


def _file_key(path: Path) -> str:
    st = path.stat()
    raw = f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}|{st.st_ino}|{_FORMAT}"
    return hashlib.sha256(raw.encode()).hexdigest()[:32]


def _slug(name: str, expr: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9_]", "_", name)[:40]
    return f"{safe}-{hashlib.sha1(expr.encode()).hexdigest()[:10]}"


class PendingColumns:
    """A column read in progress; :meth:`result` waits for it."""

    def __init__(self, future: Future[dict[str, npt.NDArray[np.int64]]],
                 joined: tuple[tuple[Future[dict[str, npt.NDArray[np.int64]]], str], ...] = (),
                 names: tuple[str, ...] = ()) -> None:
        self._future = future
        self._joined = joined  # (a read already in flight, the column taken from it)
        self._names = names

    def result(self) -> dict[str, npt.NDArray[np.int64]]:
        """The columns, name -> int64 array in rowid order (NULLs are :data:`NULL`).

        Raises:
            sqlite3.Error: the table or an expression could not be read.

        """
        got = self._future.result()
        if not self._joined:
            return got
        got = dict(got)
        for fut, name in self._joined:
            got[name] = fut.result()[name]
        return {n: got[n] for n in self._names}


class ColumnStore:
    """Integer columns of one nsys SQLite export, read once and cached as ``.npy`` files."""

    def __init__(self, sqlite_path: Path, cache_dir: Path | None = None) -> None:
        """Open the store of ``sqlite_path``.

        Args:
            sqlite_path: the export (opened read-only, never modified).
            cache_dir: where to keep the columns; default ``<cache root>/columns/<file key>``.
                Where the file cannot be identified (gone), caching is off.

        """
        self.path = Path(sqlite_path)
        if cache_dir is None:
            from engine.system.cache import cache_root

            try:
                cache_dir = cache_root() / "columns" / _file_key(self.path)
            except OSError:
                cache_dir = None
        self.cache_dir = cache_dir
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        #: (table, name, expr) -> the read in flight that gives that column (a second read of it
        #: waits for that one instead of scanning the table again)
        self._inflight: dict[tuple[str, str, str], Future[dict[str, npt.NDArray[np.int64]]]] = {}
        self._counts: dict[str, int] = {}  # table -> rows (see row_count)
        self._pages_ok: dict[str, bool] = {}  # table -> the page reader handles it (see reads_pages)
        self._page_reads = 0  # page reads in flight (see _read_pages)

    # -- cache files ---------------------------------------------------------------------------
    def _file(self, table: str, name: str, expr: str) -> Path | None:
        if self.cache_dir is None:
            return None
        return self.cache_dir / f"{table}.{_slug(name, expr)}.npy"

    def cached(self, table: str, name: str, expr: str) -> npt.NDArray[np.int64] | None:
        """The cached column, memory-mapped, or None when it is not cached yet."""
        f = self._file(table, name, expr)
        if f is None or not f.exists():
            return None
        try:
            arr: npt.NDArray[np.int64] = load_npy(f, mmap_mode="r")
        except (OSError, ValueError):
            return None
        return arr

    def _save(self, table: str, name: str, expr: str, arr: npt.NDArray[np.int64]) -> None:
        import numpy as np

        from engine.system.atomic import atomic_write

        f = self._file(table, name, expr)
        if f is None:
            return
        try:
            atomic_write(f, lambda fh: np.save(fh, arr, allow_pickle=False), binary=True, fsync=False)
        except OSError:
            pass  # a read-only or full cache only costs the speed-up

    # -- reading -------------------------------------------------------------------------------
    def _executor(self) -> ThreadPoolExecutor:
        with self._lock:
            return self._executor_locked()

    def _executor_locked(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=max(2, min(4, os.cpu_count() or 2)),
                                            thread_name_prefix="ks-columns")
        return self._pool

    def _connect(self) -> sqlite3.Connection:
        from engine.reports.nsys.page_exprs import text_hash

        con = sqlite3.connect(self.path.resolve().as_uri() + "?mode=ro", uri=True, check_same_thread=False)
        con.create_function("texthash", -1, text_hash, deterministic=True)  # the page reader's forms
        return con

    def read_async(self, table: str, exprs: dict[str, str],
                   narrow: frozenset[str] = frozenset()) -> PendingColumns:
        """Start reading integer expressions of ``table`` (cached ones are mapped, not read).

        Args:
            table: an SQLite table of the export.
            exprs: column name -> SQL expression over that table's columns (e.g.
                ``'"end" - "start"'``); every value must be an integer or NULL.
            narrow: columns to keep as int32 (ids and kinds: half the memory of 69M-row
                tables); read as int64 after all when a value does not fit (or is NULL).

        A column that an earlier call is still reading is taken from that read (no second scan):
        :meth:`prefetch` a table's columns early, and the later reads of them only wait.

        Returns:
            A handle; its ``result()`` raises ``sqlite3.Error`` when the table or an expression
            cannot be read.

        """
        out: dict[str, npt.NDArray[np.int64]] = {}
        todo: dict[str, str] = {}
        joined: list[tuple[Future[dict[str, npt.NDArray[np.int64]]], str]] = []
        with self._lock:
            for name, expr in exprs.items():
                fut = self._inflight.get((table, name, expr))
                arr = self.cached(table, name, expr) if fut is None else None
                if fut is not None:
                    joined.append((fut, name))
                elif arr is None:
                    todo[name] = expr
                else:
                    out[name] = arr
            if todo:
                pool = self._executor_locked()
                mine = pool.submit(self._read, table, todo, out, narrow)
                keys = [(table, n, e) for n, e in todo.items()]
                for k in keys:
                    self._inflight[k] = mine
            else:
                mine = Future()
                mine.set_result(out)
        if todo:  # outside the lock: a read already done runs the callback here, at once
            mine.add_done_callback(lambda _f: self._landed(keys, _f))
        return PendingColumns(mine, tuple(joined), tuple(exprs))

    def _landed(self, keys: list[tuple[str, str, str]],
                fut: Future[dict[str, npt.NDArray[np.int64]]]) -> None:
        with self._lock:
            for k in keys:
                if self._inflight.get(k) is fut:
                    del self._inflight[k]

    def prefetch(self, table: str, exprs: dict[str, str],
                 narrow: frozenset[str] = frozenset()) -> PendingColumns:
        """Start reading columns in the background; a later read of them waits for this one.

        Errors are the later read's to raise (a prefetch that is never used costs only a scan).
        """
        return self.read_async(table, exprs, narrow)

    def read(self, table: str, exprs: dict[str, str],
             narrow: frozenset[str] = frozenset()) -> dict[str, npt.NDArray[np.int64]]:
        """:meth:`read_async` and wait."""
        return self.read_async(table, exprs, narrow).result()

    def column(self, table: str, name: str, expr: str) -> npt.NDArray[np.int64]:
        """One column: its cache file mapped, or read (and cached) when it is not cached yet."""
        arr = self.cached(table, name, expr)
        return self.read(table, {name: expr})[name] if arr is None else arr

    def _read(self, table: str, exprs: dict[str, str], out: dict[str, npt.NDArray[np.int64]],
              narrow: frozenset[str] = frozenset()) -> dict[str, npt.NDArray[np.int64]]:
        import numpy as np

        fast = self._read_pages(table, exprs, narrow)
        if fast is not None:
            for (name, expr), arr in zip(exprs.items(), fast, strict=True):
                out[name] = arr
                if not isinstance(arr, np.memmap):  # a mapped one is its cache file already
                    self._save(table, name, expr, arr)
            return out
        # SQLite's path fills whole arrays in memory: as many columns per table scan as fit in
        # _SQL_PASS_VALUES (the page reader above writes straight into the cache files: one scan)
        per_pass = max(1, _SQL_PASS_VALUES // max(1, self.row_count(table)))
        items = list(exprs.items())
        for k in range(0, len(items), per_pass):
            self._read_sql(table, dict(items[k:k + per_pass]), out, narrow)
        return out

    def _read_sql(self, table: str, exprs: dict[str, str], out: dict[str, npt.NDArray[np.int64]],
                  narrow: frozenset[str]) -> None:
        """The columns read by SQLite in one scan of ``table`` (chunks of rowids), then cached.

        A column cached is given mapped from its file (the array read is let go of).
        """
        import numpy as np

        con = self._connect()
        try:
            first, last = con.execute(_ROWID_SPAN.format(table=table)).fetchone()
            if first is None:
                for name in exprs:
                    out[name] = np.zeros(0, dtype=np.int64)
                return
            bounds = list(range(first - 1, last, CHUNK_ROWS)) + [last]
            chunks = list(zip(bounds, bounds[1:], strict=False))
            # Rows per chunk first (a rowid-range count is cheap): every chunk is then parsed
            # straight into its place in one array, never concatenated (half the peak memory).
            counts = [con.execute(f"SELECT count(*) FROM {table} WHERE rowid > ? AND rowid <= ?",
                                  c).fetchone()[0] for c in chunks]
        finally:
            con.close()
        offsets = [0]
        for n in counts:
            offsets.append(offsets[-1] + n)
        aggs = ", ".join(f"group_concat(coalesce({e}, {NULL}), ',')" for e in exprs.values())
        sql = f"SELECT count(*), {aggs} FROM {table} WHERE rowid > ? AND rowid <= ?"
        try:
            arrays: list[npt.NDArray[np.int64]] = [
                np.empty(offsets[-1], dtype=np.int32 if n in narrow else np.int64)  # type: ignore[misc]
                for n in exprs]
            self._chunked(sql, chunks, offsets, arrays)
        except _Wide:  # a narrow column holds a big value or NULL: int64 after all
            arrays = [np.empty(offsets[-1], dtype=np.int64) for _ in exprs]
            self._chunked(sql, chunks, offsets, arrays)
        for (name, expr), arr in zip(exprs.items(), arrays, strict=True):
            self._save(table, name, expr, arr)
            mapped = self.cached(table, name, expr)
            out[name] = arr if mapped is None else mapped

    def _read_pages(self, table: str, exprs: dict[str, str],
                    narrow: frozenset[str]) -> list[npt.NDArray[np.int64]] | None:
        """The columns read from the file's pages (:mod:`engine.reports.nsys.pages`), or None.

        None when that reader does not handle the table or an expression (SQLite reads them
        then) or ``KERNELSCOPE_SQLITE_PAGES=0`` turns it off. ``narrow`` as in :meth:`read_async`:
        int32 when every narrow column fits, else every column int64 (as the SQL path gives).
        """
        if os.environ.get("KERNELSCOPE_SQLITE_PAGES", "1") == "0":
            return None
        with self._lock:  # a read alone: here, two threads; beside another: in a child process
            self._page_reads += 1
            alone = self._page_reads == 1
        try:
            mode = os.environ.get("KERNELSCOPE_SQLITE_CHILD", "1")  # 0: never, always: any big one
            child = (self._read_in_child(table, exprs, narrow)
                     if mode == "always" or (mode != "0" and not alone) else None)
            if child is not None:
                return child
            return self._read_here(table, exprs, narrow, 2 if alone else 1)
        finally:
            with self._lock:
                self._page_reads -= 1

    def _read_here(self, table: str, exprs: dict[str, str], narrow: frozenset[str],
                   threads: int) -> list[npt.NDArray[np.int64]] | None:
        """The page reader in this process, writing into the cache files (see :meth:`_mapped`)."""
        from engine.reports.nsys.pages import NpyFile, read_columns

        made: list[tuple[Path, Path]] = []  # (temporary file, its cache file)
        try:
            got = read_columns(self.path, table, exprs, NULL, n_threads=threads, narrow=narrow,
                               alloc=lambda name, dtype, rows: self._mapped(
                                   table, name, exprs[name], dtype, rows, made))
            if got is None:
                return None
            finals = dict(made)
            out = []
            for name in exprs:
                col = got[name]
                if isinstance(col, NpyFile):  # written: renamed into place, then mapped
                    col.close()
                    final = finals[col.path]
                    try:
                        os.replace(col.path, final)
                        col = load_npy(final, mmap_mode="r")
                    except (OSError, ValueError):
                        col = load_npy(col.path)  # (a platform that cannot rename it) read again later
                out.append(col)
            return out
        finally:
            for tmp, _final in made:
                tmp.unlink(missing_ok=True)

    def _read_in_child(self, table: str, exprs: dict[str, str],
                       narrow: frozenset[str]) -> list[npt.NDArray[np.int64]] | None:
        """A big table read by a child process into the cache files (engine.reports.nsys.page_child).

        Used for a big table read while another is (a lone read is faster here, in two threads:
        no process to start); ``KERNELSCOPE_SQLITE_CHILD=always`` for every big one, ``=0`` never.
        None (read in this process then) for a small table, no writable cache or a child that
        fails.
        """
        from engine.reports.nsys.page_child import CHILD_LEAVES, read_in_child
        from engine.reports.nsys.pages import leaf_count

        if self.cache_dir is None:
            return None
        if (leaf_count(self.path, table) or 0) < CHILD_LEAVES:
            return None
        finals = {n: self._file(table, n, e) for n, e in exprs.items()}
        tmps = {n: _temporary(f) for n, f in finals.items() if f is not None}
        try:
            if len(tmps) != len(exprs):
                return None
            next(iter(tmps.values())).parent.mkdir(parents=True, exist_ok=True)
            if not read_in_child(self.path, table, exprs, narrow, tmps, NULL):
                return None
            out = []
            for n in exprs:
                final = finals[n]
                assert final is not None
                os.replace(tmps[n], final)
                out.append(load_npy(final, mmap_mode="r"))
            return out
        except (OSError, ValueError):
            return None
        finally:
            for tmp in tmps.values():
                tmp.unlink(missing_ok=True)

    def _mapped(self, table: str, name: str, expr: str, dtype: type, rows: int,
                made: list[tuple[Path, Path]]) -> Any:
        """Where the reader writes a column: its cache file, under a temporary name.

        That is an :class:`engine.reports.nsys.pages.NpyFile`, renamed once the read succeeds.
        The reader writes the values straight into the file: no second copy, no ``np.save``.
        Where the cache cannot take it (no cache, read-only, empty column) a plain array is given.
        """
        import numpy as np

        from engine.reports.nsys.pages import NpyFile

        final = self._file(table, name, expr)
        if final is None or rows == 0:
            return np.empty(rows, dtype=dtype)
        tmp = _temporary(final)
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
            out = NpyFile(tmp, dtype, rows)
        except (OSError, ValueError):
            return np.empty(rows, dtype=dtype)
        made.append((tmp, final))
        return out

    def _chunked(self, sql: str, chunks: list[tuple[int, int]], offsets: list[int],
                 arrays: list[npt.NDArray[np.int64]]) -> None:
        """Read the chunks on up to two connections in two threads, each into its place."""
        import numpy as np

        n_threads = min(2, len(chunks))
        errors: list[BaseException] = []

        def work(k: int) -> None:
            con = self._connect()
            try:
                for j in range(k, len(chunks), n_threads):
                    cols = _parse(con.execute(sql, chunks[j]).fetchone())
                    if any(len(c) != offsets[j + 1] - offsets[j] for c in cols):
                        raise sqlite3.DatabaseError("the table changed while it was read")
                    for arr, col in zip(arrays, cols, strict=True):
                        if arr.dtype == np.int32 and len(col) and (
                                int(col.min()) < -(2**31) or int(col.max()) >= 2**31):
                            raise _Wide
                        arr[offsets[j]:offsets[j + 1]] = col
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
                errors.append(exc)
            finally:
                con.close()

        _fan_out(work, n_threads, errors)

    def reads_pages(self, table: str) -> bool:
        """True when the page reader handles ``table`` (its B-tree walks; no WAL beside the file).

        Whole columns are then cheaper than SQLite's filtered scans, and a filter is a mask over
        them (``column_reads``). Kept per table. ``KERNELSCOPE_SQLITE_PAGES=0`` makes it False.
        """
        from engine.reports.nsys.pages import leaf_count

        if os.environ.get("KERNELSCOPE_SQLITE_PAGES", "1") == "0":
            return False
        with self._lock:
            known = self._pages_ok.get(table)
        if known is None:
            known = leaf_count(self.path, table) is not None
            with self._lock:
                self._pages_ok[table] = known
        return known

    def row_count(self, table: str) -> int:
        """Rows of ``table``, counted once per store (from the leaf pages' headers when it can).

        Raises:
            sqlite3.Error: the table cannot be counted.

        """
        from engine.reports.nsys.pages import count_rows

        with self._lock:
            known = self._counts.get(table)
        if known is not None:
            return known
        n = None if os.environ.get("KERNELSCOPE_SQLITE_PAGES", "1") == "0" else count_rows(
            self.path, table)
        if n is None:
            con = self._connect()
            try:
                n = int(con.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
            finally:
                con.close()
        with self._lock:
            self._counts[table] = n
        return n

    def read_where(self, table: str, exprs: dict[str, str],
                   where: str) -> dict[str, npt.NDArray[np.int64]]:
        """Read integer expressions of only the rows of ``table`` where the SQL ``where`` holds.

        For the few rows a rule can use out of a big table (say the sync calls among 69M CUDA
        API calls): SQLite tests ``where`` while it scans the chunks (two threads), and only the
        matching rows are parsed and kept, in rowid order. Cached like :meth:`read`, under a key
        that includes ``where``.

        Raises:
            sqlite3.Error: the table, an expression or ``where`` could not be read.

        """
        import numpy as np

        keyed = {name: f"{expr} WHERE {where}" for name, expr in exprs.items()}
        out = {name: self.cached(table, name, k) for name, k in keyed.items()}
        if all(v is not None for v in out.values()):
            return {k: v for k, v in out.items() if v is not None}
        con = self._connect()
        try:
            first, last = con.execute(_ROWID_SPAN.format(table=table)).fetchone()
        finally:
            con.close()
        if first is None:
            return {name: np.zeros(0, dtype=np.int64) for name in exprs}
        bounds = list(range(first - 1, last, CHUNK_ROWS)) + [last]
        chunks = list(zip(bounds, bounds[1:], strict=False))
        aggs = ", ".join(f"group_concat(coalesce({e}, {NULL}), ',')" for e in exprs.values())
        sql = (f"SELECT count(*), {aggs} FROM {table} "
               f"WHERE rowid > ? AND rowid <= ? AND ({where})")
        parts: list[list[npt.NDArray[np.int64]]] = [[] for _ in chunks]
        errors: list[BaseException] = []
        n_threads = min(2, len(chunks))

        def work(k: int) -> None:
            con = self._connect()
            try:
                for j in range(k, len(chunks), n_threads):
                    parts[j] = _parse(con.execute(sql, chunks[j]).fetchone())
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
                errors.append(exc)
            finally:
                con.close()

        _fan_out(work, n_threads, errors)
        result: dict[str, npt.NDArray[np.int64]] = {}
        for i, (name, k) in enumerate(keyed.items()):
            arr = np.concatenate([p[i] for p in parts]) if parts else np.zeros(0, dtype=np.int64)
            result[name] = arr.astype(np.int64, copy=False)
            self._save(table, name, k, result[name])
        return result

    def read_where_async(self, table: str, exprs: dict[str, str], where: str) -> PendingColumns:
        """:meth:`read_where` in a background thread (``result()`` waits and raises its errors)."""
        return PendingColumns(self._executor().submit(self.read_where, table, exprs, where))

    def close(self) -> None:
        """Stop the reader threads (reads in progress finish first)."""
        with self._lock:
            if self._pool is not None:
                self._pool.shutdown(wait=False)
                self._pool = None


def _temporary(final: Path) -> Path:
    """Where a cache file is written before it is renamed into place (this process and thread)."""
    return final.with_name(f"{final.name}.{os.getpid()}-{threading.get_ident()}.tmp")


class _Wide(Exception):
    """A value does not fit the int32 column it was read into."""


def _parse(row: tuple[object, ...]) -> list[npt.NDArray[np.int64]]:
    import numpy as np

    n_rows, *texts = row
    try:
        cols = [np.fromstring(str(t or ""), dtype=np.int64, sep=",") for t in texts]
    except ValueError as exc:  # text that is not integers (a string column, say)
        raise sqlite3.DatabaseError(f"a column could not be read as integers ({exc})") from exc
    if any(len(c) != n_rows for c in cols):
        raise sqlite3.DatabaseError("a column could not be read as integers")
    return cols


def has_null(arr: npt.NDArray[np.int64]) -> bool:
    """True when a column read by :class:`ColumnStore` holds an SQL NULL."""
    return bool(len(arr)) and bool((arr == NULL).any())
