"""Eliding names so the part that tells them apart stays visible.

Kernel names share long prefixes and suffixes ("sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize…
_execute_kernel__5x_cublas"): cut in the middle, two different kernels read the same. Here each
name keeps its start, its end and the stretch where it differs from the names most like it (its
neighbours in sorted order, forwards and backwards), with "…" for what is left out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QSortFilterProxyModel, Qt
from PySide6.QtWidgets import QStyle, QStyledItemDelegate, QStyleOptionViewItem, QWidget

ELLIPSIS = "…"
#: characters of context kept before and after the differing stretch
CONTEXT = 3


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def distinguishing_spans(names: Sequence[str]) -> list[tuple[int, int]]:
    """For each name, the (start, end) of the stretch where it differs from the names most like it.

    The start is past the longest prefix it shares with another name, the end before the longest
    shared suffix (a few characters of context kept on each side). A name unlike every other one
    gets an empty stretch at its middle.
    """
    distinct = sorted(set(names))
    prefix: dict[str, int] = {}
    for a, b in zip(distinct, distinct[1:], strict=False):
        n = _common_prefix(a, b)
        prefix[a] = max(prefix.get(a, 0), n)
        prefix[b] = max(prefix.get(b, 0), n)
    backwards = sorted(distinct, key=lambda s: s[::-1])
    suffix: dict[str, int] = {}
    for a, b in zip(backwards, backwards[1:], strict=False):
        n = _common_prefix(a[::-1], b[::-1])
        suffix[a] = max(suffix.get(a, 0), n)
        suffix[b] = max(suffix.get(b, 0), n)
    out = []
    for name in names:
        lo, hi = prefix.get(name, 0), len(name) - suffix.get(name, 0)
        if lo >= hi:  # one name is the other's prefix or suffix: the difference is at that edge
            lo, hi = min(lo, hi), max(lo, hi)
        if lo == 0 and hi == len(name):  # nothing shared: keep the middle cut
            lo = hi = len(name) // 2
        out.append((max(0, lo - CONTEXT), min(len(name), hi + CONTEXT)))
    return out


def elide_keeping(text: str, span: tuple[int, int], chars: int) -> str:
    """``text`` in about ``chars`` characters, keeping ``span`` from its start, then both ends.

    A span longer than the room keeps its start (where the name begins to differ); what is left
    goes to the name's start and end, "…" marking each cut.
    """
    n = len(text)
    if n <= chars:
        return text
    lo, hi = span
    hi = lo + min(hi - lo, max(chars - 2, 1))
    rest = max(chars - (hi - lo) - 2, 0)  # for the two ends, "…" on each side
    head = min(lo, (rest + 1) // 2)
    tail = min(n - hi, rest - head)
    head = min(lo, rest - tail)  # the end's unused share goes back to the start
    return "".join((text[:head], ELLIPSIS if head < lo else "", text[lo:hi],
                    ELLIPSIS if hi < n - tail else "", text[n - tail:] if tail else ""))


def fit_text(text: str, span: tuple[int, int], width: int, advance: Callable[[str], int]) -> str:
    """The longest :func:`elide_keeping` of ``text`` whose width (``advance``) is at most ``width``."""
    if advance(text) <= width:
        return text
    lo, hi = 1, len(text)
    best = elide_keeping(text, span, 1)
    while lo <= hi:
        mid = (lo + hi) // 2
        cand = elide_keeping(text, span, mid)
        if advance(cand) <= width:
            best, lo = cand, mid + 1
        else:
            hi = mid - 1
    return best


class DistinctElideDelegate(QStyledItemDelegate):
    """Draws one column's names elided by :func:`fit_text`, so similar names stay told apart.

    The spans are computed from every name of the column (of the source model), again whenever
    the model is reset.
    """

    def __init__(self, column_texts: Callable[[], list[str]], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._texts = column_texts
        self._spans: dict[str, tuple[int, int]] | None = None

    def reset(self) -> None:
        """Forget the spans (the model shows other rows)."""
        self._spans = None

    def span(self, text: str) -> tuple[int, int]:
        if self._spans is None:
            names = self._texts()
            self._spans = dict(zip(names, distinguishing_spans(names), strict=True))
        return self._spans.get(text, (len(text) // 2, len(text) // 2))

    def shown_text(self, index: QModelIndex | QPersistentModelIndex, width: int, advance: Callable[[str], int]
                   ) -> str:
        """What the cell at ``index`` shows in ``width`` pixels."""
        text = str(index.data() or "")
        return fit_text(text, self.span(text), width, advance)

    def initStyleOption(self, option: QStyleOptionViewItem, index: Any) -> None:  # noqa: N802 - Qt's name
        super().initStyleOption(option, index)
        margin = option.widget.style().pixelMetric(QStyle.PixelMetric.PM_FocusFrameHMargin) + 1 \
            if option.widget is not None else 3
        width = option.rect.width() - 2 * margin
        text = self.shown_text(index, width, option.fontMetrics.horizontalAdvance)
        option.text = text  # type: ignore[attr-defined]  # PySide6 exposes it as an attribute
        option.textElideMode = Qt.TextElideMode.ElideNone  # type: ignore[attr-defined]


def source_column(proxy: QSortFilterProxyModel, column: int) -> Callable[[], list[str]]:
    """A function returning every display text of ``column`` in the proxy's source model."""
    def texts() -> list[str]:
        model = proxy.sourceModel()
        return [str(model.index(r, column).data() or "") for r in range(model.rowCount())]
    return texts
