"""The list of views: one :class:`~gui.views.base.ViewSpec` per tab, in tab order.

The window imports a view's module only when the views are first built, so this file stays cheap to
import (the entry point reads it for ``--view`` choices). See :mod:`gui.views.base` for the hooks.
"""

from __future__ import annotations

from gui.views.base import ViewSpec

#: tab order; the first nine get Ctrl+1 ... Ctrl+9 (Info, the last, is in the View menu)
VIEW_SPECS: tuple[ViewSpec, ...] = (
    ViewSpec("summary", "Summary", "gui.views.summary_view", "SummaryView", needs_summary=True),
    ViewSpec("timeline", "Timeline", "gui.views.timeline_view", "TimelineView", links=("kernels",)),
    ViewSpec("stats", "Statistics", "gui.views.stats_view", "StatsView"),
    ViewSpec("bandwidth", "Bandwidth", "gui.views.bandwidth_view", "BandwidthView"),
    ViewSpec("kernels", "Kernels", "gui.views.kernels_view", "KernelsView", needs_ncu=True),
    ViewSpec("roofline", "Roofline", "gui.views.roofline_view", "RooflineView", needs_ncu=True),
    ViewSpec("findings", "Findings", "gui.views.walkthrough_view", "WalkthroughView", needs_summary=True),
    ViewSpec("telemetry", "Telemetry", "gui.views.telemetry_view", "TelemetryView", needs_report=False),
    ViewSpec("run", "Run", "gui.views.run_view", "RunView", needs_report=False),
    ViewSpec("ranks", "Ranks", "gui.views.ranks_view", "RanksView", links=("timeline",)),
    ViewSpec("pytorch", "PyTorch", "gui.views.pytorch_view", "PytorchView", links=("timeline",)),
    ViewSpec("info", "Info", "gui.views.info_view", "InfoView", needs_summary=True),
)


def view_keys() -> tuple[str, ...]:
    """The view keys in tab order."""
    return tuple(s.key for s in VIEW_SPECS)


def spec(key: str) -> ViewSpec:
    """The spec of one view; KeyError naming the choices when unknown."""
    for s in VIEW_SPECS:
        if s.key == key:
            return s
    raise KeyError(f"unknown view {key!r}; choose one of {', '.join(view_keys())}")


__all__ = ["VIEW_SPECS", "ViewSpec", "spec", "view_keys"]
