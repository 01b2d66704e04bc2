"""`kernelscope run` behaves like the tools it wraps: the program runs in the caller's directory (or
--cwd / --remote-cwd), a failing program is the story of the outcome (its exit status and last stderr
lines), and the unknown-host sentence gives commands ssh accepts. Real subprocesses, the fake nsys of
tests/engine/fake_tools, and a real sshd on 127.0.0.1."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from engine.sessions.outcome import OutcomeKind
from engine.sessions.runner import run_session
from engine.sessions.spec import SessionSpec, SpecError, TargetSpec
from engine.sessions.store import SessionStore
from engine.system.ssh import SshError, check_connection
from tests.conftest import REPO
from tests.engine import fake_tools
from tests.engine.sshd_fixture import Sshd, sshd  # noqa: F401  (fixture)

KS = [sys.executable, "-m", "engine.cli"]
SCRIPT = ("import os, sys, pathlib\n"
          "pathlib.Path('ran_here.txt').write_text(os.getcwd())\n"
          "print('script ran in', os.getcwd())\n")


def _project(tmp_path: Path) -> Path:
    proj = tmp_path / "proj"
    (proj / "relative").mkdir(parents=True)
    (proj / "relative" / "script.py").write_text(SCRIPT)
    return proj


def _ks(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = dict(env, PYTHONPATH=str(REPO))
    return subprocess.run(KS + args, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_run_nsys_relative_script_from_a_project_folder(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    fake = fake_tools.install(tmp_path / "root")
    r = _ks(["run", "--tool", "nsys", "--json", "--quiet", "--", "python3", "relative/script.py"], proj,
            fake_tools.env_for(fake))
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["kind"] == "success", out
    assert (proj / "ran_here.txt").read_text() == str(proj)  # the program ran in the caller's folder
    sdir = Path(out["session_dir"])
    assert sdir.parent == proj / "kernelscope-sessions"  # reports go to the session folder
    assert sorted(Path(p).name for p in out["reports"]) == ["python3.nsys-rep", "python3.sqlite"]
    assert json.loads((sdir / "spec.json").read_text())["cwd"] == str(proj)
    profile = [json.loads(x) for x in fake.argv_log.read_text().splitlines() if '"profile"' in x][0]
    assert profile[-2:] == ["python3", "relative/script.py"]
    assert profile[profile.index("--output") + 1] == str(sdir / "python3")
    assert f"running in {proj}: " in (sdir / "session.log").read_text()


def test_run_cwd_option_and_missing_folder(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = dict(os.environ)
    r = _ks(["run", "--cwd", str(proj), "--out", str(tmp_path / "s"), "--quiet", "--", sys.executable,
             "relative/script.py"], elsewhere, env)
    assert r.returncode == 0, r.stderr
    assert (proj / "ran_here.txt").read_text() == str(proj)
    r = _ks(["run", "--cwd", str(tmp_path / "nope"), "--", "true"], elsewhere, env)
    assert r.returncode == 1 and r.stderr.strip().splitlines() == [
        f"kernelscope: The working directory {tmp_path / 'nope'} does not exist or is not a folder; run "
        "from the project folder or give an existing one."]
    r = _ks(["run", "--remote-cwd", "x", "--", "true"], elsewhere, env)
    assert r.returncode == 1 and "--remote-cwd applies to --host" in r.stderr


@pytest.mark.parametrize("libs", [True, False], ids=["importer-recovers", "importer-fails-too"])
def test_failing_program_is_the_story_not_the_importer(tmp_path: Path, libs: bool) -> None:
    """As on the lent H100: python3 cannot open the script, nsys says nothing about it, its import
    step fails, and it exits with the program's status 2."""
    proj = _project(tmp_path)
    fake = fake_tools.install(tmp_path / "root")
    extra = {"KERNELSCOPE_IMPORTER_LIBS": str(fake.libs)} if libs else {}
    env = fake_tools.env_for(fake, "importer_fail_rc", **extra)
    store = SessionStore(tmp_path / "data" / "s.sqlite")
    spec = SessionSpec(tool="nsys", command=("python3", "relative/missing.py"), cwd=str(proj),
                       out_dir=str(tmp_path / "out"))
    out = run_session(spec, store=store, env=env)
    assert out.kind is OutcomeKind.CRASHED, out.message
    assert out.returncode == 2
    assert out.message.startswith("python3 exited with status 2")
    assert "; its last error output: " in out.message
    assert (f"python3: can't open file '{proj / 'relative' / 'missing.py'}': [Errno 2] No such file or "
            "directory") in out.message
    assert "nsys failed" not in out.message and "importer" not in out.message.lower().split("(nsys")[0]
    if libs:
        assert "(the report up to the crash is kept)" in out.message
        assert out.notes == ("nsys's import step failed; Kernelscope ran QdstrmImporter itself.",
                             "Removed python3.qdstrm (0.00 GB) after importing it into python3.nsys-rep, "
                             "as nsys does.")
    else:
        assert "(nsys's import step failed too; the .qdstrm is kept)" in out.message
        assert len(out.notes) == 1 and "QdstrmImporter failed too" in out.notes[0]


def test_bench_failure_quotes_the_last_stderr_lines(tmp_path: Path) -> None:
    code = ("import sys\nprint('working', flush=True)\nfor i in range(5):\n"
            "    print(f'trace line {i}', file=sys.stderr)\nsys.exit(3)")
    out = run_session(SessionSpec(command=(sys.executable, "-c", code), out_dir=str(tmp_path / "o")),
                      store=SessionStore(tmp_path / "s.sqlite"))
    assert out.kind is OutcomeKind.CRASHED
    name = Path(sys.executable).name
    assert out.message == (f"{name} exited with status 3; its last error output: trace line 2 | trace line 3 "
                           "| trace line 4; see session.log for its output.")


def test_remote_cwd(sshd: Sshd, tmp_path: Path) -> None:  # noqa: F811
    """The program runs in --remote-cwd (relative: under the remote home; default: the home), the
    report still lands in the remote session folder and is copied back."""
    home = Path(os.path.expanduser("~"))
    proj = Path(os.path.realpath(_project(tmp_path)))
    t = sshd.target()
    target = TargetSpec(host=t.host, user=t.user, port=t.port, identity_file=str(t.identity_file),
                        known_hosts=str(t.known_hosts), remote_dir=str(tmp_path / "remote"))
    fake = fake_tools.install(tmp_path / "root")
    env = fake_tools.env_for(fake)
    store = SessionStore(tmp_path / "s.sqlite")
    spec = SessionSpec(tool="nsys", command=("python3", "relative/script.py"), cwd=str(proj), target=target,
                       tool_path=str(fake.nsys), out_dir=str(tmp_path / "out"),
                       env={k: env[k] for k in ("FAKE_NSYS_REP", "FAKE_NSYS_SQLITE", "FAKE_ARGV_LOG")})
    out = run_session(spec, store=store)
    assert out.kind is OutcomeKind.SUCCESS, out.message
    assert (proj / "ran_here.txt").read_text() == str(proj)
    assert sorted(p.name for p in out.reports) == ["python3.nsys-rep", "python3.sqlite"]
    profile = [json.loads(x) for x in fake.argv_log.read_text().splitlines() if '"profile"' in x][0]
    remote_sdir = tmp_path / "remote" / out.session_id
    assert profile[profile.index("--output") + 1] == str(remote_sdir / "python3")
    # default: the remote home
    spec2 = spec.with_(cwd=None, command=("python3", "-c", "import os; print('cwd=' + os.getcwd())"))
    out = run_session(spec2, store=store)
    assert out.kind is OutcomeKind.SUCCESS, out.message
    assert f"cwd={os.path.realpath(home)}" in out.log_path.read_text()
    # a folder that is not there: one sentence
    out = run_session(spec.with_(cwd="no/such/dir"), store=store)
    assert out.kind is OutcomeKind.TOOL_ERROR
    assert out.message == (f"The working directory ~/no/such/dir does not exist on {t.display}; create it "
                           "there or give another --remote-cwd (relative paths are under the remote home).")


def test_unknown_host_sentence_gives_commands_ssh_accepts(sshd: Sshd, tmp_path: Path) -> None:  # noqa: F811
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    t = sshd.target(known_hosts=empty)
    with pytest.raises(SshError) as err:
        check_connection(t)
    msg = str(err.value)
    login = f"ssh -p {sshd.port} -o UserKnownHostsFile={empty} {sshd.user}@127.0.0.1"
    scan = f"ssh-keyscan -p {sshd.port} 127.0.0.1 >> {empty}"
    assert f"`{login}`" in msg and f"`{scan}`" in msg
    assert empty.read_text() == ""
    # the keyscan line works as printed, and then the login command is accepted by ssh
    subprocess.run(["sh", "-c", re.search(r"`(ssh-keyscan [^`]+)`", msg).group(1)],  # type: ignore[union-attr]
                   check=True, capture_output=True, timeout=30)
    check_connection(t)
    words = login.split()
    r = subprocess.run([words[0], "-i", str(t.identity_file), "-o", "BatchMode=yes", *words[1:], "true"],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr


def test_doctor_host_known_hosts(sshd: Sshd, tmp_path: Path) -> None:  # noqa: F811
    empty = tmp_path / "kh"
    empty.write_text("")
    host = f"{sshd.user}@127.0.0.1:{sshd.port}"
    base = ["doctor", "--host", host, "--identity", str(sshd.client_key)]
    r = _ks([*base, "--known-hosts", str(empty)], tmp_path, dict(os.environ))
    assert r.returncode == 1
    assert f"`ssh -p {sshd.port} -o UserKnownHostsFile={empty} {host.split(':')[0]}`" in r.stderr
    r = _ks([*base, "--known-hosts", str(sshd.known_hosts), "--json"], tmp_path, dict(os.environ))
    assert r.returncode == 0, r.stderr
    assert any(c["name"] for c in json.loads(r.stdout))


def test_spec_cwd_round_trips(tmp_path: Path) -> None:
    spec = SessionSpec(command=("true",), cwd="/srv/proj")
    spec.save(tmp_path / "s.json")
    assert SessionSpec.load(tmp_path / "s.json").cwd == "/srv/proj"
    with pytest.raises(SpecError):
        SessionSpec.from_dict({"command": ["true"], "cwdx": "/"})


def test_remote_failing_program_is_the_story(sshd: Sshd, tmp_path: Path) -> None:  # noqa: F811
    """The same on an SSH host: the program's status and stderr, the importer's failure as a note."""
    proj = Path(os.path.realpath(_project(tmp_path)))
    t = sshd.target()
    fake = fake_tools.install(tmp_path / "root")
    env = fake_tools.env_for(fake, "importer_fail_rc")
    spec = SessionSpec(
        tool="nsys", command=("python3", "relative/missing.py"), cwd=str(proj), tool_path=str(fake.nsys),
        out_dir=str(tmp_path / "out"),
        target=TargetSpec(host=t.host, user=t.user, port=t.port, identity_file=str(t.identity_file),
                          known_hosts=str(t.known_hosts), remote_dir=str(tmp_path / "remote")),
        env={k: env[k] for k in ("FAKE_MODE", "FAKE_NSYS_REP", "FAKE_NSYS_SQLITE", "FAKE_ARGV_LOG")})
    out = run_session(spec, store=SessionStore(tmp_path / "s.sqlite"))
    assert out.kind is OutcomeKind.CRASHED, out.message
    assert out.message.startswith("python3 exited with status 2; its last error output: ")
    assert f"can't open file '{proj / 'relative' / 'missing.py'}'" in out.message
    assert "(nsys's import step failed too; the .qdstrm is kept)" in out.message
    assert len(out.notes) == 1 and "QdstrmImporter failed too" in out.notes[0]
    assert [p.name for p in out.reports] == ["python3.qdstrm"]
