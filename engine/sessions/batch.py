"""Many reports at once: one task per report (or per job, for ``ranks``) on Dask, one table back.

    table = run_batch("summary", paths, workers=4)                      # local worker processes
    table = run_batch("ranks", paths, scheduler="tcp://10.0.0.5:8786")  # an existing cluster
    table = run_batch("stats", paths, workers=0)                        # in this process, no Dask

Workers open the reports where they lie (only paths travel to them, only rows come back), so the
reports must be readable under the same paths on every worker. A report that cannot be read becomes
a row with its ``error`` sentence. Rows come back in the order of the reports, so the same reports
give the same table whatever the cluster.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.system.errors import KernelscopeError, ToolMissingError

if TYPE_CHECKING:
    import pandas as pd

KINDS = ("summary", "stats", "findings", "ranks")
#: the ``stats`` table a batch collects (one row per kernel name per report)
DEFAULT_STATS_REPORT = "cuda_gpu_kern_sum"
#: ``train_rank3`` or ``train_rank3_kineto``: the job is the name without the rank number
_RANK_FILE = re.compile(r"^(?P<job>.*)_rank\d+(?P<tail>(_[A-Za-z]\w*)?)$", re.IGNORECASE)
_SUFFIXES = (".nsys-rep", ".sqlite", ".json.gz", ".json", ".ncu-rep")
OnProgress = Callable[[int, int, str], None]


class BatchError(KernelscopeError):
    """A batch cannot start (no reports, no Dask, no scheduler)."""


def _stem(path: str) -> str:
    name = Path(path).name
    for s in _SUFFIXES:
        if name.endswith(s):
            return name[: -len(s)]
    return Path(path).stem


def jobs_of(paths: Sequence[str]) -> list[list[str]]:
    """Group reports into jobs for ``ranks``: ``NAME_rank<N>`` files of one folder are one job.

    The .sqlite export beside an .nsys-rep of the same name is the same recording: only one is kept
    (the .sqlite, which needs no nsys). Any other report is a job on its own.
    """
    chosen: dict[tuple[str, str], str] = {}
    for p in paths:
        key = (str(Path(p).parent), _stem(p))
        if key not in chosen or str(p).endswith(".sqlite"):
            chosen[key] = str(p)
    groups: dict[tuple[str, str], list[str]] = {}
    for (folder, stem), p in chosen.items():
        m = _RANK_FILE.match(stem)
        groups.setdefault((folder, m.group("job") + m.group("tail") if m else "\0" + stem), []).append(p)
    return [sorted(g, key=lambda q: [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", q)])
            for g in groups.values()]


def reports_in(folder: str | Path) -> list[str]:
    """The reports in a folder (not below it), one per recording (.sqlite over its .nsys-rep), rank order."""
    try:
        names = [str(p) for p in Path(folder).iterdir() if p.is_file() and p.name.endswith(_SUFFIXES)
                 and not p.name.endswith(".ncu-rep")]
    except OSError:
        return []
    return [p for job in jobs_of(sorted(names)) for p in job]


def _clean(v: Any) -> Any:
    """A JSON- and Parquet-safe cell: numpy scalars to Python, NaN/inf to None."""
    if hasattr(v, "item") and not isinstance(v, (list, dict, str)):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def _summary_rows(path: str) -> list[dict[str, Any]]:
    from engine.analysis.findings.overview import overview
    from engine.reports.open import open_report

    # the summary and the findings of the same engine as `kernelscope findings` (the plain summary
    # carries none, which made this column 0 for every report)
    with open_report(path) as trace:
        s: Any
        s, found = overview(trace)
    doc = s.to_json() if hasattr(s, "to_json") else s
    it = doc.get("iterations") or {}
    return [{"report": path, "span_ns": doc["wall"]["span_ns"], "gpu_busy_ns": doc["gpu"]["busy_ns"],
             "gpu_idle_ns": doc["gpu"]["idle_ns"], "gpu_busy_pct": doc["gpu"]["busy_pct_of_wall"],
             "api_ns": doc["host"]["total_ns"], "api_calls": doc["host"]["calls"],
             "iterations": it.get("count"), "iteration_median_ns": it.get("median_ns"),
             "findings": len(found), "top_finding": found[0].id if found else None}]


def _stats_rows(path: str, report: str) -> list[dict[str, Any]]:
    from engine.analysis.nsys import stats
    from engine.reports.open import open_report

    with open_report(path) as trace:
        frame = stats.run(trace, report, "frame")
        if not len(frame):
            why = "; ".join(trace.missing.values()) or "the report has no matching rows"
            return [{"report": path, "note": f"{report}: no rows ({why})"}]
    return [{"report": path, **{str(k): v for k, v in rec.items()}} for rec in frame.to_dict("records")]


def _findings_rows(path: str) -> list[dict[str, Any]]:
    from engine.analysis.findings import findings_for

    out = []
    for f in findings_for(path):
        d = f.to_dict()
        out.append({"report": path, **{k: v for k, v in d.items() if not isinstance(v, (list, dict))}})
    return out


def read_rank_task(path: str) -> Any:
    """One report's ranks, read on a worker for a ``ranks`` job (store.read_ranks; kept in its cache).

    A report that cannot be read comes back as its sentence.
    """
    from engine.analysis.ranks.store import read_ranks

    try:
        return read_ranks(path)
    except KernelscopeError as exc:
        return str(exc)


def _ranks_rows(paths: list[str], inputs: list[Any] | None = None) -> list[dict[str, Any]]:
    from engine.analysis.ranks import analyze_paths

    for got in inputs or []:
        if isinstance(got, str):
            raise KernelscopeError(got)
    res = analyze_paths(paths, inputs=inputs)
    s = res.straggler
    job = paths[0] if len(paths) == 1 else str(Path(paths[0]).parent / _job_name(paths[0]))
    rows = []
    for r in res.ranks:
        d = r.to_json()
        d.pop("per_step")
        n = max(1, len(r.counted_steps))
        rows.append({"job": job, **d, "nccl_wait_per_step_ns": r.nccl_wait_ns // n,
                     "host_per_step_ns": r.host_ns // n,
                     "straggler": s is not None and s.rank == r.rank,
                     "straggler_wait_per_step_ns": s.wait_per_step_ns if s is not None else None})
    return rows


def _job_name(path: str) -> str:
    m = _RANK_FILE.match(_stem(path))
    return m.group("job") + m.group("tail") if m else _stem(path)


def run_task(kind: str, paths: list[str], stats_report: str = DEFAULT_STATS_REPORT,
             inputs: list[Any] | None = None) -> list[dict[str, Any]]:
    """One task (runs on a worker): the rows of one report (one job for ``ranks``).

    ``inputs``: for ``ranks``, each report's ranks as other tasks read them (:func:`read_rank_task`).
    Never raises for a bad report: it returns one row with the report and its ``error`` sentence.
    """
    try:
        if kind == "summary":
            rows = _summary_rows(paths[0])
        elif kind == "stats":
            rows = _stats_rows(paths[0], stats_report)
        elif kind == "findings":
            rows = _findings_rows(paths[0])
        elif kind == "ranks":
            rows = _ranks_rows(paths, inputs)
        else:
            raise BatchError(f"Unknown batch analysis {kind!r}; use one of {', '.join(KINDS)}.")
    except KernelscopeError as exc:
        return [{"report": ", ".join(paths), "error": str(exc)}]
    except Exception as exc:  # noqa: BLE001 - one bad report must not end a batch of hundreds
        why = f"{type(exc).__name__}: {exc}"
        return [{"report": ", ".join(paths), "error": f"Kernelscope failed on this report ({why}); run the "
                 "single-report command with --debug for details."}]
    if not rows:
        rows = [{"report": ", ".join(paths)}]
    return [{k: _clean(v) for k, v in r.items()} for r in rows]


def _distributed() -> Any:
    """The ``distributed`` module (untyped: used through Any), or a sentence saying how to install it."""
    import importlib

    try:
        return importlib.import_module("distributed")
    except ImportError as exc:
        raise ToolMissingError("kernelscope batch needs Dask: pip install 'kernelscope[multi]' (or "
                               "'dask[distributed]'); or run with --workers 0 to use no Dask.") from exc


def _client(workers: int | None, scheduler: str | None, scheduler_file: str | None) -> tuple[Any, Any]:
    """A Dask client (and the LocalCluster it owns, if any)."""
    dist = _distributed()
    Client, LocalCluster = dist.Client, dist.LocalCluster
    try:
        if scheduler:
            return Client(scheduler, timeout="20s"), None
        if scheduler_file:
            return Client(scheduler_file=scheduler_file, timeout="20s"), None
        # local only: listen on loopback, dashboard on any free port (never the user's :8787)
        cluster = LocalCluster(n_workers=workers or 2, threads_per_worker=1, processes=True,
                               host="127.0.0.1", dashboard_address=":0")
        return Client(cluster), cluster
    except (OSError, TimeoutError, ValueError) as exc:
        where = scheduler or scheduler_file or "a local cluster"
        raise BatchError(f"Could not connect to the Dask scheduler at {where} ({exc}); check that it runs "
                         "and the address (tcp://HOST:8786) or --scheduler-file is right.") from exc


def run_batch(kind: str, paths: Sequence[str | Path], *, workers: int | None = None,
              scheduler: str | None = None, scheduler_file: str | None = None,
              stats_report: str = DEFAULT_STATS_REPORT, on_progress: OnProgress | None = None,
              cancel: threading.Event | None = None) -> pd.DataFrame:
    """Run one analysis over many reports and return one table (report × row, rank for ``ranks``).

    Args:
        kind: ``summary``, ``stats``, ``findings`` or ``ranks``.
        paths: The reports (for ``ranks``, per-rank reports of a job are grouped by name).
        workers: Local worker processes (default 2); 0 runs every task in this process, without Dask.
        scheduler: Address of an existing Dask scheduler (``tcp://host:8786``).
        scheduler_file: A Dask scheduler file (dask-jobqueue, ``dask scheduler --scheduler-file``).
        stats_report: For ``stats``: which nsys stats report.
        on_progress: Called with (done, total, report) as tasks finish.
        cancel: Set it to cancel the tasks not finished yet (raises BatchError).

    Raises:
        BatchError: unknown kind, no reports, no scheduler, or cancelled.
    """
    import pandas as pd

    if kind not in KINDS:
        raise BatchError(f"Unknown batch analysis {kind!r}; use one of {', '.join(KINDS)}.")
    names = [str(Path(p).expanduser()) for p in paths]
    if not names:
        raise BatchError("No reports were given; pass report files (a shell glob works: runs/*.sqlite).")
    tasks = jobs_of(names) if kind == "ranks" else [[p] for p in names]
    cancel = cancel or threading.Event()
    results: list[list[dict[str, Any]] | None] = [None] * len(tasks)
    if workers == 0 and not scheduler and not scheduler_file:
        for i, t in enumerate(tasks):
            if cancel.is_set():
                raise BatchError(f"Cancelled after {i} of {len(tasks)} reports.")
            results[i] = run_task(kind, t, stats_report)
            if on_progress:
                on_progress(i + 1, len(tasks), ", ".join(t))
    else:
        _run_dask(kind, tasks, results, workers, scheduler, scheduler_file, stats_report, on_progress, cancel)
    rows = [r for part in results for r in (part or [])]
    df = pd.DataFrame.from_records(rows)
    for col in df.columns:  # an error row must not turn integer columns into floats
        values = [v for v in df[col] if v is not None and not (isinstance(v, float) and math.isnan(v))]
        if values and all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            df[col] = df[col].astype("Int64")
    return df


def _run_dask(kind: str, tasks: list[list[str]], results: list[list[dict[str, Any]] | None],
              workers: int | None, scheduler: str | None, scheduler_file: str | None, stats_report: str,
              on_progress: OnProgress | None, cancel: threading.Event) -> None:
    as_completed = _distributed().as_completed
    client, cluster = _client(workers, scheduler, scheduler_file)
    try:
        # a job's reports are read by tasks of their own (spread over the workers), then lined up
        reads = [[client.submit(read_rank_task, p, pure=False) for p in t] if kind == "ranks" and len(t) > 1
                 else None for t in tasks]
        futures = [client.submit(run_task, kind, t, stats_report, r, pure=False) for t, r in zip(tasks, reads,
                                                                                                   strict=True)]
        index = {f.key: i for i, f in enumerate(futures)}
        done = 0
        pending = as_completed(futures)
        while True:
            if cancel.is_set() and done < len(tasks):
                client.cancel(futures)
                raise BatchError(f"Cancelled after {done} of {len(tasks)} reports; the remaining tasks were "
                                 "cancelled on the cluster.")
            batch = pending.next_batch(block=False)
            if not batch:
                if pending.is_empty():
                    break
                cancel.wait(0.05)
                continue
            for fut in batch:
                i = index[fut.key]
                try:
                    results[i] = fut.result()
                except Exception as exc:  # noqa: BLE001 - a worker died: that report's row says so
                    results[i] = [{"report": ", ".join(tasks[i]),
                                   "error": f"The Dask task failed ({type(exc).__name__}: {exc})."}]
                done += 1
                if on_progress:
                    on_progress(done, len(tasks), ", ".join(tasks[i]))
    except KeyboardInterrupt:
        client.cancel(futures)
        raise
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
