"""Telemetry recordings: write snapshots to CSV or Parquet, read them back as a DataFrame.

Format (one row per GPU per snapshot; NA is an empty cell): ``timestamp_ns`` is nanoseconds since
the Unix epoch, so a recording lines up with nsys/ncu sessions made at the same time; the other
columns are the :class:`~engine.telemetry.snapshot.GpuSample` fields, units in their names, then
``gap`` (0/1) and ``gap_reason``. A gap snapshot with no GPU has one row whose ``gpu`` is empty.
``throttle_reasons`` is ``;``-joined names (``none`` when no reason is active); ``processes`` is a
JSON list of ``[pid, name, used_bytes]``.

:func:`read_recording` also reads the fixture format written by ``nvml_sample.py`` (columns
``t, util_gpu, util_mem, mem_used_mb, ...``): its ``t`` is seconds from the start of the recording,
so its timestamps start at 0 (``df.attrs["relative_time"]`` is True).
"""

from __future__ import annotations

import csv
import importlib.util
import json
import math
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any

from engine.telemetry.errors import RecordingError
from engine.telemetry.snapshot import SAMPLE_FIELDS, GpuSample, Snapshot

if TYPE_CHECKING:
    import pandas as pd

COLUMNS: tuple[str, ...] = (*SAMPLE_FIELDS, "gap", "gap_reason")
STRING_COLUMNS = frozenset({"uuid", "name", "throttle_reasons", "processes", "gap_reason"})
INT_COLUMNS = frozenset({"timestamp_ns", "gpu", "mem_used_bytes", "mem_total_bytes", "sm_clock_mhz",
                         "mem_clock_mhz", "ecc_errors", "gap"})
NUMERIC_COLUMNS = tuple(c for c in COLUMNS if c not in STRING_COLUMNS)
NO_THROTTLE = "none"

# The fixture format (shared/fixtures/src/nvml_sample.py): column -> (our column, scale).
FIXTURE_COLUMNS: dict[str, tuple[str, float]] = {
    "util_gpu": ("util_gpu_pct", 1),
    "util_mem": ("util_mem_pct", 1),
    "mem_used_mb": ("mem_used_bytes", 2**20),  # the script writes used // 2**20 (MiB)
    "sm_mhz": ("sm_clock_mhz", 1),
    "mem_mhz": ("mem_clock_mhz", 1),
    "power_w": ("power_w", 1),
    "temp_c": ("temp_c", 1),
    "pcie_tx_kbs": ("pcie_tx_bytes_per_s", 1024),  # NVML's PCIe throughput is in KiB/s
    "pcie_rx_kbs": ("pcie_rx_bytes_per_s", 1024),
    "gpm_sm_occupancy": ("gpm_sm_occupancy_pct", 1),
    "gpm_sm_util": ("gpm_sm_util_pct", 1),
    "gpm_any_tensor_util": ("gpm_tensor_util_pct", 1),
    "gpm_dram_bw_util": ("gpm_dram_bw_util_pct", 1),
    "gpm_graphics_util": ("gpm_graphics_util_pct", 1),
}
_HOW_TO_RECORD = "record one with `kernelscope telemetry --record FILE.csv`"


def _pyarrow_or_error(path: Path, action: str) -> None:
    if importlib.util.find_spec("pyarrow") is None:
        raise RecordingError(
            f"Cannot {action} {path}: Parquet needs the pyarrow package, which is not installed; "
            "install it with `pip install pyarrow`, or use a .csv file."
        )


def _cell(value: Any) -> Any:
    """A CSV/Parquet cell for one field value (None stays None = NA)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def snapshot_rows(snap: Snapshot) -> list[dict[str, Any]]:
    """The recording rows of one snapshot (one per GPU; one GPU-less row for an empty gap)."""
    gap = {"gap": int(snap.gap), "gap_reason": snap.gap_reason}
    if not snap.gpus:
        return [{c: None for c in SAMPLE_FIELDS} | {"timestamp_ns": snap.timestamp_ns} | gap]
    rows = []
    for s in snap.gpus:
        row = {name: _cell(getattr(s, name)) for name in SAMPLE_FIELDS}
        if s.throttle_reasons is not None:
            row["throttle_reasons"] = ";".join(s.throttle_reasons) or NO_THROTTLE
        if s.processes is not None:
            row["processes"] = json.dumps([list(p) for p in s.processes])
        rows.append(row | gap)
    return rows


class Recorder:
    """Writes snapshots to a recording file, CSV (streamed) or Parquet (written on close).

    The format comes from ``fmt`` or the file suffix (``.parquet``/``.pq`` = Parquet, else CSV).
    Not thread-safe: call :meth:`write` from one thread (the CLI drains the sampler's queue).

    Raises:
        RecordingError: the file cannot be created, or Parquet is asked for without pyarrow.
    """

    def __init__(self, path: str | Path, fmt: str | None = None) -> None:
        self.path = Path(path).expanduser()
        fmt = fmt or ("parquet" if self.path.suffix.lower() in (".parquet", ".pq") else "csv")
        if fmt not in ("csv", "parquet"):
            raise RecordingError(f"Unknown recording format {fmt!r}; use csv or parquet.")
        self.fmt = fmt
        self.rows_written = 0
        self._rows: list[dict[str, Any]] = []
        self._file: IO[str] | None = None
        self._writer: Any = None
        if fmt == "parquet":
            _pyarrow_or_error(self.path, "write")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if fmt == "csv":
                self._file = open(self.path, "w", newline="", encoding="utf-8")  # noqa: SIM115
                self._writer = csv.DictWriter(self._file, fieldnames=list(COLUMNS))
                self._writer.writeheader()
        except OSError as exc:
            raise RecordingError(
                f"Could not write the recording {self.path} ({exc.strerror}); choose another file."
            ) from exc

    def write(self, snap: Snapshot) -> None:
        """Append one snapshot (CSV rows are flushed, so a crash loses at most this one)."""
        rows = snapshot_rows(snap)
        if self._writer is not None and self._file is not None:
            try:
                self._writer.writerows(rows)
                self._file.flush()
            except OSError as exc:
                raise RecordingError(f"Could not write the recording {self.path} ({exc.strerror}).") from exc
        else:
            self._rows += rows
        self.rows_written += len(rows)

    def close(self) -> None:
        """Finish the file (Parquet is written here)."""
        if self._file is not None:
            self._file.close()
            self._file = None
            self._writer = None
        elif self.fmt == "parquet" and self._rows is not None:
            import pandas as pd

            df = pd.DataFrame(self._rows, columns=list(COLUMNS))
            df = _typed(df)
            try:
                df.to_parquet(self.path, index=False)
            except OSError as exc:
                raise RecordingError(f"Could not write the recording {self.path} ({exc}).") from exc
            self._rows = []

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def _typed(df: pd.DataFrame) -> pd.DataFrame:
    """Our column dtypes: nullable Int64 for counts/bytes/MHz, float64, and strings (object)."""
    for col in COLUMNS:
        if col in INT_COLUMNS:
            df[col] = df[col].astype("Int64")
        elif col in STRING_COLUMNS:
            df[col] = df[col].astype(object).where(df[col].notna(), None)
        else:
            df[col] = df[col].astype("float64")
    return df


def _foreign_kind(head: bytes) -> str | None:
    """What a file is when its first bytes say it cannot be a CSV/Parquet recording (None: maybe one)."""
    stripped = head.lstrip()
    if stripped[:1] in (b"{", b"["):
        return "a JSON file"
    if head.startswith(b"SQLite"):
        return "an SQLite database, e.g. an nsys export"
    if head.startswith(b"NVID"):
        return "an Nsight Systems report"
    if head.startswith(b"PK\x03\x04"):
        return "a ZIP archive"
    return None


def read_recording(path: str | Path) -> pd.DataFrame:
    """Read a recording (ours in CSV or Parquet, or the fixture CSV format) into a DataFrame.

    Returns:
        One row per GPU per snapshot with the columns of :data:`COLUMNS`, sorted by
        ``timestamp_ns`` then ``gpu``. ``df.attrs["relative_time"]`` is True when the file only
        had times relative to its start (the fixture format).

    Raises:
        RecordingError: missing, empty, corrupt or foreign file, with one sentence saying so.
    """
    import pandas as pd

    p = Path(path).expanduser()
    if not p.is_file():
        raise RecordingError(
            f"The recording {p} does not exist or is not a file; give the path of a .csv or "
            ".parquet recording."
        )
    try:
        with open(p, "rb") as f:
            head = f.read(64)
    except PermissionError as exc:
        raise RecordingError(
            f"The recording {p} cannot be read: permission denied; check its permissions."
        ) from exc
    except OSError as exc:
        raise RecordingError(f"The recording {p} cannot be read ({exc.strerror}).") from exc
    if not head:
        raise RecordingError(f"The recording {p} is empty; {_HOW_TO_RECORD}.")
    kind = _foreign_kind(head)
    if kind is not None:
        raise RecordingError(
            f"{p} is not a telemetry recording (it is {kind}); give the .csv or .parquet file written by "
            f"`kernelscope telemetry --record` (or open the report itself in Kernelscope)."
        )
    if head[:4] == b"PAR1" or p.suffix.lower() in (".parquet", ".pq"):
        _pyarrow_or_error(p, "read")
        try:
            raw = pd.read_parquet(p)
        except Exception as exc:  # noqa: BLE001 - pyarrow raises many kinds for a bad file
            raise RecordingError(f"The recording {p} is not a readable Parquet file ({exc}).") from exc
    else:
        try:
            raw = pd.read_csv(p, dtype=str, keep_default_na=False, encoding="utf-8")
        except (
            UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError, ValueError,
            EOFError, OSError,  # a truncated .gz (pandas decompresses by suffix)
        ) as exc:
            raise RecordingError(
                f"The recording {p} is not a readable CSV file ({type(exc).__name__}); {_HOW_TO_RECORD}."
            ) from exc
        raw = raw.replace("", None)
    cols = set(raw.columns)
    if {"timestamp_ns", "gpu"} <= cols:
        df = _from_ours(raw, p)
        relative = False
    elif {"t", "util_gpu"} <= cols:
        df = _from_fixture(raw, p)
        relative = True
    else:
        shown = ", ".join(map(str, list(raw.columns)[:6]))
        raise RecordingError(
            f"{p} is not a Kernelscope telemetry recording (its columns are {shown}; expected "
            f"timestamp_ns, gpu, ...); {_HOW_TO_RECORD}."
        )
    df = df.sort_values(["timestamp_ns", "gpu"], kind="stable", na_position="first").reset_index(drop=True)
    df.attrs["relative_time"] = relative
    return df


def _numeric(raw: pd.DataFrame, col: str, path: Path, strict: bool) -> pd.Series:
    import pandas as pd

    values = pd.to_numeric(raw[col], errors="coerce")
    if strict:
        bad = values.isna() & raw[col].notna()
        if bool(bad.any()):
            row = int(bad.to_numpy().nonzero()[0][0]) + 2  # 1-based, after the header line
            raise RecordingError(
                f"The recording {path} is corrupt: column {col} has {raw[col][bad].iloc[0]!r} "
                f"on line {row}, where a number belongs."
            )
    return values


def _from_ours(raw: pd.DataFrame, path: Path) -> pd.DataFrame:
    import pandas as pd

    if raw["timestamp_ns"].isna().any():
        raise RecordingError(f"The recording {path} is corrupt: a row has no timestamp_ns.")
    df = pd.DataFrame(index=raw.index)
    for col in COLUMNS:
        if col not in raw.columns:
            df[col] = None
        elif col in STRING_COLUMNS:
            df[col] = raw[col]
        else:
            df[col] = _numeric(raw, col, path, strict=True)
    try:
        return _typed(df)
    except (TypeError, ValueError) as exc:
        raise RecordingError(
            f"The recording {path} is corrupt: a whole-number column holds a fraction."
        ) from exc


def _from_fixture(raw: pd.DataFrame, path: Path) -> pd.DataFrame:
    import pandas as pd

    t = _numeric(raw, "t", path, strict=True)
    if t.isna().any():
        raise RecordingError(f"The recording {path} is corrupt: a row has no time (column t).")
    df = pd.DataFrame({c: [None] * len(raw) for c in COLUMNS}, index=raw.index)
    df["timestamp_ns"] = (t * 1e9).round().astype("int64")
    df["gpu"] = 0
    df["gap"] = 0
    for src, (dst, scale) in FIXTURE_COLUMNS.items():
        if src in raw.columns:
            # GPM cells can hold "err ..." when NVML refused a window: that is NA, not corruption.
            df[dst] = _numeric(raw, src, path, strict=not src.startswith("gpm_")) * scale
    return _typed(df)


def row_to_sample(row: Mapping[Any, Any]) -> GpuSample:
    """One recording row (as a dict) back into a :class:`GpuSample` (NA becomes None)."""
    values: dict[str, Any] = {}
    for name in SAMPLE_FIELDS:
        v = row.get(name)
        if v is None or (isinstance(v, float) and math.isnan(v)) or _is_na(v):
            values[name] = None
        elif name == "throttle_reasons":
            text = str(v)
            values[name] = () if text == NO_THROTTLE else tuple(x for x in text.split(";") if x)
        elif name == "processes":
            values[name] = tuple((int(p[0]), str(p[1]), None if p[2] is None else int(p[2]))
                                 for p in json.loads(str(v)))
        elif name in INT_COLUMNS:
            values[name] = int(v)
        elif name in STRING_COLUMNS:
            values[name] = str(v)
        else:
            values[name] = float(v)
    return GpuSample(**values)


def _is_na(v: Any) -> bool:
    try:
        import pandas as pd

        return v is pd.NA or v is pd.NaT
    except ImportError:  # pragma: no cover
        return False
