"""engine.system.ssh: exact argv, and real connections through a real sshd on 127.0.0.1."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from engine.system.ssh import (
    SshError,
    SshTarget,
    check_connection,
    parse_target,
    remote_command,
    scp_from_argv,
    ssh_argv,
)
from tests.engine.sshd_fixture import Sshd, keygen, sshd  # noqa: F401  (fixture)

BASE = [
    "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes", "-o", "PasswordAuthentication=no",
    "-o", "KbdInteractiveAuthentication=no", "-o", "ConnectTimeout=15", "-o", "ServerAliveInterval=15",
    "-o", "ServerAliveCountMax=4",
]


def test_ssh_argv_exact() -> None:
    t = SshTarget("gpu1", user="ana", port=2222, identity_file=Path("/k/id"), known_hosts=Path("/k/kh"),
                  options=("ProxyJump=bastion",))
    assert ssh_argv(t, ["python3", "-c", "print('a b')", "$HOME"], cwd="/tmp/x y") == [
        "ssh", *BASE,
        "-o", "UserKnownHostsFile=/k/kh", "-o", "GlobalKnownHostsFile=/dev/null",
        "-i", "/k/id", "-o", "IdentitiesOnly=yes", "-o", "ProxyJump=bastion",
        "-p", "2222", "-l", "ana", "--", "gpu1",
        "cd '/tmp/x y' && python3 -c 'print('\"'\"'a b'\"'\"')' '$HOME'",
    ]


def test_ssh_argv_minimal_and_scp() -> None:
    t = SshTarget("gpu1")
    assert ssh_argv(t, ["nvidia-smi"]) == ["ssh", *BASE, "--", "gpu1", "nvidia-smi"]
    assert scp_from_argv(SshTarget("::1", user="u", port=22), ["/r/a.nsys-rep"], Path("/l")) == [
        "scp", "-s", "-r", "-p", "-q", *BASE, "-P", "22", "--", "u@[::1]:/r/a.nsys-rep", "/l",
    ]


@pytest.mark.parametrize("opt", ["StrictHostKeyChecking=no", "batchmode=no", "PasswordAuthentication=yes"])
def test_locked_options_refused(opt: str) -> None:
    with pytest.raises(SshError, match="cannot be changed"):
        ssh_argv(SshTarget("h", options=(opt,)), ["true"])


def test_bad_option_and_empty_command() -> None:
    with pytest.raises(SshError, match="Key=Value"):
        ssh_argv(SshTarget("h", options=("ProxyJump",)), ["true"])
    with pytest.raises(ValueError):
        remote_command([])


@pytest.mark.parametrize(("text", "user", "host", "port"), [
    ("gpu1", None, "gpu1", None), ("ana@gpu1", "ana", "gpu1", None),
    ("ana@10.0.0.5:2200", "ana", "10.0.0.5", 2200),
    ("[::1]:22", None, "::1", 22),
])
def test_parse_target(text: str, user: str | None, host: str, port: int | None) -> None:
    t = parse_target(text)
    assert (t.user, t.host, t.port) == (user, host, port)


@pytest.mark.parametrize("text", ["", "a b", "-oProxyCommand=x", "h:99999"])
def test_parse_target_rejects(text: str) -> None:
    with pytest.raises(SshError):
        parse_target(text)


def test_real_command_through_sshd(sshd: Sshd) -> None:  # noqa: F811
    argv = ssh_argv(sshd.target(), ["printf", "%s|", "a b", "$HOME", "it's"], cwd="/")
    out = subprocess.run(argv, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr + sshd.log()
    assert out.stdout == "a b|$HOME|it's|"
    check_connection(sshd.target())


def test_remote_exit_code_passes_through(sshd: Sshd) -> None:  # noqa: F811
    argv = ssh_argv(sshd.target(), ["sh", "-c", "echo oops >&2; exit 7"])
    out = subprocess.run(argv, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert (out.returncode, out.stderr.strip()) == (7, "oops")


def test_scp_copies_back(sshd: Sshd, tmp_path: Path) -> None:  # noqa: F811
    src = tmp_path / "remote dir"
    src.mkdir()
    (src / "r.bin").write_bytes(b"\x00\x01report")
    dest = tmp_path / "back"
    dest.mkdir()
    out = subprocess.run(scp_from_argv(sshd.target(), [str(src / "r.bin")], dest), capture_output=True,
                         text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr
    assert (dest / "r.bin").read_bytes() == b"\x00\x01report"


def test_unknown_host_key(sshd: Sshd, tmp_path: Path) -> None:  # noqa: F811
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    with pytest.raises(SshError, match=r"is not in known_hosts, and Kernelscope never accepts unknown"):
        check_connection(sshd.target(known_hosts=empty))
    assert empty.read_text() == ""  # nothing was learned


def test_host_key_mismatch(sshd: Sshd, tmp_path: Path) -> None:  # noqa: F811
    other = keygen(tmp_path / "other_host")
    kh = tmp_path / "known_hosts"
    kh.write_text(f"[127.0.0.1]:{sshd.port} {' '.join(other.split()[:2])}\n")
    with pytest.raises(SshError, match="does not match the one in known_hosts"):
        check_connection(sshd.target(known_hosts=kh))


def test_refused_key(sshd: Sshd, tmp_path: Path) -> None:  # noqa: F811
    keygen(tmp_path / "stranger")
    with pytest.raises(SshError, match="refused our SSH key"):
        check_connection(sshd.target(identity_file=tmp_path / "stranger"))


def test_connection_refused(tmp_path: Path) -> None:
    from tests.engine.sshd_fixture import free_port

    t = SshTarget("127.0.0.1", port=free_port(), known_hosts=tmp_path / "kh", connect_timeout_s=5)
    with pytest.raises(SshError, match="refused the connection"):
        check_connection(t)
