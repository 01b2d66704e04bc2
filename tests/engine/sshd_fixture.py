"""A real OpenSSH server on 127.0.0.1 for tests (Debian: ``apt-get install -y openssh-server``).

Use from a test module (or a conftest) with::

    from tests.engine.sshd_fixture import sshd  # noqa: F401  (pytest fixture)

    def test_x(sshd):
        target = sshd.target()           # an SshTarget with key, port and known_hosts set
        ...

The server runs as the current user with a fresh host key, one authorized client key and a
known_hosts file that trusts exactly that host key, all under a temp folder. Tests skip (with the
install command) when sshd is not installed.
"""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from engine.system.ssh import SshTarget

SSHD_CANDIDATES = ["/usr/sbin/sshd", "/usr/local/sbin/sshd"]


def find_sshd() -> str | None:
    for p in SSHD_CANDIDATES:
        if os.access(p, os.X_OK):
            return p
    return shutil.which("sshd")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def keygen(path: Path) -> str:
    """Make an ed25519 key pair at path (no passphrase); return the public key line."""
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "kernelscope-test", "-f", str(path)],
        check=True, stdin=subprocess.DEVNULL,
    )
    return Path(f"{path}.pub").read_text().strip()


@dataclass
class Sshd:
    """A running sshd and the client material that can log in to it."""

    port: int
    user: str
    root: Path
    client_key: Path  # private key that authorized_keys accepts
    known_hosts: Path  # trusts exactly this server's host key
    host_pub: str
    proc: subprocess.Popen[bytes]

    def target(self, **overrides: object) -> SshTarget:
        fields: dict[str, object] = {
            "host": "127.0.0.1", "user": self.user, "port": self.port,
            "identity_file": self.client_key, "known_hosts": self.known_hosts, "connect_timeout_s": 10,
        }
        fields.update(overrides)
        return SshTarget(**fields)  # type: ignore[arg-type]

    def log(self) -> str:
        p = self.root / "sshd.log"
        return p.read_text(errors="replace") if p.exists() else ""


def start_sshd(root: Path) -> Sshd:
    sshd_bin = find_sshd()
    if sshd_bin is None:
        pytest.skip("sshd is not installed (Debian: apt-get install -y openssh-server)")
    root.mkdir(parents=True, exist_ok=True)
    host_key = root / "host_ed25519"
    client_key = root / "client_ed25519"
    host_pub = keygen(host_key)
    client_pub = keygen(client_key)
    auth = root / "authorized_keys"
    auth.write_text(client_pub + "\n")
    auth.chmod(0o600)
    port = free_port()
    user = getpass.getuser()
    known = root / "known_hosts"
    known.write_text(f"[127.0.0.1]:{port} {' '.join(host_pub.split()[:2])}\n")
    if os.geteuid() == 0:
        Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege-separation directory
    cfg = root / "sshd_config"
    cfg.write_text(
        "\n".join([
            f"Port {port}",
            "ListenAddress 127.0.0.1",
            f"HostKey {host_key}",
            f"AuthorizedKeysFile {auth}",
            f"PidFile {root / 'sshd.pid'}",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "PubkeyAuthentication yes",
            "PermitRootLogin prohibit-password",
            "StrictModes no",
            "UsePAM no",
            "PrintMotd no",
            "LogLevel VERBOSE",
            "Subsystem sftp internal-sftp",
            "",
        ])
    )
    log = (root / "sshd.log").open("wb")
    proc = subprocess.Popen(
        [sshd_bin, "-D", "-e", "-f", str(cfg)], stdout=log, stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"sshd exited: {(root / 'sshd.log').read_text(errors='replace')}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
        except OSError:
            time.sleep(0.05)
    else:
        proc.kill()
        raise RuntimeError("sshd did not start listening within 10 s")
    return Sshd(port, user, root, client_key, known, host_pub, proc)


def stop_sshd(server: Sshd) -> None:
    server.proc.terminate()
    try:
        server.proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        server.proc.kill()
        server.proc.wait()


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    """A real sshd on 127.0.0.1:<free port> for this test module."""
    server = start_sshd(tmp_path_factory.mktemp("sshd"))
    try:
        yield server
    finally:
        stop_sshd(server)
