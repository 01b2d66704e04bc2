"""A report rendered as text (``nsys stats`` CSV, an aligned table or JSON), chunk by chunk."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import BinaryIO

from engine.analysis.nsys.stats.catalog import COLUMNS


class RenderedReport:
    """A report's text and row count; what :func:`engine.analysis.nsys.stats.run` gives for text formats.

    ``chunks()`` yields the UTF-8 text (header first) a bounded number of rows at a time, so a
    10M-kernel ``cuda_gpu_trace`` (several GB of CSV) is written to its file without ever being
    held whole; ``text`` joins the chunks (for small reports and the result cache).
    """

    def __init__(self, report: str, rows: int, chunks: Callable[[], Iterator[bytes]]) -> None:
        self.report, self.rows, self._chunks = report, rows, chunks
        self.columns = COLUMNS[report]

    @classmethod
    def of_text(cls, report: str, rows: int, text: str) -> RenderedReport:
        """A report whose text is already whole."""
        data = text.encode("utf-8")
        return cls(report, rows, lambda: iter((data,)))

    @property
    def empty(self) -> bool:
        """True when the report has no rows."""
        return self.rows == 0

    def __len__(self) -> int:
        return self.rows

    def chunks(self) -> Iterator[bytes]:
        """The text in pieces of at most ~131k rows (nothing when there are no rows)."""
        if self.rows:
            yield from self._chunks()

    @property
    def text(self) -> str:
        """The whole text."""
        return b"".join(self.chunks()).decode("utf-8")

    def write_to(self, fh: BinaryIO) -> None:
        """Write the text to a binary file, chunk by chunk."""
        for chunk in self.chunks():
            fh.write(chunk)
