"""Which module each host range runs in, as arrays: the module view's and the findings' keys.

A module call's path is its label with the labels of the module calls around it, outermost first
(``("Net", "Block_0", "Linear_1")``); the distinct paths are numbered (a few hundred for a model),
and every range carries a number, not a tuple (10M ranges of a 4 GB trace).

- ``mod_of``: the innermost module call around a range (or the range itself), -1 for none;
- ``call_path``: a module call's path number (-1 for any other range);
- ``back``: a backward range's path: that of the module whose forward operator has its autograd
  sequence number, else the one of its operator parent when that is a backward range too (-1: none).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.analysis.pytorch.events import OP, TorchEvents
from engine.analysis.pytorch.nesting import depths, nearest_marked
from engine.analysis.tables import small_codes

if TYPE_CHECKING:
    import numpy.typing as npt


@dataclass
class ModulePaths:
    """The module keys of every host range (see the module docstring)."""

    mod_of: npt.NDArray[np.int64]
    call_path: npt.NDArray[np.int64]
    back: npt.NDArray[np.int64]
    paths: list[tuple[str, ...]]

    def forward_path(self, rows: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """The path number of the module call each range runs in (-1: none)."""
        m = self.mod_of[rows]
        return np.where(m >= 0, self.call_path[np.maximum(m, 0)], -1)


def enclosing(ev: TorchEvents, flags: npt.NDArray[np.bool_]) -> npt.NDArray[np.int64]:
    """For each range, itself when ``flags`` holds for it, else its nearest such ancestor (-1: none)."""
    if not ev.n:
        return np.zeros(0, dtype=np.int64)
    return np.where(flags, np.arange(ev.n, dtype=np.int64), nearest_marked(ev.parent, flags))


def module_paths(ev: TorchEvents, mods: npt.NDArray[np.bool_], label: Callable[[str], str]) -> ModulePaths:
    """The keys of every range, ``mods`` being the module calls and ``label`` a call's name to its label."""
    mod_of = enclosing(ev, mods)
    call_path, paths = _call_paths(ev, mods, mod_of, label)
    return ModulePaths(mod_of=mod_of, call_path=call_path, back=_backward(ev, mod_of, call_path),
                       paths=paths)


def _call_paths(ev: TorchEvents, mods: npt.NDArray[np.bool_], mod_of: npt.NDArray[np.int64],
                label: Callable[[str], str]) -> tuple[npt.NDArray[np.int64], list[tuple[str, ...]]]:
    """Each module call's path number, one level of module nesting at a time; the paths."""
    call_path = np.full(ev.n, -1, dtype=np.int64)
    paths: list[tuple[str, ...]] = []
    calls = np.flatnonzero(mods)
    if not len(calls):
        return call_path, paths
    p = ev.parent[calls]
    outer = np.where(p >= 0, mod_of[np.maximum(p, 0)], -1)
    up = np.full(ev.n, -1, dtype=np.int64)
    up[calls] = outer
    depth = depths(up)[calls]
    labels: dict[str, int] = {}
    label_of = np.array([labels.setdefault(label(t), len(labels)) for t in ev.names] or [0], dtype=np.int64)
    texts = list(labels)
    lab = label_of[ev.name[calls]]
    known: dict[tuple[int, int], int] = {}
    for d in range(int(depth.max()) + 1):
        rows = np.flatnonzero(depth == d)
        parent_path = np.where(outer[rows] >= 0, call_path[np.maximum(outer[rows], 0)], -1)
        key = (parent_path + 1) * len(texts) + lab[rows]
        uniq, inverse = np.unique(key, return_inverse=True)
        ids = np.empty(len(uniq), dtype=np.int64)
        for k, u in enumerate(uniq.tolist()):
            pair = (u // len(texts) - 1, u % len(texts))
            if pair not in known:
                known[pair] = len(paths)
                paths.append((paths[pair[0]] if pair[0] >= 0 else ()) + (texts[pair[1]],))
            ids[k] = known[pair]
        call_path[calls[rows]] = ids[inverse.reshape(-1)]
    return call_path, paths


def _backward(ev: TorchEvents, mod_of: npt.NDArray[np.int64], call_path: npt.NDArray[np.int64]) -> Any:
    """Each backward range's module path (see the module docstring), -1 for none."""
    out = np.full(ev.n, -1, dtype=np.int64)
    back = np.flatnonzero(ev.backward)
    if not len(back):
        return out
    fwd = np.flatnonzero((ev.cat == OP) & ~ev.backward & (ev.seq >= 0))
    fwd = fwd[mod_of[fwd] >= 0]
    seqs, first = np.unique(ev.seq[fwd], return_index=True)
    fwd_path = call_path[mod_of[fwd[first]]] if len(first) else np.zeros(0, dtype=np.int64)
    own = np.full(ev.n, -1, dtype=np.int64)
    if len(seqs):
        s = ev.seq[back]
        at = np.clip(np.searchsorted(seqs, s), 0, len(seqs) - 1)
        hit = (s >= 0) & (seqs[at] == s)
        own[back[hit]] = fwd_path[at[hit]]
    # no path of its own: its operator parent's, while that is a backward range
    stop = (own >= 0) | ~ev.backward
    src = np.where(stop, np.arange(ev.n, dtype=np.int64), nearest_marked(ev.op_parent, stop))
    got = np.where(src >= 0, own[np.maximum(src, 0)], -1)
    out[back] = got[back]
    return out


def groups(key: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[Any], Any]:
    """The distinct (non-negative) keys by first appearance, each item's group and each group's size."""
    group, uniq = small_codes(key)
    return uniq, group, np.bincount(group, minlength=len(uniq))
