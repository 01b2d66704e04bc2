"""Run commands on an SSH-attached GPU host and copy files back, with the system ``ssh``/``scp``.

Why the system OpenSSH client rather than paramiko or asyncssh:

* it is what users already configured: ``~/.ssh/config`` aliases, ``ProxyJump`` bastions, agents,
  hardware keys and certificates all work with no code of ours;
* host-key checking is the mature OpenSSH implementation (``known_hosts``, hashed entries,
  ``@cert-authority``), not a re-implementation we would have to keep right;
* no passwords can reach us: we run it with ``BatchMode=yes`` so it never prompts, and with
  ``StrictHostKeyChecking=yes`` so an unknown or changed host key is refused, never learned;
* the argv stays a pure, testable function, and cancel is an ordinary process-group kill.

Every argv here is a list (no local shell). The *remote* side of ssh always receives one command
string that the remote login shell parses; :func:`remote_command` builds it with ``shlex.quote`` for
every word, so no argument is ever re-split or expanded.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from engine.system.errors import KernelscopeError

# Options that would weaken the checks above; users may not override them through `options`.
_LOCKED_OPTIONS = {
    "batchmode", "stricthostkeychecking", "passwordauthentication", "kbdinteractiveauthentication",
    "challengeresponseauthentication", "permitlocalcommand", "localcommand",
}
_TARGET_RE = re.compile(r"^(?:(?P<user>[^@\s]+)@)?(?P<host>\[[^\]]+\]|[^:@\s]+)(?::(?P<port>\d+))?$")


class SshError(KernelscopeError):
    """The remote host could not be reached, authenticated or trusted."""


@dataclass(frozen=True)
class SshTarget:
    """Where and how to reach an attached GPU host.

    Attributes:
        host: Host name, address or an alias from ``~/.ssh/config``.
        user: Login name (None: ssh's default, i.e. the config's or the local user).
        port: TCP port (None: ssh's default).
        identity_file: Private key to use (then only that key is offered: ``IdentitiesOnly=yes``).
        known_hosts: A known_hosts file to use instead of the user's (tests, managed fleets).
        options: Extra ``Key=Value`` ssh options (e.g. ``ProxyJump=bastion``); options that would
            turn off host-key checking or allow prompts are refused.
        connect_timeout_s: Seconds to wait for the TCP connection.
    """

    host: str
    user: str | None = None
    port: int | None = None
    identity_file: Path | None = None
    known_hosts: Path | None = None
    options: tuple[str, ...] = field(default_factory=tuple)
    connect_timeout_s: int = 15

    @property
    def display(self) -> str:
        """``user@host:port`` as the user would write it."""
        s = f"{self.user}@{self.host}" if self.user else self.host
        return f"{s}:{self.port}" if self.port else s


def parse_target(text: str) -> SshTarget:
    """Parse ``[user@]host[:port]`` into an :class:`SshTarget`.

    Raises:
        SshError: the text is not a host specification.
    """
    m = _TARGET_RE.match(text.strip())
    if not m or m.group("host").startswith("-"):
        raise SshError(f"{text!r} is not a host; write it as HOST, USER@HOST or USER@HOST:PORT.")
    port = int(m.group("port")) if m.group("port") else None
    if port is not None and not 0 < port < 65536:
        raise SshError(f"Port {port} in {text!r} is out of range; use 1-65535.")
    return SshTarget(host=m.group("host").strip("[]"), user=m.group("user"), port=port)


def ssh_options(target: SshTarget) -> list[str]:
    """The ``-o``/``-i`` options every ssh and scp call gets (pure; tested).

    Ours come first: OpenSSH keeps the first value given for an option, so they cannot be overridden
    by ``~/.ssh/config`` or by ``target.options``.

    Raises:
        SshError: ``target.options`` tries to change a locked option or is not ``Key=Value``.
    """
    opts = [
        "-o", "BatchMode=yes",
        "-o", "StrictHostKeyChecking=yes",
        "-o", "PasswordAuthentication=no",
        "-o", "KbdInteractiveAuthentication=no",
        "-o", f"ConnectTimeout={int(target.connect_timeout_s)}",
        "-o", "ServerAliveInterval=15",
        "-o", "ServerAliveCountMax=4",
    ]
    if target.known_hosts is not None:
        opts += ["-o", f"UserKnownHostsFile={target.known_hosts}", "-o", "GlobalKnownHostsFile=/dev/null"]
    if target.identity_file is not None:
        opts += ["-i", str(target.identity_file), "-o", "IdentitiesOnly=yes"]
    for opt in target.options:
        key, sep, _value = opt.partition("=")
        if not sep or not key.strip() or any(c.isspace() for c in key.strip()):
            raise SshError(
                f"The ssh option {opt!r} is not of the form Key=Value; write e.g. ProxyJump=bastion."
            )
        if key.strip().lower() in _LOCKED_OPTIONS:
            raise SshError(
                f"The ssh option {key.strip()} cannot be changed: Kernelscope always checks host keys and "
                "never prompts; add the host's key to known_hosts (ssh-keyscan HOST >> ~/.ssh/known_hosts, "
                "after checking its fingerprint) instead."
            )
        opts += ["-o", opt]
    return opts


def remote_command(remote_argv: list[str], cwd: str | None = None) -> str:
    """The single command string the remote shell receives (each word quoted; pure; tested)."""
    if not remote_argv:
        raise ValueError("remote_argv is empty")
    cmd = shlex.join(remote_argv)
    if cwd is not None:
        cmd = f"cd {shlex.quote(cwd)} && {cmd}"
    return cmd


def ssh_argv(target: SshTarget, remote_argv: list[str], *, cwd: str | None = None) -> list[str]:
    """The local argv that runs ``remote_argv`` on ``target`` (pure; tested).

    Args:
        target: The host.
        remote_argv: The program and its arguments on the remote host (each word is quoted for the
            remote shell, so spaces and ``$`` arrive unchanged).
        cwd: Remote directory to ``cd`` into first.
    """
    argv = ["ssh", *ssh_options(target)]
    if target.port is not None:
        argv += ["-p", str(target.port)]
    if target.user:
        argv += ["-l", target.user]
    argv += ["--", target.host, remote_command(remote_argv, cwd)]
    return argv


def scp_from_argv(target: SshTarget, remote_paths: list[str], local_dir: Path, *,
                  legacy: bool = False) -> list[str]:
    """The argv that copies ``remote_paths`` (files or folders) from ``target`` into ``local_dir``.

    Uses scp's SFTP mode (``-s``) so remote paths are not parsed by a remote shell. ``legacy``: the
    old SCP protocol (``-O``) instead, for hosts without an SFTP server (sshd without a ``Subsystem
    sftp`` line: ``scp -s`` then fails with "Connection closed"); the remote shell parses its paths,
    so each is quoted for it.
    """
    argv = ["scp", "-O" if legacy else "-s", "-r", "-p", "-q", *ssh_options(target)]
    if target.port is not None:
        argv += ["-P", str(target.port)]
    host = f"[{target.host}]" if ":" in target.host else target.host
    prefix = f"{target.user}@{host}" if target.user else host
    argv += ["--", *[f"{prefix}:{shlex.quote(p) if legacy else p}" for p in remote_paths], str(local_dir)]
    return argv


#: the local shell around ``ssh HOST cat FILE``: $1 is the local file; the rest is the ssh argv. The
#: bytes go to FILE.part, renamed to FILE once ssh succeeded (no half file is ever left as FILE)
_CAT_TO_FILE = ('out=$1; shift; "$@" > "$out.part" && mv -f -- "$out.part" "$out"; rc=$?; '
                'rm -f -- "$out.part"; exit "$rc"')


def cat_to_file_argv(target: SshTarget, remote_path: str, local_file: Path) -> list[str]:
    """The argv that copies one remote file with ``ssh HOST cat FILE > local_file`` (pure; tested).

    For hosts that have neither an SFTP server nor scp. A local ``sh`` does the redirection (the argv
    stays a list: the paths are arguments, never shell text); the remote path is quoted for the
    remote shell by :func:`ssh_argv`.
    """
    return ["sh", "-c", _CAT_TO_FILE, "kernelscope-copy", str(local_file),
            *ssh_argv(target, ["cat", "--", remote_path])]


def copy_back_methods(target: SshTarget, remote_paths: list[str],
                      local_dir: Path) -> list[tuple[str, list[list[str]]]]:
    """The ways to copy ``remote_paths`` into ``local_dir``, in the order to try them (pure; tested).

    Each is (name, argvs run one after the other): scp over SFTP; scp's legacy protocol (``-O``) for
    hosts without an SFTP server; ``ssh HOST cat FILE`` per file for hosts without scp either.
    """
    return [
        ("scp", [scp_from_argv(target, remote_paths, local_dir)]),
        ("scp -O (legacy protocol)", [scp_from_argv(target, remote_paths, local_dir, legacy=True)]),
        ("ssh cat", [cat_to_file_argv(target, p, local_dir / p.rstrip("/").rsplit("/", 1)[-1])
                     for p in remote_paths]),
    ]


def is_connection_failure(stderr: str) -> bool:
    """True when ssh itself could not connect, authenticate or trust the host.

    Every way to copy would then fail the same; False for a failure of the copy itself (no SFTP
    server, no scp, a missing file ...).
    """
    return _trust_or_reach_failure(SshTarget("host"), stderr) is not None


def login_command(target: SshTarget) -> str:
    """The ``ssh`` command line a user types to reach the target (``ssh -p 2299 root@127.0.0.1``)."""
    words = ["ssh"]
    if target.port:
        words += ["-p", str(target.port)]
    if target.known_hosts is not None:
        words += ["-o", f"UserKnownHostsFile={target.known_hosts}"]
    words.append(f"{target.user}@{target.host}" if target.user else target.host)
    return " ".join(words)


def keyscan_command(target: SshTarget) -> str:
    """The ``ssh-keyscan`` line that adds the target's host key to the known_hosts file in use."""
    port = f"-p {target.port} " if target.port else ""
    file = str(target.known_hosts) if target.known_hosts is not None else "~/.ssh/known_hosts"
    return f"ssh-keyscan {port}{target.host} >> {file}"


def explain_ssh_failure(target: SshTarget, returncode: int, stderr: str) -> str | None:
    """One sentence for a failed ssh/scp call, or None if ssh itself did not fail.

    ssh exits with 255 for its own errors; any other code is the remote command's. Every command the
    sentence suggests is one ssh accepts as printed (``ssh -p 2299 root@127.0.0.1``, never
    ``ssh root@127.0.0.1:2299``).
    """
    why = _trust_or_reach_failure(target, stderr)
    if why is not None:
        return why
    if "scp: Connection closed" in stderr:
        return (f"scp over SFTP could not copy from {target.display} (scp: Connection closed): the host may "
                "have no SFTP server (no `Subsystem sftp` line in its sshd_config); `scp -O` copies over the "
                "legacy protocol instead.")
    if returncode == 255:
        last = [ln for ln in stderr.strip().splitlines() if ln.strip()]
        detail = last[-1].strip() if last else "no message"
        return (f"ssh to {target.display} failed ({detail}); run `{login_command(target)}` by hand to see "
                "why.")
    return None


def _trust_or_reach_failure(target: SshTarget, stderr: str) -> str | None:
    """The sentence for a host that could not be trusted, reached or logged in to; else None."""
    text = stderr
    where = target.display
    if "REMOTE HOST IDENTIFICATION HAS CHANGED" in text or "Host key for" in text and "has changed" in text:
        return (
            f"The host key of {where} does not match the one in known_hosts, so the connection was refused "
            "(the host was reinstalled, or someone is intercepting the connection); check the new "
            "fingerprint with the host's administrator, then run `ssh-keygen -R "
            f"{f'[{target.host}]:{target.port}' if target.port else target.host}` and connect once with "
            f"`{login_command(target)}` to accept it."
        )
    if "Host key verification failed" in text or "No ED25519 host key is known" in text or (
        "host key is known" in text
    ):
        return (
            f"{where} is not in known_hosts, and Kernelscope never accepts unknown host keys; connect once "
            f"with `{login_command(target)}` and accept its key after checking the fingerprint, or add it "
            f"with `{keyscan_command(target)}` after checking the fingerprint that prints."
        )
    if "Could not resolve hostname" in text or "Name or service not known" in text:
        return f"The host name {target.host} could not be resolved; check the spelling or your ~/.ssh/config."
    if "Permission denied (" in text:  # ssh's login failure, not a remote file's "cat: F: Permission denied"
        return (
            f"{where} refused our SSH key (only keys and the ssh agent are used, never passwords); add your "
            "public key to ~/.ssh/authorized_keys there, load it into ssh-agent, or pass the right "
            "identity file."
        )
    if "Connection refused" in text:
        return f"{where} refused the connection; check that sshd runs there and the port is right."
    if "timed out" in text or "No route to host" in text or "Network is unreachable" in text:
        return f"{where} could not be reached (the connection timed out); check the network or VPN."
    if "Too many authentication failures" in text:
        return f"{where} refused after too many keys were offered; pass the one key to use as identity file."
    return None


def check_connection(target: SshTarget, timeout_s: float = 30.0) -> None:
    """Run ``true`` on the host; return if it worked.

    Raises:
        SshError: the host was not reached, not trusted, or refused the key (one sentence).
    """
    try:
        proc = subprocess.run(
            ssh_argv(target, ["true"]), stdin=subprocess.DEVNULL, capture_output=True, text=True,
            timeout=timeout_s, check=False,
        )
    except FileNotFoundError as exc:
        raise SshError("The ssh program was not found; install the OpenSSH client (openssh-client).") from exc
    except subprocess.TimeoutExpired as exc:
        raise SshError(
            f"{target.display} did not answer within {timeout_s:.0f} s; check the network."
        ) from exc
    if proc.returncode != 0:
        raise SshError(
            explain_ssh_failure(target, proc.returncode, proc.stderr)
            or f"`true` failed on {target.display} (exit {proc.returncode}); check the remote login shell."
        )
