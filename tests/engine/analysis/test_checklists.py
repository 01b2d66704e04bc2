"""Checklists: bundled TOML files tied to real finding ids; per-project state with atomic writes."""

from __future__ import annotations

import json

import pytest

from engine.analysis.findings import checklists as cl
from engine.analysis.findings import findings_for
from engine.cli import main
from tests.conftest import NSYS_DIR

NAIVE = NSYS_DIR / "host_overhead_naive.sqlite"
FIXED = NSYS_DIR / "host_overhead_fixed.sqlite"


def test_bundled_checklists_load_and_reference_known_rule_ids():
    from engine.analysis.findings import ncu as ncu_rules
    from engine.analysis.findings import nsys as nsys_rules
    from engine.analysis.findings import nsys_time
    from engine.analysis.findings import telemetry as tel_rules
    from engine.analysis.findings.registry import rule_for

    assert cl.list_checklists() == ["attention", "memory_bound", "roadmap"]
    sources = "".join(open(m.__file__).read() for m in (ncu_rules, nsys_rules, nsys_time, tel_rules))
    for name in cl.list_checklists():
        c = cl.load_checklist(name)
        assert c.items
        for it in c.items:
            for fid in it.findings:
                # Every id a checklist refers to is produced by a registered rule (ncu.rule.* are
                # ncu's own), and the rule's code names it.
                stem = fid.split(".")[-1]
                rule = rule_for(fid)
                assert rule is not None, fid
                assert fid.startswith(("ncu.rule.", "nsys.expert.")) or f'"{fid}"' in sources, fid
                assert stem
    steps = [i.step for i in cl.load_checklist("roadmap").items]
    assert steps[0].startswith("1.") and steps[-1].startswith("4.")


def test_roadmap_items_triggered_by_naive_but_not_fixed():
    c = cl.load_checklist("roadmap")
    naive = cl.annotate(c, {f.id for f in findings_for(NAIVE)})
    fixed = cl.annotate(c, {f.id for f in findings_for(FIXED)})
    trig = {r["id"]: r["triggered_by"] for r in naive}
    assert trig["host.allocate-once"] == ["nsys.per-iteration-alloc"]
    assert "nsys.sync-copies" in trig["host.async-copies"]
    assert trig["copies.pinned"] == ["nsys.pageable-copies"]
    trig_f = {r["id"]: r["triggered_by"] for r in fixed}
    assert trig_f["host.allocate-once"] == [] and trig_f["copies.pinned"] == []


def test_state_round_trip_is_atomic_and_validated(tmp_path):
    entry = cl.set_state(tmp_path, "roadmap", "copies.pinned", "applied", "cudaMallocHost")
    assert entry["state"] == "applied"
    path = cl.state_path(tmp_path)
    doc = json.loads(path.read_text())
    assert doc["schema"] == cl.STATE_SCHEMA
    assert doc["checklists"]["roadmap"]["copies.pinned"]["note"] == "cudaMallocHost"
    cl.set_state(tmp_path, "roadmap", "copies.pinned", "verified")
    assert cl.load_states(tmp_path, "roadmap")["copies.pinned"]["state"] == "verified"
    # No temporary files are left behind.
    assert [p.name for p in path.parent.iterdir()] == [cl.STATE_FILE]
    with pytest.raises(cl.ChecklistError, match="not a checklist state"):
        cl.set_state(tmp_path, "roadmap", "copies.pinned", "done")
    with pytest.raises(cl.ChecklistError, match="has no item"):
        cl.set_state(tmp_path, "roadmap", "nope", "open")
    path.write_text("{broken")
    with pytest.raises(cl.ChecklistError, match="damaged"):
        cl.load_states(tmp_path, "roadmap")


def test_bad_checklist_file(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("title = \n")
    with pytest.raises(cl.ChecklistError, match="not valid TOML"):
        cl.load_checklist(bad)
    with pytest.raises(cl.ChecklistError, match="available: attention, memory_bound, roadmap"):
        cl.load_checklist("nosuch")


def test_cli_checklist(tmp_path, capsys):
    assert main(["checklist"]) == 0
    assert "roadmap" in capsys.readouterr().out
    assert main(["checklist", "roadmap", "--project", str(tmp_path), "--set", "host.allocate-once=applied",
                 "--report", str(NAIVE), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    row = next(r for r in doc["items"] if r["id"] == "host.allocate-once")
    assert row["state"] == "applied" and row["triggered_by"] == ["nsys.per-iteration-alloc"]
    assert main(["checklist", "roadmap", "--set", "host.allocate-once=applied"]) == 1
    assert "--project" in capsys.readouterr().err
