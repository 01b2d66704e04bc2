"""The module view: host and GPU time per ``nn.Module``, as a tree, forward and backward apart.

Modules come from Kineto's ``with_modules`` events (``nn.Module: Block_0``) or, without them, from
``record_function`` / NVTX ranges. The forward pass's time is what runs inside a module's call; the
backward pass's is found through autograd's sequence numbers: the backward function of a forward
operator has its sequence number, so its work belongs to the module that ran that operator.

The tree sums to the step: its root is the profiler steps (``ProfilerStep#N``; the whole trace when
there are none) and every GPU operation of a step is in exactly one of forward (by module),
backward (by module), optimizer or other, so the GPU times of the root's children add up to the
root's. Host times are the main thread's: forward, the wait in ``backward()``, optimizer, other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.analysis.pytorch.events import ANNOTATION, MODULE, OP, STEP, TorchEvents
from engine.analysis.pytorch.module_paths import ModulePaths, enclosing, groups, module_paths

if TYPE_CHECKING:
    import numpy.typing as npt

_MODULE_PREFIX = "nn.Module: "
_OPTIMIZER_PREFIXES = ("Optimizer.step#", "Optimizer.zero_grad#")
#: record_function ranges that PyTorch's own libraries open: never taken for the user's modules
_LIBRARY_RANGES = ("nccl:", "c10d", "gloo:", "record_param_comms", "ProfilerStep#", "enumerate(DataLoader)")


@dataclass
class ModuleNode:
    """One node: a phase (forward, backward, optimizer, other) or a module inside one."""

    label: str
    depth: int
    calls: int = 0
    host_ns: int = 0
    gpu_ns: int = 0
    children: dict[str, ModuleNode] = field(default_factory=dict)

    def child(self, label: str) -> ModuleNode:
        """The child node named ``label``, added (empty) when there is none yet."""
        if label not in self.children:
            self.children[label] = ModuleNode(label, self.depth + 1)
        return self.children[label]

    def to_json(self) -> dict[str, Any]:
        """The node and its children, recursively, as a JSON-ready dict."""
        return {"name": self.label, "calls": self.calls, "host_ns": self.host_ns, "gpu_ns": self.gpu_ns,
                "children": [c.to_json() for c in self.children.values()]}


@dataclass
class ModuleTree:
    """The tree (``root`` is the steps) and what it was built from."""

    root: ModuleNode
    steps: int
    modules_from: str  # "nn.Module events", "record_function ranges" or "none"
    notes: list[str] = field(default_factory=list)

    def walk(self) -> list[ModuleNode]:
        """Every node of the tree, depth first, the root first."""
        out: list[ModuleNode] = []

        def visit(n: ModuleNode) -> None:
            out.append(n)
            for c in n.children.values():
                visit(c)

        visit(self.root)
        return out

    def sum_sentence(self) -> str:
        """A sentence comparing the sum of the phases' GPU and host times with the root's."""
        kids = self.root.children.values()
        gpu = sum(c.gpu_ns for c in kids)
        host = sum(c.host_ns for c in kids)
        return (f"{self.root.label}: the phases' GPU times add up to {gpu / 1e6:,.3f} ms of "
                f"{self.root.gpu_ns / 1e6:,.3f} ms, their host times to {host / 1e6:,.3f} ms of "
                f"{self.root.host_ns / 1e6:,.3f} ms.")

    def to_json(self) -> dict[str, Any]:
        """The step count, the modules' source, the notes and the tree as a JSON-ready dict."""
        return {"steps": self.steps, "modules_from": self.modules_from, "notes": self.notes,
                "tree": self.root.to_json()}


def _module_label(name: str) -> str:
    return name[len(_MODULE_PREFIX):] if name.startswith(_MODULE_PREFIX) else name


def _step_windows(ev: TorchEvents) -> list[tuple[int, int, int]]:
    steps = np.flatnonzero(ev.cat == STEP)
    return [(int(ev.start[i]), int(ev.end[i]), int(ev.thread[i])) for i in steps]


def module_tree(ev: TorchEvents, steps: Any = None) -> ModuleTree:
    """The module tree of a program (see the module docstring).

    ``steps``: the steps found from the GPU's work (:func:`engine.analysis.steps.find_steps`), used
    when the trace has no profiler steps.
    """
    mods = ev.cat == MODULE
    modules_from = "nn.Module events"
    if not mods.any():
        skip = _OPTIMIZER_PREFIXES + _LIBRARY_RANGES
        names = np.array([not t.startswith(skip) for t in ev.names], dtype=bool)
        mods = (ev.cat == ANNOTATION) & names[ev.name] if len(ev.names) else mods
        modules_from = "record_function ranges" if mods.any() else "none"
    mp = module_paths(ev, mods, _module_label)
    opt_names = np.array([t.startswith(_OPTIMIZER_PREFIXES) for t in ev.names], dtype=bool)
    opt_of = enclosing(ev, opt_names[ev.name] if len(ev.names) else np.zeros(0, bool))

    windows = _step_windows(ev)
    notes = []
    if not windows and steps is not None and steps.count:
        hs = steps.host_starts if steps.host_starts is not None else steps.starts_ns
        he = steps.host_ends if steps.host_ends is not None else steps.ends_ns
        windows = [(int(a), int(b), -1) for a, b in zip(hs, he, strict=True)]
        notes.append(f"Steps: {steps.count} found by {steps.method} ({steps.range_name}); host windows.")
    if not windows:
        first = int(min(ev.start.min(initial=0), ev.gpu_start.min(initial=0)))
        last = int(max(ev.end.max(initial=0), ev.gpu_end.max(initial=0)))
        windows = [(first, last, -1)]
        notes.append("No profiler steps (ProfilerStep#N) in the trace: the root is the whole trace.")
    whole = windows[0][2] == -1 and len(windows) == 1 and not (steps is not None and steps.count)
    root = ModuleNode("whole trace" if whole else f"{len(windows)} step(s)", 0)
    for a, b, _t in windows:
        root.calls += 1
        root.host_ns += b - a
    _gpu_into(ev, root, windows, mp, opt_of)
    _host_into(ev, root, windows, mods, mp, opt_of)
    order = ("forward", "backward", "optimizer", "other")
    root.children = {k: root.children[k] for k in order if k in root.children}
    if modules_from == "none" and "other" in root.children:
        root.children["other"].label = "forward and other (no modules recorded)"
    if modules_from == "none":
        notes.append("No module information: record with torch.profiler.profile(with_modules=True) "
                     "(or record_function ranges) to see time per nn.Module.")
    return ModuleTree(root=root, steps=len(windows), modules_from=modules_from, notes=notes)


def module_keys(ev: TorchEvents, mods: Any) -> ModulePaths:
    """The module keys of every range (:mod:`engine.analysis.pytorch.module_paths`), ``mods`` the calls."""
    return module_paths(ev, mods, _module_label)


def _in_windows(windows: list[tuple[int, int, int]], t: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
    """Whether each time falls in any of the windows ``[a, b)`` (sorted by start here, may overlap)."""
    if not windows:
        return np.zeros(len(t), dtype=bool)
    w = np.array([(a, b) for a, b, _th in windows], dtype=np.int64)
    w = w[np.argsort(w[:, 0], kind="stable")]
    reach = np.maximum.accumulate(w[:, 1])  # the furthest end of the windows started so far
    k = np.searchsorted(w[:, 0], t, side="right") - 1
    return (k >= 0) & (t < reach[np.maximum(k, 0)])


def _labels(key: int, width: int, paths: list[tuple[str, ...]]) -> tuple[str, ...]:
    """The node labels of a GPU operation's key (:func:`_gpu_into`)."""
    if key < width:
        return ("backward", *(paths[key - 1] if key else ()))
    if key < 2 * width:
        return ("forward", *paths[key - width - 1])
    return ("optimizer",) if key == 2 * width else ("other",)


def _gpu_into(ev: TorchEvents, root: ModuleNode, windows: list[tuple[int, int, int]], mp: ModulePaths,
              opt_of: Any) -> None:
    """Each GPU operation of a step into exactly one leaf: its GPU time counts on the path down to it."""
    launcher = ev.gpu_op
    t = np.where(launcher >= 0, ev.start[np.maximum(launcher, 0)], ev.gpu_start)
    j = np.flatnonzero(_in_windows(windows, t))
    op = launcher[j]
    linked, at = op >= 0, np.maximum(op, 0)
    back = linked & ev.backward[at]
    fpath = mp.forward_path(at)
    fwd = linked & ~back & (fpath >= 0)
    opt = linked & ~back & ~fwd & (opt_of[at] >= 0)
    width = len(mp.paths) + 1
    rest = np.where(opt, 2 * width, 3 * width)
    key = np.where(back, mp.back[at] + 1, np.where(fwd, width + fpath + 1, rest))
    dur = (ev.gpu_end - ev.gpu_start)[j].astype(np.int64)
    order, group, _counts = groups(key)
    sums = np.zeros(len(order), dtype=np.int64)
    np.add.at(sums, group, dur)
    root.gpu_ns += int(dur.sum())
    for k, total in zip(order.tolist(), sums.tolist(), strict=True):
        node = root
        for lab in _labels(k, width, mp.paths):
            node = node.child(lab)
            node.gpu_ns += total


def _host_into(ev: TorchEvents, root: ModuleNode, windows: list[tuple[int, int, int]], mods: Any,
               mp: ModulePaths, opt_of: Any) -> None:
    """Host time: modules' calls (forward), backward functions, optimizer ranges; the rest is other."""
    main = {w[2] for w in windows}
    in_step = _in_windows(windows, ev.start)
    dur = (ev.end - ev.start).astype(np.int64)
    calls = np.flatnonzero(mods & in_step)
    path = mp.call_path[calls]
    order, group, counts = groups(path)
    sums = np.zeros(len(order), dtype=np.int64)
    np.add.at(sums, group, dur[calls])
    for k, n, total in zip(order.tolist(), counts.tolist(), sums.tolist(), strict=True):
        node = root.child("forward")
        for lab in mp.paths[k]:
            node = node.child(lab)
        node.calls += n
        node.host_ns += total
    top_main = {"forward": 0, "optimizer": 0}
    outermost = np.array([len(x) == 1 for x in mp.paths] or [False], dtype=bool)[np.maximum(path, 0)]
    on_main = _on_main(ev.thread[calls], main)
    top_main["forward"] = int(dur[calls[outermost & on_main]].sum())
    fwd = root.children.get("forward")
    if fwd is not None:
        fwd.host_ns = top_main["forward"]
        fwd.calls = root.calls
    opt = np.flatnonzero((opt_of == np.arange(ev.n)) & in_step)
    if len(opt):
        node = root.child("optimizer")
        node.calls = len(opt)
        node.host_ns = int(dur[opt].sum())
        top_main["optimizer"] = node.host_ns
    back_main = _backward_host(ev, root, in_step, mp, main)
    other = root.child("other")
    other.host_ns = max(0, root.host_ns - top_main["forward"] - top_main["optimizer"] - back_main)
    other.calls = root.calls


def _on_main(thread: Any, main: set[int]) -> Any:
    """Whether each thread code is a step's thread (all are when a window has none, -1)."""
    if -1 in main:
        return np.ones(len(thread), dtype=bool)
    return np.isin(thread, np.array(sorted(main), dtype=np.int64))


def _backward_host(ev: TorchEvents, root: ModuleNode, in_step: Any, mp: ModulePaths, main: set[int]) -> int:
    """Backward functions' host time per module (the autograd thread); the main thread's wait in it."""
    inside = np.flatnonzero(ev.backward & in_step)
    p = ev.op_parent[inside]
    tops = inside[(p < 0) | ~ev.backward[np.maximum(p, 0)]]
    if not len(tops):
        return 0
    node = root.child("backward")
    node.calls = root.calls
    dur = (ev.end - ev.start).astype(np.int64)
    rows = np.flatnonzero(ev.backward & in_step & (ev.cat == OP))
    path, p = mp.back[rows], ev.op_parent[rows]
    # counted with the outermost range of the same module
    keep = (path >= 0) & ~((p >= 0) & (mp.back[np.maximum(p, 0)] == path))
    order, group, counts = groups(path[keep])
    sums = np.zeros(len(order), dtype=np.int64)
    np.add.at(sums, group, dur[rows[keep]])
    for k, n, total in zip(order.tolist(), counts.tolist(), sums.tolist(), strict=True):
        at = node
        for lab in mp.paths[k]:
            at = at.child(lab)
            at.host_ns += total
            at.calls += n
    wait = _main_thread_backward(ev, in_step, main)
    node.host_ns = wait if wait else int(dur[tops].sum())
    return node.host_ns


def _main_thread_backward(ev: TorchEvents, in_step: Any, main: set[int]) -> int:
    """The main thread's time in ``backward()`` (Python frames that run the autograd engine)."""
    code = [i for i, t in enumerate(ev.names) if "run_backward" in t]
    named = np.flatnonzero(np.isin(ev.name, code) & in_step)
    hit = named[_on_main(ev.thread[named], main)]
    return int((ev.end[hit] - ev.start[hit]).sum())
