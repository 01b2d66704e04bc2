"""engine.system.ssh: exact argv, and real connections through a real sshd on 127.0.0.1."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from engine.system.ssh import (
    SshError,
    SshTarget,
    cat_to_file_argv,
    check_connection,
    copy_back_methods,
    explain_ssh_failure,
    is_connection_failure,
    login_command,
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


def test_legacy_scp_and_ssh_cat_argv_exact() -> None:
    """The two ways to copy from a host without an SFTP server: ``scp -O`` (its paths are parsed by the
    remote shell, so quoted for it) and ``ssh HOST cat FILE`` into FILE.part, renamed when complete."""
    t = SshTarget("127.0.0.1", user="root", port=2299)
    remote = "/r/my run/$x.nsys-rep"
    assert scp_from_argv(t, [remote], Path("/l")) == [
        "scp", "-s", "-r", "-p", "-q", *BASE, "-P", "2299", "--", f"root@127.0.0.1:{remote}", "/l"]
    assert scp_from_argv(t, [remote], Path("/l"), legacy=True) == [
        "scp", "-O", "-r", "-p", "-q", *BASE, "-P", "2299", "--", "root@127.0.0.1:'/r/my run/$x.nsys-rep'",
        "/l"]
    cat = cat_to_file_argv(t, remote, Path("/l/out file.nsys-rep"))
    assert cat[:5] == ["sh", "-c", cat[2], "kernelscope-copy", "/l/out file.nsys-rep"]
    assert cat[5:] == ssh_argv(t, ["cat", "--", remote]) == [
        "ssh", *BASE, "-p", "2299", "-l", "root", "--", "127.0.0.1", "cat -- '/r/my run/$x.nsys-rep'"]
    methods = copy_back_methods(t, ["/r/a.sqlite", "/r/b c.nsys-rep"], Path("/l"))
    assert [name for name, _ in methods] == ["scp", "scp -O (legacy protocol)", "ssh cat"]
    assert methods[0][1] == [scp_from_argv(t, ["/r/a.sqlite", "/r/b c.nsys-rep"], Path("/l"))]
    assert methods[1][1] == [scp_from_argv(t, ["/r/a.sqlite", "/r/b c.nsys-rep"], Path("/l"), legacy=True)]
    assert methods[2][1] == [cat_to_file_argv(t, "/r/a.sqlite", Path("/l/a.sqlite")),
                             cat_to_file_argv(t, "/r/b c.nsys-rep", Path("/l/b c.nsys-rep"))]


def test_cat_to_file_leaves_no_half_file(tmp_path: Path) -> None:
    """The local half of ``ssh HOST cat FILE``: the bytes land in FILE only when the copy succeeded."""
    out = tmp_path / "r.bin"
    ok = ["sh", "-c", cat_to_file_argv(SshTarget("h"), "/x", out)[2], "kernelscope-copy", str(out),
          "printf", "a\\000b"]
    assert subprocess.run(ok, check=False).returncode == 0 and out.read_bytes() == b"a\x00b"
    bad = ["sh", "-c", ok[2], "kernelscope-copy", str(tmp_path / "r2.bin"), "sh", "-c", "printf half; exit 3"]
    assert subprocess.run(bad, check=False).returncode == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.bin"]


@pytest.mark.parametrize(("target", "login"), [
    (SshTarget("127.0.0.1", user="root", port=2299), "ssh -p 2299 root@127.0.0.1"),
    (SshTarget("gpu1"), "ssh gpu1"),
    (SshTarget("::1", port=22), "ssh -p 22 ::1"),
])
def test_hints_are_commands_ssh_accepts(target: SshTarget, login: str) -> None:
    """The sentence after a failure names ``ssh -p 2299 root@127.0.0.1``, never
    ``ssh root@127.0.0.1:2299`` (ssh takes no port in the host)."""
    assert login_command(target) == login
    msg = explain_ssh_failure(target, 255, "kex_exchange_identification: read: Connection reset by peer\n")
    assert msg is not None and f"run `{login}` by hand" in msg
    if target.port is not None:
        assert f"`ssh {target.display}`" not in msg  # ssh root@127.0.0.1:2299 is refused by ssh
    closed = explain_ssh_failure(target, 255, "scp: Connection closed\n")
    assert closed is not None and "no SFTP server" in closed and "`scp -O`" in closed
    assert not is_connection_failure("scp: Connection closed\n")
    assert is_connection_failure("Host key verification failed.\n")
    assert is_connection_failure("root@127.0.0.1: Permission denied (publickey).\n")
    assert is_connection_failure("ssh: connect to host 127.0.0.1 port 2299: Connection refused\n")
