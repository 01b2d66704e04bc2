"""Outcome classification from exit status, tool messages and files (messages as the tools print them)."""

from __future__ import annotations

import pytest

from engine.sessions.ncu_logs import explain_ncu_log
from engine.sessions.outcome import PERM_FIX, OutcomeKind, classify, crash_of

NCU_PERM = ("==PROF== Connected to process 4242 (/work/app)\n==ERROR== ERR_NVGPUCTRPERM - The user does not "
            "have permission to access NVIDIA GPU Performance Counters on the target device 0.\n"
            "==PROF== Disconnected from process 4242\n==WARNING== No kernels were profiled.")
NSYS_IMPORT = ("Collecting data...\nGenerating '/tmp/nsys-report-5f1e.qdstrm'\n"
               "Importer error status: An unknown error occurred.\nGenerated:\n    /o/app.qdstrm")


@pytest.mark.parametrize(("tool", "rc", "out", "kw", "kind", "words"), [
    ("bench", 0, "done", {}, OutcomeKind.SUCCESS, "finished"),
    ("bench", -11, "", {}, OutcomeKind.CRASHED, "killed by SIGSEGV"),
    ("bench", 139, "", {}, OutcomeKind.CRASHED, "status 139 (probably SIGSEGV)"),
    ("bench", 3, "", {}, OutcomeKind.CRASHED, "exited with status 3"),
    ("bench", -9, "", {"killed": "timeout", "elapsed_s": 5.0}, OutcomeKind.TIMEOUT, "within the 5 s timeout"),
    ("nsys", -15, "", {"killed": "cancel", "elapsed_s": 2.0}, OutcomeKind.CANCELLED, "cancelled after 2 s"),
    ("ncu", 1, NCU_PERM, {}, OutcomeKind.PERMISSION, "NVreg_RestrictProfilingToAdminUsers=0"),
    ("nsys", 0, NSYS_IMPORT, {"qdstrm_exists": True}, OutcomeKind.IMPORTER_FAILED, "QdstrmImporter -i"),
    ("nsys", 1, "perf_event_paranoid level is 4", {}, OutcomeKind.PERMISSION, "perf_event_paranoid=2"),
    ("nsys", 0, "The target application terminated with signal 11 (SIGSEGV).", {"report_exists": True},
     OutcomeKind.CRASHED, "killed by SIGSEGV (the report up to the crash is kept)"),
    ("nsys", 0, "The target application returned non-zero exit code 2", {"report_exists": True},
     OutcomeKind.CRASHED, "exited with status 2"),
    ("ncu", 0, "==ERROR== The application returned an error code (4).", {"report_exists": True},
     OutcomeKind.CRASHED, "exited with status 4"),
    ("ncu", 0, "==PROF== Disconnected\n==WARNING== No kernels were profiled.", {}, OutcomeKind.TOOL_ERROR,
     "profiled no kernel"),
    ("nsys", 1, "Collecting data...\nError: unrecognised option '--bogus'", {}, OutcomeKind.TOOL_ERROR,
     "nsys failed (exit 1) and wrote no report: Error: unrecognised option '--bogus'"),
    ("ncu", 0, "==PROF== Report: /o/k.ncu-rep", {"report_exists": True}, OutcomeKind.SUCCESS, "finished"),
    ("nsys", 0, "Generated:\n /o/a.nsys-rep", {}, OutcomeKind.TOOL_ERROR, "wrote no report"),
])
def test_classify(tool: str, rc: int, out: str, kw: dict, kind: OutcomeKind, words: str) -> None:  # type: ignore[type-arg]
    got_kind, msg = classify(tool, rc, out, program="app", **kw)
    assert got_kind is kind
    assert words in msg
    assert msg.endswith(".") and "\n" not in msg  # one sentence


def test_permission_wins_over_crash_and_perf_warning_ignored_when_report_exists() -> None:
    assert classify("ncu", 1, NCU_PERM + "\n==ERROR== The application returned an error code (1).")[0] \
        is OutcomeKind.PERMISSION
    kind, _ = classify("nsys", 0, "warning: perf_event_paranoid is 3; CPU sampling off", report_exists=True)
    assert kind is OutcomeKind.SUCCESS


def test_crash_of_ignores_zero_codes() -> None:
    assert crash_of("ncu", 0, "==ERROR== The application returned an error code (0).") is None
    assert crash_of("bench", 0, "") is None


def test_refused_counters_say_the_fix_in_the_same_words_as_the_ncu_log_explainer() -> None:
    kind, msg = classify("ncu", 1, NCU_PERM, program="app")
    assert kind is OutcomeKind.PERMISSION
    assert msg == explain_ncu_log(NCU_PERM) == PERM_FIX  # one source of truth
    for fix in ("root", "CAP_SYS_ADMIN", "NVreg_RestrictProfilingToAdminUsers=0", "/etc/modprobe.d/"):
        assert fix in msg
    # other known ncu problems are explained by the same table, not by a second copy here
    for log in ("==WARNING== No kernels were profiled.",
                "==ERROR== Failed to find metric sm__bogus for the current device"):
        kind, msg = classify("ncu", 1, log, program="app")
        assert kind is OutcomeKind.TOOL_ERROR and msg == explain_ncu_log(log)
    # ...but a finished report with a harmless warning is still a success
    assert classify("ncu", 0, "==WARNING== Failed to find metric x\n", report_exists=True)[0] is \
        OutcomeKind.SUCCESS
