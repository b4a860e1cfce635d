"""What a Git source is: the spec (url, ref, path, depth, auth, verify), the `Revision` a
fetch returns, and the two pure helpers that keep secrets out of text (`scrub`) and
host keys checked (`ssh_command`). Pure data and string work; `orksync.source.git` does the
I/O. A spec holds file paths and variable names, never a secret value."""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path, PurePosixPath

from orksync.errors import SourceError

DEFAULT_TIMEOUT = 60.0
_SHA_RE = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
_URL_PASSWORD_RE = re.compile(r"(?P<head>[a-z][a-z0-9+.-]*://[^/\s:@]*):[^/\s@]*@", re.I)


class VerifyMode(StrEnum):
    GPG = "gpg"
    SSH = "ssh"


@dataclass(frozen=True, slots=True, kw_only=True)
class GitAuth:
    """Where the credentials are. Only file paths and variable names; never a secret value.

    HTTPS: `username` (or `username_file` / `username_env`) and a password or token from
    `password_file` or `password_env`; with a token alone the username defaults to "git".
    SSH: `ssh_key_file` and `known_hosts_file`; host keys are always checked strictly."""

    username: str = ""
    username_file: Path | None = None
    username_env: str = ""
    password_file: Path | None = None
    password_env: str = ""
    ssh_key_file: Path | None = None
    known_hosts_file: Path | None = None

    @property
    def has_password(self) -> bool:
        return self.password_file is not None or bool(self.password_env)

    def read_credentials(self) -> tuple[str, str] | None:
        """(username, password) read now (files and variables may rotate), or None."""
        if not self.has_password:
            return None
        password = _read_secret(self.password_file, self.password_env, "password")
        username = self.username
        if self.username_file is not None or self.username_env:
            username = _read_secret(self.username_file, self.username_env, "username")
        return username or "git", password


def _read_secret(path: Path | None, env: str, what: str) -> str:
    if path is not None:
        try:
            value = path.read_text(encoding="utf-8")
        except OSError as err:
            raise SourceError(f"cannot read the {what} file: {err.strerror}",
                              subject=str(path)) from None
        value = value.rstrip("\r\n")
        source = str(path)
    else:
        if env not in os.environ:
            raise SourceError(f"the environment variable {env} holding the {what} is not set")
        value = os.environ[env]
        source = f"${env}"
    if not value or "\n" in value or "\0" in value:
        raise SourceError(f"the {what} in {source} is empty or has several lines")
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class GitVerify:
    """Signature verification: `ssh` with an allowed-signers file, or `gpg` with a public
    keyring file (imported into a private GnuPG home) or an existing `gpg_home`."""

    mode: VerifyMode
    allowed_signers_file: Path | None = None
    keyring: Path | None = None
    gpg_home: Path | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", VerifyMode(self.mode))
        if self.mode is VerifyMode.SSH and self.allowed_signers_file is None:
            raise SourceError("verify mode ssh needs allowed_signers_file")
        if self.mode is VerifyMode.GPG and self.keyring is None and self.gpg_home is None:
            raise SourceError("verify mode gpg needs keyring or gpg_home")


@dataclass(frozen=True, slots=True, kw_only=True)
class GitSourceSpec:
    """One ref of one repository. `ref` is a branch, a tag, a full ref name (`refs/...`)
    or a full commit sha; `semver`, when given, a range that replaces `ref`: the highest
    tag satisfying it (orksync.source.semver); `path` a subdirectory; `depth` 1 is
    shallow, 0 full history."""

    url: str
    ref: str = "main"
    semver: str = ""
    path: str = ""
    depth: int = 1
    auth: GitAuth = field(default_factory=GitAuth)
    verify: GitVerify | None = None
    timeout: float = DEFAULT_TIMEOUT

    def __post_init__(self) -> None:
        if not self.url:
            raise SourceError("the git source needs a url")
        if _URL_PASSWORD_RE.search(self.url):
            raise SourceError("the url must not carry a password; use auth.password_file "
                              "or auth.password_env", subject=scrub(self.url))
        if not self.ref or self.ref.startswith("-") or any(
                c.isspace() or c in "~^:?*[\\" for c in self.ref):
            raise SourceError(f"invalid ref {self.ref!r}", subject=self.url)
        if self.url.startswith("-"):
            raise SourceError("invalid url", subject=self.url)
        pure = PurePosixPath(self.path)
        if pure.is_absolute() or ".." in pure.parts:
            raise SourceError(f"path {self.path!r} must be relative and stay inside the "
                              "repository", subject=self.url)
        if self.depth < 0:
            raise SourceError(f"depth must be 0 (full) or positive, not {self.depth}",
                              subject=self.url)
        if self.timeout <= 0:
            raise SourceError("timeout must be positive", subject=self.url)
        if self.semver:
            from orksync.source.semver import check_range

            check_range(self.semver)

    @property
    def wanted(self) -> str:
        """The ref as the logs name it: the branch, tag or sha, or `semver <range>`."""
        return f"semver {self.semver}" if self.semver else self.ref

    @property
    def pinned_sha(self) -> str | None:
        """The commit when `ref` is a full sha: it never moves."""
        return self.ref.lower() if _SHA_RE.match(self.ref.lower()) else None


@dataclass(frozen=True, slots=True, kw_only=True)
class Revision:
    """What `fetch()` checked out. `path` is the subdirectory (`spec.path`) in the working
    copy; `changed` is False when the sha is the one the previous fetch returned;
    `duration` the seconds `fetch()` took."""

    sha: str
    path: Path
    changed: bool
    message: str
    duration: float = 0.0


def scrub(text: str, secrets: Sequence[str] = ()) -> str:
    """`text` without URL passwords and without any of `secrets` (and their encodings)."""
    text = _URL_PASSWORD_RE.sub(r"\g<head>:***@", text)
    for secret in sorted(secrets, key=len, reverse=True):
        if secret:
            text = text.replace(secret, "***")
    return text


def ssh_command(auth: GitAuth) -> str:
    """The GIT_SSH_COMMAND: strict host key checking, only the configured key, no prompt."""
    parts = ["ssh"]
    if auth.ssh_key_file is not None:
        parts += ["-i", os.path.abspath(auth.ssh_key_file), "-o", "IdentitiesOnly=yes"]
    parts += ["-o", "StrictHostKeyChecking=yes"]
    if auth.known_hosts_file is not None:
        known = os.path.abspath(auth.known_hosts_file)
        if any(c.isspace() for c in known):  # ssh splits this option's value on blanks
            known = f'"{known}"'
        parts += ["-o", f"UserKnownHostsFile={known}"]
    parts += ["-o", "BatchMode=yes"]
    return shlex.join(parts)
