"""The session store: every session and its reports, in SQLite under the user data dir.

Consistency rules:

* a session row is written (``state='running'``) before its program starts, and finished with its
  outcome after; each write is one transaction (SQLite WAL), so a crash leaves either the old or the
  new row, never half of one;
* a report is registered as soon as its file is complete, before the session is finished, so a
  finished report is never lost even if Kernelscope dies right after;
* a row left ``running`` by a Kernelscope process that no longer exists is reconciled on the next
  read: marked ``interrupted`` and given every report file found in its folder, whose ``session.log``
  holds the output up to the crash.

``$KERNELSCOPE_DATA`` overrides the data dir (tests, portable installs).
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.system.errors import KernelscopeError

REPORT_SUFFIXES = (".nsys-rep", ".ncu-rep", ".sqlite", ".qdstrm")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    created REAL NOT NULL,
    finished REAL,
    state TEXT NOT NULL,          -- running | finished
    kind TEXT,                    -- OutcomeKind value once finished
    message TEXT,
    tool TEXT NOT NULL,
    target TEXT NOT NULL,         -- 'local' or user@host:port
    command TEXT NOT NULL,        -- JSON list
    session_dir TEXT NOT NULL,
    returncode INTEGER,
    duration_s REAL,
    pid INTEGER,
    hostname TEXT,
    spec TEXT NOT NULL            -- JSON
);
CREATE TABLE IF NOT EXISTS reports (
    session_id TEXT NOT NULL REFERENCES sessions(id),
    path TEXT NOT NULL,
    bytes INTEGER,
    added REAL NOT NULL,
    PRIMARY KEY (session_id, path)
);
"""


class StoreError(KernelscopeError):
    """The session store cannot be opened or written."""


def data_root() -> Path:
    """Kernelscope's user data dir (``$KERNELSCOPE_DATA`` overrides)."""
    env = os.environ.get("KERNELSCOPE_DATA")
    if env:
        return Path(env)
    from platformdirs import user_data_dir

    return Path(user_data_dir("kernelscope"))


@dataclass(frozen=True)
class SessionRecord:
    """One row of the store, with its reports."""

    id: str
    created: float
    finished: float | None
    state: str
    kind: str | None
    message: str | None
    tool: str
    target: str
    command: tuple[str, ...]
    session_dir: Path
    returncode: int | None
    duration_s: float | None
    reports: tuple[Path, ...]
    spec: dict[str, Any]

    @property
    def log_path(self) -> Path:
        """The session's combined log."""
        return self.session_dir / "session.log"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class SessionStore:
    """The SQLite store of sessions (safe to use from several threads and processes).

    Args:
        path: The database file (default ``<data dir>/sessions.sqlite``).
    """

    def __init__(self, path: Path | None = None) -> None:
        self.path = Path(path) if path is not None else data_root() / "sessions.sqlite"
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self._connect() as con:
                con.executescript(_SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(
                f"The session store {self.path} cannot be opened ({exc}); make its folder writable or set "
                "KERNELSCOPE_DATA to another folder."
            ) from exc

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        con = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
        try:
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=FULL")
            con.execute("PRAGMA foreign_keys=ON")
            yield con
        finally:
            con.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        try:
            with self._connect() as con:
                con.execute("BEGIN IMMEDIATE")
                try:
                    yield con
                except BaseException:
                    con.execute("ROLLBACK")
                    raise
                con.execute("COMMIT")
        except sqlite3.Error as exc:
            raise StoreError(
                f"The session store {self.path} could not be written ({exc}); check free space and "
                "permissions there."
            ) from exc

    # -- writes --------------------------------------------------------------------------------
    def begin(self, session_id: str, spec: dict[str, Any], session_dir: Path, command: list[str],
              target: str) -> None:
        """Register a session that is about to start."""
        with self._tx() as con:
            con.execute(
                "INSERT INTO sessions (id, created, state, tool, target, command, session_dir, pid, "
                "hostname, spec) VALUES (?, ?, 'running', ?, ?, ?, ?, ?, ?, ?)",
                (session_id, time.time(), spec.get("tool", "?"), target, json.dumps(command),
                 str(session_dir), os.getpid(), socket.gethostname(), json.dumps(spec)),
            )

    def add_report(self, session_id: str, path: Path) -> None:
        """Register a finished report file of a session (idempotent)."""
        path = Path(path).resolve()
        try:
            size: int | None = path.stat().st_size
        except OSError:
            size = None
        with self._tx() as con:
            con.execute(
                "INSERT OR REPLACE INTO reports (session_id, path, bytes, added) VALUES (?, ?, ?, ?)",
                (session_id, str(path), size, time.time()),
            )

    def finish(self, session_id: str, kind: str, message: str, returncode: int | None,
               duration_s: float, reports: list[Path] | tuple[Path, ...] = ()) -> None:
        """Record a session's outcome and its reports in one transaction."""
        now = time.time()
        with self._tx() as con:
            for p in reports:
                rp = Path(p).resolve()
                size = rp.stat().st_size if rp.exists() else None
                con.execute(
                    "INSERT OR REPLACE INTO reports (session_id, path, bytes, added) VALUES (?, ?, ?, ?)",
                    (session_id, str(rp), size, now),
                )
            con.execute(
                "UPDATE sessions SET state='finished', finished=?, kind=?, message=?, returncode=?, "
                "duration_s=? WHERE id=?",
                (now, kind, message, returncode, duration_s, session_id),
            )

    def reconcile(self) -> int:
        """Mark sessions whose runner died as ``interrupted`` and adopt their report files.

        Returns:
            How many sessions were reconciled.
        """
        host = socket.gethostname()
        with self._connect() as con:
            rows = con.execute(
                "SELECT id, session_dir, pid, hostname, created FROM sessions WHERE state='running'"
            ).fetchall()
        n = 0
        for sid, sdir, pid, hostname, created in rows:
            if hostname != host or (pid is not None and _pid_alive(int(pid))):
                continue
            folder = Path(sdir)
            found = sorted(p for p in folder.glob("*") if p.suffix in REPORT_SUFFIXES or
                           p.name.endswith(".nsys-rep")) if folder.is_dir() else []
            found = [p for p in found if not p.name.startswith(".")]
            self.finish(
                sid, "interrupted",
                "Kernelscope stopped while this session ran; its log up to then is in "
                f"{folder / 'session.log'}"
                + (f" and {len(found)} report file(s) were kept." if found else "."),
                None, max(0.0, time.time() - float(created)), found,
            )
            n += 1
        return n

    # -- reads ---------------------------------------------------------------------------------
    def last_duration(self, tool: str, command: list[str], target: str) -> float | None:
        """Duration of the latest successful session with the same tool, command and target."""
        with self._connect() as con:
            row = con.execute(
                "SELECT duration_s FROM sessions WHERE kind='success' AND tool=? AND command=? AND target=? "
                "ORDER BY finished DESC LIMIT 1", (tool, json.dumps(command), target),
            ).fetchone()
        return float(row[0]) if row and row[0] else None

    def _record(self, con: sqlite3.Connection, row: tuple[Any, ...]) -> SessionRecord:
        (sid, created, finished, state, kind, message, tool, target, command, sdir, rc, dur, spec) = row
        reps = con.execute("SELECT path FROM reports WHERE session_id=? ORDER BY path", (sid,)).fetchall()
        return SessionRecord(
            id=sid, created=created, finished=finished, state=state, kind=kind, message=message,
            tool=tool, target=target, command=tuple(json.loads(command)), session_dir=Path(sdir),
            returncode=rc, duration_s=dur, reports=tuple(Path(r[0]) for r in reps), spec=json.loads(spec),
        )

    _COLS = ("id, created, finished, state, kind, message, tool, target, command, session_dir, returncode, "
             "duration_s, spec")

    def list(self, limit: int | None = None) -> list[SessionRecord]:
        """All sessions, newest first (reconciling interrupted ones first)."""
        self.reconcile()
        sql = f"SELECT {self._COLS} FROM sessions ORDER BY created DESC, id DESC"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        with self._connect() as con:
            return [self._record(con, row) for row in con.execute(sql).fetchall()]

    def get(self, session_id: str) -> SessionRecord | None:
        """One session by id (or a unique id prefix), or None."""
        self.reconcile()
        with self._connect() as con:
            rows = con.execute(
                f"SELECT {self._COLS} FROM sessions WHERE substr(id, 1, ?) = ? ORDER BY id",
                (len(session_id), session_id),
            ).fetchall()
            exact = [r for r in rows if r[0] == session_id]
            if exact:
                return self._record(con, exact[0])
            return self._record(con, rows[0]) if len(rows) == 1 else None
