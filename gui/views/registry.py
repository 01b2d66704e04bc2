"""The list of views: key, tab title, where the class lives, and whether it needs an open report.

One line per view. The window imports a view's module only when the views are first built, so
this file stays cheap to import (the entry point reads it for ``--view`` choices).

A view class is built as ``cls(reports)`` with the window's :class:`gui.documents.OpenReports`.
Optional hooks the window and ``--screenshot`` use when a view has them:

- ``sig_message(str)``: a line for the log panel;
- ``is_busy() -> bool`` and ``sig_ready`` (or ``sig_table_ready``): the screenshot waits for it while busy;
- ``shutdown()``: stop background work before the window closes.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ViewSpec:
    """One tab of the main window."""

    key: str
    title: str
    module: str
    cls: str
    needs_report: bool = True


#: tab order; the first nine get Ctrl+1 ... Ctrl+9 (Info, the last, is in the View menu)
VIEW_SPECS: tuple[ViewSpec, ...] = (
    ViewSpec("summary", "Summary", "gui.views.summary_view", "SummaryView"),
    ViewSpec("timeline", "Timeline", "gui.views.timeline_view", "TimelineView"),
    ViewSpec("stats", "Statistics", "gui.views.stats_view", "StatsView"),
    ViewSpec("bandwidth", "Bandwidth", "gui.views.bandwidth_view", "BandwidthView"),
    ViewSpec("kernels", "Kernels", "gui.views.kernels_view", "KernelsView"),
    ViewSpec("roofline", "Roofline", "gui.views.roofline_view", "RooflineView"),
    ViewSpec("findings", "Findings", "gui.views.walkthrough_view", "WalkthroughView"),
    ViewSpec("telemetry", "Telemetry", "gui.views.telemetry_view", "TelemetryView", needs_report=False),
    ViewSpec("run", "Run", "gui.views.run_view", "RunView", needs_report=False),
    ViewSpec("info", "Info", "gui.views.info_view", "InfoView"),
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
