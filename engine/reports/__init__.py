"""Report readers: nsys (.nsys-rep, .sqlite) and PyTorch (Kineto) traces into pandas tables."""

from __future__ import annotations

from engine.reports.base import TABLES, Trace
from engine.reports.open import open_report, sniff_kind

__all__ = ["TABLES", "Trace", "open_report", "sniff_kind"]
