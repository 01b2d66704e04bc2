"""A PyTorch (Kineto) trace's timeline lanes kept on disk: a second open loads them instead of building.

On the 1 GB Kineto trace (165k kernels, 235k CUDA API calls) :func:`gui.timeline.model.build_model`
reads five tables into pandas and sorts, groups and merges their events: about 0.5 CPU s, a third
of the window's second open. The lanes, names, colours and launch order are pickled in the report's
cache entry (:mod:`engine.analysis.pytorch.pickle_store`: the file's and the engine's identity, plus
the stamp of the timeline's own code here); the tables a tooltip or a click reads a row of are not
kept: the model reads them from the trace when first asked (:attr:`TimelineModel.row_source`).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gui.timeline import model as tm

#: the modules whose classes are pickled (a change to one of them keeps a new copy)
_CODE = ("model.py", "sparse.py", "kept_model.py")


def _code_stamp() -> str:
    here = Path(__file__).parent
    parts = []
    for name in _CODE:
        st = (here / name).stat()
        parts.append(f"{name}:{st.st_mtime_ns}:{st.st_size}")
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:12]


def row_reader(trace: Any) -> Callable[[str, int], dict[str, Any]]:
    """A row of one of the timeline's tables as a dict, the table read from ``trace`` when first asked."""

    def row(table: str, i: int) -> dict[str, Any]:
        frame = trace.table(table, columns=tm.COLUMNS[table])
        return {k: tm._py(v) for k, v in frame.iloc[i].items()}

    return row


def kept_model(trace: Any, build: Callable[[], tm.TimelineModel]) -> tm.TimelineModel:
    """``build()``'s model of ``trace``, kept on disk (without its tables) for the next open."""
    from engine.analysis.pytorch.pickle_store import on_disk

    def lanes_only() -> tm.TimelineModel:
        return dataclasses.replace(build(), tables={}, row_source=None, launch_of=None)

    model: tm.TimelineModel = on_disk(trace, f"timeline-{_code_stamp()}", lanes_only, tm.TimelineModel)
    model.row_source = row_reader(trace)
    return model


def timeline_model(trace: Any, cancel: Any = None) -> tm.TimelineModel:
    """The timeline of ``trace`` (:func:`gui.timeline.model.build_model`), a Kineto trace's kept on disk.

    Runs in a worker thread; ``cancel`` as for ``build_model``.
    """
    if getattr(getattr(trace, "info", None), "kind", None) == "kineto":
        return kept_model(trace, lambda: tm.build_model(trace, cancel))
    return tm.build_model(trace, cancel)
