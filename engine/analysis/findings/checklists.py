"""Checklists (TOML files in ``resources/checklists``) and their per-project state.

A checklist is an ordered list of items; each item names the finding ids it addresses, so a
report's findings mark which items apply. An item's state in a project is ``open`` (default),
``applied`` (the change is made), ``verified`` (a re-run showed a significant gain) or ``rejected``
(tried, no gain, or not applicable). States are saved in ``<project>/.kernelscope/checklists.json``
with atomic writes (temporary file + rename), so a crash never leaves half a file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from engine.system.atomic import atomic_write_text
from engine.system.errors import KernelscopeError
from engine.system.tomlfile import read_toml

STATES = ("open", "applied", "verified", "rejected")
STATE_DIR = ".kernelscope"
STATE_FILE = "checklists.json"
STATE_SCHEMA = "kernelscope.checklist-state/1"


class ChecklistError(KernelscopeError):
    """A checklist or its state cannot be read or written."""


@dataclass(frozen=True)
class Item:
    """One checklist item."""

    id: str
    title: str
    findings: tuple[str, ...]
    how: str = ""
    verify: str = ""
    step: str = ""
    #: the item applies only to kernels this short (per launch, µs); None: to any
    max_kernel_us: float | None = None


@dataclass(frozen=True)
class Checklist:
    """A named, ordered checklist."""

    name: str
    title: str
    description: str
    items: tuple[Item, ...] = field(default_factory=tuple)

    def item(self, item_id: str) -> Item:
        """The item with this id (ChecklistError if none)."""
        for it in self.items:
            if it.id == item_id:
                return it
        raise ChecklistError(
            f"The checklist {self.name!r} has no item {item_id!r}; its items are "
            f"{', '.join(i.id for i in self.items)}.")


def checklist_dir() -> Path:
    """Folder of the bundled checklists."""
    import resources

    return Path(resources.__file__).resolve().parent / "checklists"


def list_checklists() -> list[str]:
    """Names of the bundled checklists."""
    return sorted(p.stem for p in checklist_dir().glob("*.toml"))


def load_checklist(name_or_path: str | Path) -> Checklist:
    """Load a bundled checklist by name, or a TOML file by path.

    Raises:
        ChecklistError: unknown name, unreadable or malformed file.

    """
    p = Path(name_or_path)
    if not p.suffix:
        p = checklist_dir() / f"{name_or_path}.toml"
        if not p.is_file():
            raise ChecklistError(f"There is no checklist {str(name_or_path)!r}; available: "
                                 f"{', '.join(list_checklists())}.")
    data = read_toml(p, "The checklist", "give a .toml checklist", ChecklistError)
    try:
        items = tuple(Item(id=str(i["id"]), title=str(i["title"]),
                           findings=tuple(str(f) for f in i.get("findings", [])),
                           how=str(i.get("how", "")), verify=str(i.get("verify", "")),
                           step=str(i.get("step", "")),
                           max_kernel_us=float(i["max_kernel_us"]) if "max_kernel_us" in i else None)
                      for i in data.get("items", []))
        return Checklist(name=str(data.get("name", p.stem)), title=str(data["title"]),
                         description=str(data.get("description", "")), items=items)
    except (KeyError, TypeError) as exc:
        raise ChecklistError(f"The checklist {p} lacks a required field ({exc}); each item needs "
                             "id and title.") from exc


def atomic_write_json(path: Path, doc: Any) -> None:
    """Write JSON to ``path`` atomically (temporary file in the same folder, then rename)."""
    try:
        atomic_write_text(path, json.dumps(doc, indent=1, sort_keys=True))
    except OSError as exc:
        raise ChecklistError(f"Could not save {path} ({exc.strerror}); check that the project "
                             "folder is writable.") from exc


def read_json(path: Path, schema: str) -> dict[str, Any]:
    """Read a state file written by :func:`atomic_write_json`; an empty document if absent."""
    if not path.exists():
        return {"schema": schema}
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ChecklistError(f"The project state {path} is damaged ({exc}); fix or delete it.") from exc
    if not isinstance(doc, dict) or doc.get("schema") != schema:
        raise ChecklistError(f"{path} is not a Kernelscope state file (expected schema {schema}).")
    return doc


def state_path(project: str | Path) -> Path:
    """Where a project's checklist states live."""
    return Path(project).expanduser() / STATE_DIR / STATE_FILE


def load_states(project: str | Path, checklist: str) -> dict[str, dict[str, Any]]:
    """Item id -> ``{"state", "note", "updated"}`` for one checklist in a project."""
    doc = read_json(state_path(project), STATE_SCHEMA)
    states: dict[str, dict[str, Any]] = doc.get("checklists", {}).get(checklist, {})
    return states


def set_state(project: str | Path, checklist: str, item_id: str, state: str, note: str = "",
              **extra: Any) -> dict[str, Any]:
    """Record an item's state (atomically) and return the stored entry.

    Raises:
        ChecklistError: unknown state or item, or the file cannot be written.

    """
    if state not in STATES:
        raise ChecklistError(f"{state!r} is not a checklist state; use one of {', '.join(STATES)}.")
    load_checklist(checklist).item(item_id)
    path = state_path(project)
    doc = read_json(path, STATE_SCHEMA)
    entry = {"state": state, "note": note,
             "updated": datetime.now(timezone.utc).isoformat(timespec="seconds"), **extra}
    doc.setdefault("checklists", {}).setdefault(checklist, {})[item_id] = entry
    atomic_write_json(path, doc)
    return entry


def kernel_us_per_launch(finding: Any) -> float | None:
    """The duration of one launch of the kernel a finding is about (µs), None when it names none.

    ncu findings carry the summed duration and the launch count; nsys's launch-bound finding the
    median kernel duration.
    """
    ev = {e.label: e.value for e in getattr(finding, "evidence", ())}
    total, launches = ev.get("duration (sum)"), ev.get("profiled launches")
    if isinstance(total, (int, float)) and isinstance(launches, (int, float)) and launches > 0:
        return float(total) / float(launches) / 1e3
    median = ev.get("median kernel duration")
    return float(median) / 1e3 if isinstance(median, (int, float)) else None


def _applies(item: Item, finding: Any) -> bool:
    """Whether ``finding`` triggers ``item``: its id is listed and its kernel is short enough."""
    if finding.id not in item.findings:
        return False
    us = kernel_us_per_launch(finding) if item.max_kernel_us is not None else None
    return us is None or item.max_kernel_us is None or us <= item.max_kernel_us


def annotate(checklist: Checklist, finding_ids: set[str] | None = None,
             states: dict[str, dict[str, Any]] | None = None, *,
             findings: list[Any] | None = None) -> list[dict[str, Any]]:
    """Items with their state and the findings (from a report) that trigger them.

    With ``findings`` (the Finding objects), an item with ``max_kernel_us`` is triggered only by
    findings about kernels that short per launch: fusing element-wise kernels is advice for
    kernels of a few microseconds, never for a 526 µs one.
    """
    out = []
    for it in checklist.items:
        st = (states or {}).get(it.id, {})
        if findings is not None:
            trig: list[str] | None = sorted({f.id for f in findings if _applies(it, f)})
        else:
            trig = sorted(set(it.findings) & finding_ids) if finding_ids is not None else None
        out.append({
            "id": it.id, "step": it.step, "title": it.title, "how": it.how, "verify": it.verify,
            "findings": list(it.findings), "triggered_by": trig,
            "state": st.get("state", "open"), "note": st.get("note", ""),
        })
    return out


def format_checklist(checklist: Checklist, rows: list[dict[str, Any]]) -> str:
    """Readable text for a terminal."""
    mark = {"open": "[ ]", "applied": "[~]", "verified": "[x]", "rejected": "[-]"}
    lines = [checklist.title, checklist.description, ""]
    step = None
    for r in rows:
        if r["step"] and r["step"] != step:
            step = r["step"]
            lines.append(step)
        trig = r["triggered_by"]
        flag = "" if trig is None else ("  <- " + ", ".join(trig) if trig else "  (no finding)")
        lines.append(f"  {mark[r['state']]} {r['id']}: {r['title']}{flag}")
        if r["note"]:
            lines.append(f"        note: {r['note']}")
    return "\n".join(lines) + "\n"
