"""An Nsight Compute report seen through the :class:`Trace` interface, for windows that list reports.

An ncu report has no timeline: its kernels were replayed one at a time, so there are no start/end
times, API calls or copies. :class:`NcuTrace` holds the :class:`~engine.reports.ncu.NcuReport`
(``trace.ncu``) and answers every timeline table as "not applicable" with a sentence that points
to the Kernels view; only ``gpus`` is filled, from the device the kernels ran on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.reports.base import TABLES, ReportInfo, Trace

if TYPE_CHECKING:
    import pandas as pd

    from engine.reports.ncu.model import NcuReport

#: ``ReportInfo.kind`` of every Nsight Compute report (``.ncu-rep`` or CSV export).
NCU_KIND = "ncu"

NOT_A_TIMELINE = (
    "this is an Nsight Compute report (kernels profiled one at a time, no timeline); "
    "see the Kernels and Roofline views"
)


class NcuTrace(Trace):
    """A :class:`Trace` wrapper around an :class:`NcuReport`; its kernels are in ``self.ncu``."""

    def __init__(self, report: NcuReport) -> None:
        info = ReportInfo(path=report.path, kind=NCU_KIND)
        super().__init__(info)
        self.ncu = report
        info.product_version = "Nsight Compute"
        n = len(report.kernels)
        source = {"ncu-rep": ".ncu-rep", "csv-details": "CSV export (--page details)",
                  "csv-raw": "CSV export (--page raw)"}.get(report.source, report.source)
        info.notes.append(f"Nsight Compute {source}: {n} profiled kernel{'s' if n != 1 else ''}")
        info.notes.extend(report.notes)
        self.not_applicable = frozenset(t for t in TABLES if t != "gpus")
        for name in self.not_applicable:
            self._mark_missing(name, NOT_A_TIMELINE)

    def _load(self, name: str, columns: list[str]) -> pd.DataFrame | None:
        if name != "gpus":
            return None
        import pandas as pd

        k = self.ncu.kernels
        if not len(k):
            return None
        first = k.iloc[0]
        cc = str(first.get("CC") or "")
        major, _, minor = cc.partition(".")
        row: dict[str, Any] = {c: None for c in TABLES["gpus"][0]}
        row.update({
            "id": int(first["Device"]) if str(first["Device"]).isdigit() else 0,
            "name": str(first["Device Name"]) or None,
            "computeMajor": int(major) if major.isdigit() else None,
            "computeMinor": int(minor) if minor.isdigit() else None,
        })
        if self.ncu.source != "csv-details":  # a details export has no device attributes
            kid = int(first["ID"])

            def attr(name: str, scale: float = 1.0) -> int | None:
                v = self.ncu.value(kid, name)  # no raw page needed: a .ncu-rep decodes it lazily
                return None if v is None else int(v * scale)  # None: not collected

            row["smCount"] = attr("device__attribute_multiprocessor_count")
            row["l2CacheSize"] = attr("device__attribute_l2_cache_size")
            row["clockRate"] = attr("device__attribute_clock_rate", 1e3)  # ncu prints kHz
            raw = self.ncu.raw if self.ncu.source == "csv-raw" else None  # .ncu-rep: kernels has it
            if not row["name"] and raw is not None and "device__attribute_display_name" in raw.columns:
                row["name"] = str(raw["device__attribute_display_name"].iloc[0]) or None
        return pd.DataFrame([row])


def is_ncu(trace: object) -> bool:
    """True when ``trace`` is an Nsight Compute report (it has no timeline tables)."""
    return isinstance(trace, NcuTrace)
