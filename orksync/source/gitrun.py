"""Running one git command for `orksync.source.git`: a controlled environment, credentials
through a credential helper defined in that environment, a timeout that kills the whole
process group, and scrubbed error text.

Credentials reach git only through the environment of the git process: a credential
helper scoped to the remote's `scheme://host[:port]`, given as `GIT_CONFIG_*` variables,
prints two environment variables with the shell builtin `printf`. So the secret is never
in a URL, in `.git/config`, in a file, or in the argv of any process (`ps`), and the
user's own credential helpers are switched off so that nothing stores it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import signal
import subprocess
import urllib.parse
from collections.abc import Mapping, Sequence
from pathlib import Path

from orksync.errors import SourceError
from orksync.source.gitspec import scrub

log = logging.getLogger("orksync.source.git")

_ASKED_USER = "ORKSYNC_GIT_USERNAME"
_ASKED_PASSWORD = "ORKSYNC_GIT_PASSWORD"  # a variable name, not a secret
# Its command line shows only variable names; it answers `get` only, so nothing is stored.
_CREDENTIAL_HELPER = (
    "!f() { test \"$1\" = get || return 0; "
    f"printf 'username=%s\\npassword=%s\\n' \"${_ASKED_USER}\" \"${_ASKED_PASSWORD}\"; }}; f"
)
# Inherited GIT_* variables that may stay (TLS trust, isolation of the user config).
_KEPT_GIT_ENV = frozenset({
    "GIT_SSL_CAINFO", "GIT_SSL_CAPATH", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM",
    "GIT_CONFIG_NOSYSTEM", "GIT_EXEC_PATH",
})
_NETWORK_HINTS = (
    "unable to access", "could not read from remote", "unable to connect",
    "connection refused", "could not resolve", "authentication failed",
    "could not read username", "could not read password", "terminal prompts disabled",
    "repository not found", "does not appear to be a git repository", "timed out",
    "host key verification failed", "permission denied", "the remote end hung up",
    "not our ref", "couldn't find remote ref", "no such remote ref",
)


class GitFailed(Exception):
    """A git command exited non-zero; `stderr` is already scrubbed."""

    def __init__(self, op: str, stderr: str) -> None:
        self.op = op
        self.stderr = stderr
        super().__init__(f"{op}: {stderr}" if stderr else op)

    @property
    def remote_fault(self) -> bool:
        """Whether the remote (network, auth, missing ref) failed rather than the local
        repository, so that re-cloning cannot help."""
        low = self.stderr.lower()
        return any(hint in low for hint in _NETWORK_HINTS)


class GitRunner:
    """Runs git for one source: `url` (already scrubbed, for messages), the
    GIT_SSH_COMMAND, the timeout, and the secrets to scrub from any text."""

    def __init__(self, *, url: str, remote_url: str, ssh_command: str, timeout: float) -> None:
        self.url = url
        self.remote_url = remote_url
        self.ssh_command = ssh_command
        self.timeout = timeout
        self.secrets: Sequence[str] = ()

    def scrub(self, text: str) -> str:
        return scrub(text, self.secrets)

    def env(self, *, repo: Path | None, creds: tuple[str, str] | None,
            config: Mapping[str, str], extra_env: Mapping[str, str]) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("GIT_") or k in _KEPT_GIT_ENV}
        env.pop("SSH_ASKPASS", None)
        env.update({"LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0",
                    "GIT_SSH_COMMAND": self.ssh_command})
        if repo is not None:  # never search parent directories for another repository
            env["GIT_DIR"] = str(repo / ".git")
            env["GIT_WORK_TREE"] = str(repo)
        cfg: list[tuple[str, str]] = [
            ("advice.detachedHead", "false"),
            ("gc.autoDetach", "false"),  # no background gc racing a swap or a delete
        ]
        if creds is not None:
            env[_ASKED_USER], env[_ASKED_PASSWORD] = creds
            cfg.append(("credential.helper", ""))  # drop the user's helpers (no storing)
            scope = credential_scope(self.remote_url)
            cfg.append((f"credential.{scope}.helper" if scope else "credential.helper",
                        _CREDENTIAL_HELPER))
        cfg += list(config.items())
        env["GIT_CONFIG_COUNT"] = str(len(cfg))
        for i, (key, value) in enumerate(cfg):
            env[f"GIT_CONFIG_KEY_{i}"] = key
            env[f"GIT_CONFIG_VALUE_{i}"] = value
        env.update(extra_env)
        return env

    def run(self, args: list[str], *, op: str, cwd: Path, repo: Path | None = None,
            creds: tuple[str, str] | None = None, stdin: str | None = None,
            config: Mapping[str, str] | None = None,
            extra_env: Mapping[str, str] | None = None) -> str:
        """Run `git ARGS` in `cwd` (or as `repo`'s git dir and work tree) and return its
        stdout. Raises `GitFailed` on a non-zero exit, `SourceError` on a timeout (the
        process group is killed) or when git cannot be started."""
        env = self.env(repo=repo, creds=creds, config=config or {}, extra_env=extra_env or {})
        argv = ["git", *args]
        log.debug("git source %s: %s", self.url, self.scrub(shlex.join(argv)))
        if not cwd.is_dir():
            raise GitFailed(op, f"{cwd} does not exist")
        try:
            proc = subprocess.Popen(
                argv, cwd=cwd, env=env, text=True, start_new_session=True,
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except OSError as err:
            raise SourceError(f"cannot run git {op}: {err}", subject=self.url) from None
        try:
            out, err_text = proc.communicate(stdin, timeout=self.timeout)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            raise SourceError(f"git {op} timed out after {self.timeout:g}s",
                              subject=self.url) from None
        if proc.returncode != 0:
            text = self.scrub(err_text.strip())
            raise GitFailed(op, text[-1000:] or f"exit status {proc.returncode}")
        return out


def kill_group(proc: subprocess.Popen[str]) -> None:
    """Kill a process started with `start_new_session=True` and all its children."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):  # a child that left the group
        proc.communicate(timeout=5)


def credential_scope(url: str) -> str:
    """`scheme://host[:port]` for URL-scoped credential config; "" when not http(s)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme in ("http", "https") and parts.hostname:
        return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"
    return ""
