"""Opening an Nsight Systems SQLite export: is it SQLite, and a read-only connection to it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from engine.system.errors import ReportError


def is_sqlite(path: Path) -> bool:
    """True when ``path`` starts with SQLite's header (False when it cannot be read)."""
    try:
        with path.open("rb") as fh:
            return fh.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


def connect_readonly(path: Path) -> sqlite3.Connection:
    """Open ``path`` read-only (never creates or modifies it) and check it is a readable SQLite DB."""
    uri = path.resolve().as_uri() + "?mode=ro"
    try:
        con = sqlite3.connect(uri, uri=True, check_same_thread=False)
        con.execute("SELECT name FROM sqlite_master LIMIT 1").fetchall()
    except sqlite3.DatabaseError as exc:
        raise ReportError(
            f"{path} is not a readable SQLite database ({exc}); it may be truncated or corrupt: "
            "export it again with `nsys export --type sqlite`."
        ) from exc
    return con
