"""Copying reports back from an SSH host without an SFTP server (issue 25).

``scp`` (OpenSSH 9) copies over SFTP and fails with "scp: Connection closed" on a host whose sshd has
no ``Subsystem sftp`` line; the session then copies with ``scp -O`` (the legacy protocol), and without
scp on the host with ``ssh HOST cat FILE``. Through a real sshd on 127.0.0.1 without SFTP, and through
a scripted host for the ways a real one cannot be made to fail here (no scp there).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from engine.sessions.outcome import OutcomeKind
from engine.sessions.process import StepResult
from engine.sessions.remote_run import copy_back
from engine.sessions.runner import run_session
from engine.sessions.spec import NcuOptions, SessionSpec, TargetSpec
from engine.sessions.store import SessionStore
from engine.system.ssh import SshTarget, cat_to_file_argv, scp_from_argv
from tests.conftest import FIXTURES
from tests.engine import fake_tools
from tests.engine.sshd_fixture import Sshd, find_sshd, start_sshd, stop_sshd


@pytest.fixture(scope="module")
def no_sftp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    """A real sshd on 127.0.0.1 like tests.engine.sshd_fixture's, without an SFTP subsystem."""
    root = tmp_path_factory.mktemp("sshd_no_sftp")
    server = start_sshd(root)  # keys, known_hosts and config; then again without the Subsystem line
    stop_sshd(server)
    cfg = root / "sshd_config"
    cfg.write_text("".join(ln for ln in cfg.read_text().splitlines(keepends=True)
                           if not ln.startswith("Subsystem")))
    with (root / "sshd.log").open("ab") as log:
        server.proc = subprocess.Popen([find_sshd() or "sshd", "-D", "-e", "-f", str(cfg)], stdout=log,
                                       stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    import socket

    for _ in range(200):
        try:
            with socket.create_connection(("127.0.0.1", server.port), timeout=0.5):
                break
        except OSError:
            time.sleep(0.05)
    try:
        yield server
    finally:
        stop_sshd(server)


def _remote_file(tmp_path: Path) -> Path:
    src = tmp_path / "remote dir"
    src.mkdir()
    (src / "r.nsys-rep").write_bytes(b"\x00\x01report\xff" * 1000)
    return src / "r.nsys-rep"


def test_scp_fails_without_sftp_and_the_other_ways_copy(no_sftp: Sshd, tmp_path: Path) -> None:
    src = _remote_file(tmp_path)
    t = no_sftp.target()
    for how in ("sftp", "legacy", "cat"):
        dest = tmp_path / how
        dest.mkdir()
        argv = (cat_to_file_argv(t, str(src), dest / src.name) if how == "cat"
                else scp_from_argv(t, [str(src)], dest, legacy=how == "legacy"))
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
        if how == "sftp":  # what users saw
            assert (out.returncode, out.stderr.strip()) == (255, "scp: Connection closed")
            assert list(dest.iterdir()) == []
        else:
            assert out.returncode == 0, out.stderr + no_sftp.log()
            assert [p.name for p in dest.iterdir()] == [src.name]
            assert (dest / src.name).read_bytes() == src.read_bytes()


def test_a_session_copies_its_report_back_from_a_host_without_sftp(no_sftp: Sshd, tmp_path: Path) -> None:
    fake = fake_tools.install(tmp_path / "root")
    env = fake_tools.env_for(fake)
    target = TargetSpec(host="127.0.0.1", user=no_sftp.user, port=no_sftp.port,
                        identity_file=str(no_sftp.client_key), known_hosts=str(no_sftp.known_hosts),
                        remote_dir=str(tmp_path / "remote"))
    spec = SessionSpec(tool="ncu", command=("python3", "-c", "pass"), name="remote k",
                       out_dir=str(tmp_path / "out"), target=target, tool_path=str(fake.ncu),
                       ncu=NcuOptions(launch_count=2),
                       env={k: env[k] for k in ("FAKE_MODE", "FAKE_NCU_REP", "FAKE_ARGV_LOG")})
    out = run_session(spec, store=SessionStore(tmp_path / "data" / "sessions.sqlite"))
    assert out.kind is OutcomeKind.SUCCESS, out.message
    assert [p.name for p in out.reports] == ["remote_k.ncu-rep"]
    assert out.reports[0].read_bytes() == (FIXTURES / "ncu" / "host_overhead_fixed.ncu-rep").read_bytes()
    where = f"{no_sftp.user}@127.0.0.1:{no_sftp.port}"
    assert f"scp over SFTP failed on {where} (no SFTP server there?): the reports were copied back with " \
           "scp -O (legacy protocol)." in out.notes
    log = out.log_path.read_text()
    assert "copying again with scp -O (legacy protocol): scp failed (scp: Connection closed)" in log


class _Host:
    """A scripted remote host: what each way to copy answers (the program name decides)."""

    def __init__(self, answers: dict[str, tuple[int, str]]) -> None:
        self.answers = answers
        self.ran: list[list[str]] = []
        self.notes: list[str] = []
        target = TargetSpec(host="127.0.0.1", user="root", port=2299)
        self.spec = SimpleNamespace(target=target)

    def note(self, text: str) -> None:
        self.notes.append(text)

    def run_step(self, argv: list[str]) -> StepResult:
        self.ran.append(argv)
        way = "cat" if argv[0] == "sh" else ("scp -O" if "-O" in argv else "scp")
        rc, text = self.answers[way]
        return StepResult(rc, None, text)


def _copy(host: _Host, tmp_path: Path) -> tuple[str, str | None]:
    sess: Any = host
    return copy_back(sess, ["/r/a.sqlite", "/r/b.nsys-rep"], tmp_path)


def test_no_scp_on_the_host_falls_back_to_ssh_cat(tmp_path: Path) -> None:
    host = _Host({"scp": (255, "scp: Connection closed"), "scp -O": (1, "sh: 1: scp: not found"),
                  "cat": (0, "")})
    assert _copy(host, tmp_path) == ("ssh cat", None)
    t = SshTarget("127.0.0.1", user="root", port=2299)
    assert host.ran == [scp_from_argv(t, ["/r/a.sqlite", "/r/b.nsys-rep"], tmp_path),
                        scp_from_argv(t, ["/r/a.sqlite", "/r/b.nsys-rep"], tmp_path, legacy=True),
                        cat_to_file_argv(t, "/r/a.sqlite", tmp_path / "a.sqlite"),
                        cat_to_file_argv(t, "/r/b.nsys-rep", tmp_path / "b.nsys-rep")]
    assert host.notes == [
        "copying again with scp -O (legacy protocol): scp failed (scp: Connection closed)",
        "copying again with ssh cat: scp -O (legacy protocol) failed (sh: 1: scp: not found)"]


def test_every_way_failing_says_each_and_a_trust_failure_stops_at_once(tmp_path: Path) -> None:
    host = _Host({"scp": (255, "scp: Connection closed"), "scp -O": (1, "sh: 1: scp: not found"),
                  "cat": (1, "cat: /r/a.sqlite: Permission denied")})
    how, why = _copy(host, tmp_path)
    assert how == "ssh cat" and why == (
        "scp failed (scp: Connection closed); scp -O (legacy protocol) failed (sh: 1: scp: not found); "
        "ssh cat failed (cat: /r/a.sqlite: Permission denied)")
    assert len(host.ran) == 3  # the second file is not tried once the first failed
    host = _Host({"scp": (255, "Host key verification failed."), "scp -O": (0, ""), "cat": (0, "")})
    how, why = _copy(host, tmp_path)
    assert how == "scp" and why is not None and "is not in known_hosts" in why
    assert "`ssh -p 2299 root@127.0.0.1`" in why and "root@127.0.0.1:2299`" not in why
    assert len(host.ran) == 1
