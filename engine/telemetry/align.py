"""Put a telemetry recording on an Nsight Systems report's timeline.

nsys stores event times as nanoseconds from the session start, and the session start as wall-clock
epoch nanoseconds (its ``utcEpochNs``: ``NsysSqliteTrace.session_start_utc_ns``). Our recordings
carry wall-clock epoch nanoseconds (``timestamp_ns``), so a sample's place on the nsys timeline is
``timestamp_ns - utcEpochNs``. The fixture format (``nvml_sample.py``) only has seconds from its own
start: its wall-clock start must be given, or it is taken to have started with the session.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.reports.nsys.schema import SESSION_START
from engine.telemetry.errors import TelemetryError

if TYPE_CHECKING:
    import pandas as pd

SESSION_TIME_COLUMN = "session_time_ns"


def session_start_utc_ns(report: str | Path | Any) -> int:
    """The wall-clock start (epoch ns) of an nsys session.

    Args:
        report: An nsys SQLite export (path), or an object with ``session_start_utc_ns()`` (an open
            :class:`~engine.reports.nsys.sqlite_trace.NsysSqliteTrace`).

    Raises:
        TelemetryError: the report has no session start time (e.g. a Kineto trace), or cannot be read.
    """
    if isinstance(report, (str, Path)):
        from engine.reports.nsys.sqlite_trace import NsysSqliteTrace

        trace = NsysSqliteTrace(Path(report))
        try:
            start = trace.session_start_utc_ns()
        finally:
            trace.close()
        name = Path(report).name
    else:
        getter = getattr(report, "session_start_utc_ns", None)
        start = getter() if callable(getter) else None
        name = str(getattr(getattr(report, "info", None), "path", report))
    if start is None:
        raise TelemetryError(
            f"{name} has no session start time ({SESSION_START}), so telemetry cannot be "
            "placed on its timeline; use an Nsight Systems SQLite export."
        )
    return int(start)


def absolute_times(recording: pd.DataFrame, recording_start_utc_ns: int | None) -> pd.DataFrame:
    """A copy of ``recording`` whose ``timestamp_ns`` are wall-clock epoch nanoseconds.

    Recordings of ours are returned unchanged (copied). A relative recording (the fixture format,
    ``attrs["relative_time"]``) is shifted by ``recording_start_utc_ns``.

    Raises:
        TelemetryError: a relative recording without a start, or a start given for an absolute one.
    """
    out = recording.copy()
    out.attrs = dict(recording.attrs)
    relative = bool(recording.attrs.get("relative_time"))
    if relative:
        if recording_start_utc_ns is None:
            raise TelemetryError(
                "This recording has only times from its own start (the nvml_sample.py format); give its "
                "wall-clock start to place it in time."
            )
        out["timestamp_ns"] = out["timestamp_ns"] + int(recording_start_utc_ns)
        out.attrs["relative_time"] = False
    elif recording_start_utc_ns is not None:
        raise TelemetryError(
            "This recording already has wall-clock timestamps; it needs no start time (leave it out)."
        )
    return out


def align_to_session(recording: pd.DataFrame, session_start_ns: int, *,
                     recording_start_utc_ns: int | None = None) -> pd.DataFrame:
    """Add ``session_time_ns``: each sample's time on the nsys timeline (ns from the session start).

    Args:
        recording: From :func:`~engine.telemetry.recording.read_recording`.
        session_start_ns: The session's ``utcEpochNs`` (see :func:`session_start_utc_ns`).
        recording_start_utc_ns: Only for a relative recording (fixture format): its wall-clock start.
            When None, such a recording is taken to have started with the session (nsys and the
            sampler launched together), so its times map one to one.

    Returns:
        A copy with absolute ``timestamp_ns`` and the new ``session_time_ns`` column (negative before
        the session started); ``attrs["session_start_utc_ns"]`` holds the session start.
    """
    if bool(recording.attrs.get("relative_time")) and recording_start_utc_ns is None:
        recording_start_utc_ns = int(session_start_ns)
    out = absolute_times(recording, recording_start_utc_ns)
    out[SESSION_TIME_COLUMN] = out["timestamp_ns"] - int(session_start_ns)
    out.attrs["session_start_utc_ns"] = int(session_start_ns)
    return out


def align_to_report(recording: pd.DataFrame, report: str | Path | Any, *,
                    recording_start_utc_ns: int | None = None) -> pd.DataFrame:
    """:func:`align_to_session` with the session start read from an nsys report."""
    return align_to_session(recording, session_start_utc_ns(report),
                            recording_start_utc_ns=recording_start_utc_ns)
