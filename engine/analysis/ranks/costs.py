"""Where each step of one rank went: the NCCL / compute / idle partition, then its waits for the others.

The partition needs only the rank's own tables (:func:`local_costs`, run where the rank is read, and
cached with it); the waits need the job's collectives (:func:`step_costs`, once they are matched).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from engine.analysis.ranks.model import StepCosts
from engine.analysis.steps import merged

if TYPE_CHECKING:
    import numpy.typing as npt

    from engine.analysis.ranks.load import RankInput

I64 = np.int64


class Blocks:
    """Sorted disjoint intervals with prefix sums: covered length inside any window in O(log n)."""

    def __init__(self, starts: npt.NDArray[np.int64], ends: npt.NDArray[np.int64]) -> None:
        self.s, self.e = merged(np.asarray(starts, dtype=I64), np.asarray(ends, dtype=I64))
        self.cum = np.concatenate([[0], np.cumsum(self.e - self.s)]).astype(I64)

    def covered(self, lo: npt.NDArray[np.int64], hi: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Covered length inside each window [lo[k], hi[k]) (vectorised)."""
        lo, hi = np.asarray(lo, dtype=I64), np.asarray(hi, dtype=I64)
        out = np.zeros(len(lo), dtype=I64)
        if not len(self.s) or not len(lo):
            return out
        i = np.searchsorted(self.e, lo, side="right")  # first block ending after lo
        j = np.searchsorted(self.s, hi, side="left")  # blocks starting before hi
        ok = (j > i) & (hi > lo)
        i, j, lo_ok, hi_ok = i[ok], j[ok], lo[ok], hi[ok]
        total = self.cum[j] - self.cum[i]
        total -= np.maximum(0, lo_ok - self.s[i])
        total -= np.maximum(0, self.e[j - 1] - hi_ok)
        out[ok] = total
        return out


def clipped_to(starts: npt.NDArray[np.int64], ends: npt.NDArray[np.int64], within_s: npt.NDArray[np.int64],
               within_e: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Sorted disjoint blocks cut to where they meet other sorted disjoint blocks (their intersection)."""
    if not len(starts) or not len(within_s):
        z = np.zeros(0, dtype=I64)
        return z, z
    # each block against the ``within`` blocks it overlaps: few per block for kernels vs NCCL kernels
    lo = np.searchsorted(within_e, starts, side="right")
    hi = np.searchsorted(within_s, ends, side="left")
    n = np.maximum(hi - lo, 0)
    owner = np.repeat(np.arange(len(starts)), n)
    j = np.repeat(lo, n) + (np.arange(n.sum()) - np.repeat(np.cumsum(n) - n, n))
    s = np.maximum(starts[owner], within_s[j])
    e = np.minimum(ends[owner], within_e[j])
    keep = e > s
    return s[keep].astype(I64), e[keep].astype(I64)


def cat(*pairs: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]) -> Blocks:
    """The union of several interval lists as :class:`Blocks`."""
    return Blocks(np.concatenate([p[0] for p in pairs]), np.concatenate([p[1] for p in pairs]))


@dataclass
class LocalCosts:
    """Per step of one rank, what needs no other rank (ns, on the clock the rank was read on).

    Attributes:
        busy: GPU busy (any kernel, copy or memset).
        nccl: an NCCL kernel runs.
        compute: non-NCCL GPU work runs (overlap with NCCL included).
        host: GPU idle while the launching thread is outside any CUDA call.
    """

    busy: npt.NDArray[np.int64]
    nccl: npt.NDArray[np.int64]
    compute: npt.NDArray[np.int64]
    host: npt.NDArray[np.int64]


def windows(r: RankInput) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64],
                                   npt.NDArray[np.bool_]]:
    """The rank's steps (index, start, end, warm-up), or its whole capture as one step without steps."""
    if r.steps is not None and r.steps.count:
        sl = r.steps.steps
        return (np.asarray(sl.indices, dtype=I64), np.asarray(sl.starts, dtype=I64),
                np.asarray(sl.ends, dtype=I64), np.asarray(sl.warmup, dtype=bool))
    every = np.concatenate([r.compute_start, r.nccl_start])
    ends = np.concatenate([r.compute_end, r.nccl_end])
    if not len(every):
        z = np.zeros(0, dtype=I64)
        return z, z, z, np.zeros(0, dtype=bool)
    return (np.zeros(1, dtype=I64), np.array([every.min()], dtype=I64), np.array([ends.max()], dtype=I64),
            np.zeros(1, dtype=bool))


def local_costs(r: RankInput) -> LocalCosts:
    """The partition of each step: GPU busy, NCCL, compute and host time (see :class:`LocalCosts`)."""
    comp = (r.compute_start, r.compute_end)
    nccl = (r.nccl_start, r.nccl_end)
    _, lo, hi, _ = windows(r)
    return LocalCosts(busy=cat(comp, nccl).covered(lo, hi), nccl=Blocks(*nccl).covered(lo, hi),
                      compute=Blocks(*comp).covered(lo, hi),
                      host=(hi - lo) - cat(comp, nccl, (r.api_start, r.api_end)).covered(lo, hi))


def step_costs(r: RankInput, local: LocalCosts, wait_start: npt.NDArray[np.int64],
               wait_ns: npt.NDArray[np.int64], shift: int) -> StepCosts:
    """Per step of one rank: the partition, its waits and host time, on the job's clock (``+ shift``).

    ``wait_start`` / ``wait_ns``: each of its NCCL kernels' start (on the rank's clock) and wait for
    the last rank. A step's wait is the union of those waits inside it (collectives that wait at the
    same time count once), so it is within the step's NCCL time and the step; its exposed wait is the
    part of that union with no other GPU work.
    """
    index, lo, hi, warm = windows(r)
    span = hi - lo
    keep = wait_ns > 0
    ws = np.asarray(wait_start, dtype=I64)[keep]
    we = ws + np.asarray(wait_ns, dtype=I64)[keep]
    # the waits with no compute: the compute kept may be only where NCCL kernels run (store.slim)
    comp = (r.compute_start, r.compute_end)
    exposed = cat(comp, (ws, we)).covered(lo, hi) - Blocks(*comp).covered(lo, hi)
    wait = Blocks(ws, we).covered(lo, hi)
    return StepCosts({"index": index, "start_ns": lo + shift, "end_ns": hi + shift,
                      "compute_ns": local.busy - local.nccl, "nccl_ns": local.nccl, "nccl_wait_ns": wait,
                      "idle_ns": span - local.busy, "host_ns": local.host,
                      "overlap_ns": local.nccl + local.compute - local.busy, "warmup": warm,
                      "gpu_compute_ns": local.compute, "exposed_wait_ns": exposed})
