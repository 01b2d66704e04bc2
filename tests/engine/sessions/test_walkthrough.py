"""Walkthrough end to end on the naive/fixed H200 recordings, and a re-run through the session runner
with the stand-in nsys (nsys itself cannot run here: no GPU)."""

from __future__ import annotations

import json
import sqlite3
import sys

import numpy as np
import pytest

from engine.analysis.findings import checklists as cl
from engine.cli import main
from engine.sessions import walkthrough as wt
from tests.conftest import NSYS_DIR

NAIVE = NSYS_DIR / "host_overhead_naive.sqlite"
FIXED = NSYS_DIR / "host_overhead_fixed.sqlite"
ITEMS = ["host.allocate-once", "host.async-copies", "copies.pinned"]


def iteration_ns(path, text):
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    rows = con.execute("select end - start from NVTX_EVENTS n left join StringIds s on s.id = n.textId "
                       "where coalesce(n.text, s.value) = ? order by start", (text,)).fetchall()
    con.close()
    return [r[0] for r in rows]


def test_naive_to_fixed_is_verified_with_measured_and_predicted_gain(tmp_path):
    doc = wt.start(tmp_path, NAIVE, reference=FIXED)
    got, host = doc["baseline"]["iterations"]["durations_ns"], iteration_ns(NAIVE, "iteration(naive)")
    assert len(got) == len(host) and all(g == pytest.approx(h, rel=0.1)
                                         for g, h in zip(got[1:], host[1:], strict=True))
    cands = {c["id"]: c for c in wt.candidates(doc)}
    assert {"host.allocate-once", "host.async-copies", "copies.pinned"} <= set(cands)
    doc = wt.pick(tmp_path, ITEMS)
    # Predicted: the steady-state gains per step of the baseline findings for those items (each
    # finding once), host-side ones together at most the GPU idle per step, GPU-side ones at most
    # the GPU busy per step, the total at most the step.
    picked_ids = {"nsys.per-iteration-alloc", "nsys.sync-copies", "nsys.default-stream",
                  "nsys.pageable-copies", "nsys.expert.cuda_memcpy_async"}
    hits = [f for f in doc["baseline"]["findings"] if f["id"] in picked_ids and f["per_step_ns"]]
    step, busy = doc["baseline"]["step_ns"], doc["baseline"]["gpu_busy_per_step_ns"]
    host = sum(f["per_step_ns"] for f in hits if f["overlap"] == "host")
    gpu = sum(f["per_step_ns"] for f in hits if f["overlap"] == "gpu")
    want = min(min(host, step - busy) + min(gpu, busy), step)
    assert doc["picked"]["predicted_per_iteration_ns"] == pytest.approx(want, rel=0.01)
    run = wt.verify(tmp_path, FIXED)
    a = iteration_ns(NAIVE, "iteration(naive)")[1:]
    b = iteration_ns(FIXED, "iteration(fixed)")[1:]
    assert step == pytest.approx(np.median(a), rel=0.02)  # the GPU step, within 2 % of the host range
    # Within a factor of two of what the re-run measured, and never above the step itself.
    measured = np.median(a) - np.median(b)
    assert measured / 2 <= want <= min(2 * measured, step)
    assert run["measured_per_iteration_ns"] == pytest.approx(np.median(a) - np.median(b), rel=0.05)
    assert run["verdict"] == "verified"
    assert run["stats"]["p_value"] == pytest.approx(2 / 70)
    assert run["findings_still_present"] == []
    states = cl.load_states(tmp_path, "roadmap")
    assert {states[i]["state"] for i in ITEMS} == {"verified"}
    assert (states["copies.pinned"]["measured_per_iteration_ns"]
            == pytest.approx(run["measured_per_iteration_ns"]))
    # Saved state survives a reload.
    assert wt.load(tmp_path)["runs"][0]["verdict"] == "verified"


def test_a_slower_or_unchanged_run_is_not_verified(tmp_path):
    wt.start(tmp_path, FIXED)
    wt.pick(tmp_path, ["copies.overlap"])
    run = wt.verify(tmp_path, NAIVE)  # slower
    assert run["verdict"] == "not verified"
    assert cl.load_states(tmp_path, "roadmap")["copies.overlap"]["state"] == "applied"
    run = wt.verify(tmp_path, FIXED)  # the same recording: no change at all
    assert run["verdict"] == "not verified" and run["measured_per_iteration_ns"] == 0
    assert "not a significant improvement" in run["why"]


def test_walkthrough_errors(tmp_path):
    with pytest.raises(wt.WalkthroughError, match="No walkthrough"):
        wt.load(tmp_path)
    wt.start(tmp_path, NAIVE)
    with pytest.raises(wt.WalkthroughError, match="Pick the checklist items"):
        wt.verify(tmp_path, FIXED)
    with pytest.raises(cl.ChecklistError, match="has no item"):
        wt.pick(tmp_path, ["nope"])
    with pytest.raises(wt.WalkthroughError, match="no repeating NVTX range"):
        wt.start(tmp_path, NSYS_DIR / "torch_sdpa_gemm.sqlite")


def test_cli_walkthrough_and_html_report(tmp_path, capsys):
    p = str(tmp_path)
    assert main(["walkthrough", "start", str(NAIVE), "--project", p, "--pinned-from", str(FIXED)]) == 0
    assert "copies.pinned" in capsys.readouterr().out
    assert main(["walkthrough", "pick", *ITEMS, "--project", p]) == 0
    assert main(["walkthrough", "verify", str(FIXED), "--project", p]) == 0
    out = capsys.readouterr().out
    assert "VERIFIED" in out and "speedup 4.59x" in out
    assert main(["walkthrough", "status", "--project", p, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["schema"] == wt.SCHEMA
    html_path = tmp_path / "wt.html"
    assert main(["walkthrough", "report", "--project", p, "-o", str(html_path)]) == 0
    page = html_path.read_text()
    assert page.count("<svg") == 2 and "<strong>verified</strong>" in page
    assert main(["walkthrough", "verify", "--project", p]) == 1


def test_rerun_through_the_session_runner(tmp_path):
    from engine.sessions.spec import SessionSpec
    from engine.sessions.store import SessionStore
    from tests.engine import fake_tools

    fake = fake_tools.install(tmp_path / "root")
    env = fake_tools.env_for(fake)  # the stand-in nsys writes the real fixed-variant recording
    wt.start(tmp_path / "proj", NAIVE)
    wt.pick(tmp_path / "proj", ["copies.pinned"])
    spec = SessionSpec(tool="nsys", command=(sys.executable, "-c", "print('fixed variant')"),
                       out_dir=str(tmp_path / "out"), name="after")
    run = wt.rerun(tmp_path / "proj", spec, env=env, store=SessionStore(tmp_path / "data" / "s.sqlite"))
    assert run["verdict"] == "verified"
    assert run["report"].endswith("after.sqlite")
    argvs = [json.loads(x) for x in fake.argv_log.read_text().splitlines()]
    assert argvs[0][:2] == ["nsys", "profile"]
