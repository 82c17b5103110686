"""Opt-in confinement for run_command (the `sandbox` setting).

- "none" (default): the command runs as you, with everything you can read, write and reach.
- "bwrap" (Linux, bubblewrap): the whole filesystem read-only, the workspace writable except its
  `.git` folder, an empty private /tmp, /run and $HOME, no network, its own process and IPC
  namespaces, and it dies with teachback.
- "sandbox-exec" (macOS): writes only in the workspace (not its `.git`) and the temp folders, no
  reading of file contents under $HOME outside the workspace, no IP network.
- "auto": whichever of the two this system has.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

# SBPL: later rules win over earlier ones; paths come in as parameters, so no quoting is needed.
SANDBOX_EXEC_PROFILE = """(version 1)
(allow default)
(deny network-outbound (remote ip))
(deny network-inbound (local ip))
(deny file-write*)
(allow file-write* (subpath (param "WORKSPACE")) (subpath "/private/tmp") (subpath "/private/var/folders")
    (literal "/dev/null") (literal "/dev/zero") (literal "/dev/tty") (regex #"^/dev/fd/"))
(deny file-write* (subpath (param "GIT_DIR")))
(deny file-read-data (subpath (param "HOME_DIR")))
(allow file-read-data (subpath (param "WORKSPACE")))
"""

INSTALL_BWRAP = (
    "install bubblewrap (Debian/Ubuntu: apt install bubblewrap; Fedora: dnf install bubblewrap; "
    "Arch: pacman -S bubblewrap)"
)


class SandboxUnavailable(Exception):
    """The configured sandbox cannot run here; the message says what to install or set instead."""


def sandbox_name(mode: str) -> str:
    """The sandbox `mode` means on this system: "none", "bwrap" or "sandbox-exec"."""
    if mode != "auto":
        return mode
    if sys.platform == "darwin":
        return "sandbox-exec"
    if sys.platform.startswith("linux"):
        return "bwrap"
    raise SandboxUnavailable(
        f'sandbox = "auto" knows no sandbox for {sys.platform} (bubblewrap on Linux, sandbox-exec on macOS). '
        'Set sandbox = "none" in teachback.toml to run commands unconfined.'
    )


def confined_argv(mode: str, workspace: Path, command: str, home: Path | None = None) -> list[str] | None:
    """The argument vector that runs `command` with /bin/sh in `workspace` under the sandbox
    `mode`, or None for "none" (run it as is)."""
    name = sandbox_name(mode)
    home = Path(home or Path.home()).resolve()
    if name == "none":
        return None
    if name == "bwrap":
        return bwrap_argv(_find("bwrap", f"{INSTALL_BWRAP}"), workspace, command, home)
    return sandbox_exec_argv(_find("sandbox-exec", "it ships with macOS in /usr/bin"), workspace, command, home)


def bwrap_argv(exe: str, workspace: Path, command: str, home: Path) -> list[str]:
    ws = str(workspace)
    argv = [exe, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--tmpfs", "/run"]
    if home.is_dir() and home != Path("/"):
        argv += ["--tmpfs", str(home)]  # before the workspace's bind, which may lie under it
    argv += ["--bind", ws, ws]
    if (workspace / ".git").is_dir():
        argv += ["--ro-bind", str(workspace / ".git"), str(workspace / ".git")]
    return argv + [
        "--unshare-net",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--die-with-parent",
        "--chdir",
        ws,
        "--setenv",
        "TEACHBACK_SANDBOX",
        "bwrap",
        "--",
        "/bin/sh",
        "-c",
        command,
    ]


def sandbox_exec_argv(exe: str, workspace: Path, command: str, home: Path) -> list[str]:
    params = {"WORKSPACE": workspace, "GIT_DIR": workspace / ".git", "HOME_DIR": home}
    defines = [arg for key, value in params.items() for arg in ("-D", f"{key}={value}")]
    return [exe, *defines, "-p", SANDBOX_EXEC_PROFILE, "/bin/sh", "-c", command]


def setup_failure(mode: str, returncode: int | None, output: str) -> str | None:
    """What to tell the user when the sandbox itself, not the command, failed to start."""
    if sandbox_name(mode) != "bwrap" or returncode != 1 or not output.startswith("bwrap: "):
        return None
    return (
        f"bubblewrap could not start the sandbox ({output.splitlines()[0]}). User namespaces may be off here: "
        "allow them (sysctl kernel.unprivileged_userns_clone=1; on Ubuntu 24.04+ an AppArmor profile for bwrap), "
        'or set sandbox = "none" in teachback.toml to run commands unconfined. The command did not run.'
    )


def _find(program: str, how: str) -> str:
    found = shutil.which(program)
    if found is None:
        raise SandboxUnavailable(
            f"run_command is set to run in a sandbox, but {program} is not installed: {how}, "
            'or set sandbox = "none" in teachback.toml to run commands unconfined. The command did not run.'
        )
    return found
