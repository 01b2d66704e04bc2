"""The list of views: one :class:`ViewSpec` per tab, in tab order, and what each view needs.

The window imports a view's module only when the views are first built, so this file stays cheap to
import (the entry point reads it for ``--view`` choices). See :mod:`gui.views.base` for the hooks.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ViewSpec:
    """One tab of the main window and what its view needs.

    Attributes:
        key: The name used by ``--view`` and the View menu.
        title: The tab's title.
        module: Where the class lives (imported when the views are first built).
        cls: The class name in ``module``.
        needs_report: Shown only with a report open (Telemetry and Run work without one).
        needs_summary: Shows the report's summary, so the window computes it at once while this view
            is on screen (other views get their own work done first).
        needs_ncu: Shows Nsight Compute results; another kind of report gets a sentence saying so.
        links: The views this one can send the user to (``sig_link``).
    """

    key: str
    title: str
    module: str
    cls: str
    needs_report: bool = True
    needs_summary: bool = False
    needs_ncu: bool = False
    links: tuple[str, ...] = ()


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
