"""Wait per rank per step, for a heat map: the straggler first, the ranks that wait most, the rest folded.

    grid = wait_grid(result)     # grid.wait_ns[row, column]: rank grid.ranks[row], step grid.steps[column]
    grid.folded(shown=8)         # the first rows, and the median of the others as one row

Columns are the steady steps lined up across ranks on the job's clock (the straggler's verdict is
measured in the same steps, :class:`engine.analysis.ranks.straggler.Aligned`); a cell is the rank's
exposed wait in that step (the time it waited for another rank with nothing else to run, the table's
'exposed' column per step).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from engine.analysis.ranks.straggler import Aligned

if TYPE_CHECKING:
    import numpy.typing as npt

    from engine.analysis.ranks.model import RanksResult

#: rows a view shows before it folds the others into one
SHOWN = 8


@dataclass(frozen=True)
class WaitGrid:
    """Exposed wait (ns) per rank (row) per lined-up steady step (column), rows in reading order.

    Attributes:
        ranks: The rank of each row: the straggler first (if any), then by mean wait, most first.
        steps: The first rank's step number of each column.
        wait_ns: rows x columns.
        mean_ns: Each row's mean over the columns.
    """

    ranks: tuple[int, ...]
    steps: npt.NDArray[np.int64]
    wait_ns: npt.NDArray[np.int64]
    mean_ns: npt.NDArray[np.int64]

    def folded(self, shown: int = SHOWN) -> tuple[list[str], npt.NDArray[np.int64]]:
        """(row labels, rows) with the rows past ``shown`` as one row: their median per step."""
        labels = [f"rank {r}" for r in self.ranks]
        if len(self.ranks) <= shown + 1:
            return labels, self.wait_ns
        rest = self.wait_ns[shown:]
        median = np.median(rest, axis=0).astype(np.int64)[None, :]
        return (labels[:shown] + [f"{len(rest)} more ranks (median)"],
                np.concatenate([self.wait_ns[:shown], median], axis=0))


def wait_grid(res: RanksResult) -> WaitGrid | None:
    """The grid of a job (None without two ranks or steps that line up)."""
    rows = list(res.ranks)
    if len(rows) < 2:
        return None
    lined = Aligned(rows)
    if not len(lined):
        return None
    wait = lined.values("exposed_wait_ns").T  # ranks x steps
    mean = wait.mean(axis=1)
    strag = res.straggler.rank if res.straggler is not None else None
    order = sorted(range(len(rows)), key=lambda j: (lined.ranks[j] != strag, -mean[j], lined.ranks[j]))
    return WaitGrid(tuple(lined.ranks[j] for j in order), lined.step_numbers(), wait[order],
                    np.round(mean[order]).astype(np.int64))
