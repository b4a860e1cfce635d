"""The only module that talks to git remotes: clone, poll, fetch, verify and check out.

`GitSource(spec, workdir).fetch()` keeps one working copy of one ref of one repository up
to date and returns the `Revision` it is at. I/O only and narrow: it never parses what it
checked out.

How (prior-art lesson 17, skip work when the source did not change):

* the first call clones shallow and single-ref (`git init` + `git fetch --depth N <ref>`
  into a fresh temporary directory, then renamed into place);
* later calls ask the remote with `git ls-remote` first; when the remote sha did not move
  nothing is fetched or checked out (`changed=False`); otherwise a shallow fetch and
  `git reset --hard` + `git clean -ffdx`, which also recovers from force-pushes;
* a full 40-hex `ref` pins a commit: it never moves, so the remote is asked only when the
  working copy is not at it yet;
* any git error on an existing clone means a corrupted working copy: re-clone from scratch
  into a fresh directory and swap it into place (one warning line says so);
* optional `git verify-commit` (ssh allowed-signers or gpg) before a revision is checked
  out: an unsigned revision is refused and the previous working copy stays;
* every git subprocess has a timeout; its whole process group is killed when it expires.

Secrets: credentials come from files or environment variables named in the spec, never
from the spec itself. They reach git only through the environment of the git process (a
URL-scoped credential helper given as `GIT_CONFIG_*` variables that prints two
variables), never in a URL, `.git/config` or a command line. Every message and log line is
scrubbed of them.

Plain `git` subprocesses rather than gitpython: timeouts, process-group kills and a
controlled environment per call are what this module is about.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path, PurePosixPath

from orksync.errors import SourceError

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 60.0
MESSAGE_LIMIT = 200
_SHA_RE = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
_URL_PASSWORD_RE = re.compile(r"(?P<head>[a-z][a-z0-9+.-]*://[^/\s:@]*):[^/\s@]*@", re.I)
_ASKED_USER = "ORKSYNC_GIT_USERNAME"
_ASKED_PASSWORD = "ORKSYNC_GIT_PASSWORD"  # a variable name, not a secret
# The credential helper: a shell function given in the environment of the git process. Its
# command line shows only variable names; printf is a shell builtin, so the values never
# appear in any argv. It answers `get` only, so nothing is ever stored.
_CREDENTIAL_HELPER = (
    "!f() { test \"$1\" = get || return 0; "
    f"printf 'username=%s\\npassword=%s\\n' \"${_ASKED_USER}\" \"${_ASKED_PASSWORD}\"; }}; f"
)
# Inherited GIT_* variables that may stay (TLS trust, test isolation of the user config).
_KEPT_GIT_ENV = frozenset({
    "GIT_SSL_CAINFO", "GIT_SSL_CAPATH", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM",
    "GIT_CONFIG_NOSYSTEM", "GIT_EXEC_PATH",
})


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
    or a full commit sha; `path` a subdirectory; `depth` 1 is shallow, 0 full history."""

    url: str
    ref: str = "main"
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
        parts += ["-i", str(auth.ssh_key_file), "-o", "IdentitiesOnly=yes"]
    parts += ["-o", "StrictHostKeyChecking=yes"]
    if auth.known_hosts_file is not None:
        parts += ["-o", f"UserKnownHostsFile={auth.known_hosts_file}"]
    parts += ["-o", "BatchMode=yes"]
    return shlex.join(parts)


class _GitFailed(Exception):
    """A git command failed; `stderr` is already scrubbed."""

    def __init__(self, op: str, stderr: str) -> None:
        self.op = op
        self.stderr = stderr
        super().__init__(f"{op}: {stderr}" if stderr else op)


@dataclass(slots=True)
class _Target:
    """What to fetch: a remote ref (with the local ref it lands in) or a pinned sha."""

    sha: str  # the remote sha as last seen (ls-remote) or the pinned one
    remote_ref: str = ""  # "" for a pinned sha
    local_ref: str = ""


class GitSource:
    """Keeps `workdir` at the newest commit of `spec.ref`. Not re-entrant across processes;
    calls from several threads are serialised."""

    def __init__(self, spec: GitSourceSpec, workdir: Path) -> None:
        self.spec = spec
        self.workdir = Path(workdir).absolute()
        self._lock = threading.Lock()
        self._last_good: Revision | None = None
        self._trusted = False  # the working copy was checked out (or cleaned) by us
        self._rejected: set[str] = set()
        self._gnupg_home: Path | None = None
        self._secrets: tuple[str, ...] = ()
        self._url = scrub(spec.url)

    @property
    def last_good(self) -> Revision | None:
        """The last revision `fetch()` returned; kept when a later fetch fails."""
        return self._last_good

    # ---------------------------------------------------------------- the one entry point

    def fetch(self) -> Revision:
        with self._lock:
            start = time.monotonic()
            creds = self.spec.auth.read_credentials()
            if creds is not None:
                user, password = creds
                basic = base64.b64encode(f"{user}:{password}".encode()).decode()
                self._secrets = (password, urllib.parse.quote(password, safe=""), basic)
            try:
                sha, message = self._sync(creds)
            except SourceError as err:
                log.warning("git source %s: %s", self._url, scrub(str(err), self._secrets))
                raise
            previous = self._last_good
            rev = Revision(
                sha=sha,
                path=self.workdir / self.spec.path if self.spec.path else self.workdir,
                changed=previous is None or previous.sha != sha,
                message=message,
                duration=time.monotonic() - start,
            )
            self._last_good = rev
            return rev

    # ---------------------------------------------------------------------- the steps

    def _sync(self, creds: tuple[str, str] | None) -> tuple[str, str]:
        target = self._resolve(creds)
        if target.sha in self._rejected:
            raise self._unsigned(target.sha)
        head = self._healthy_head()
        if head is not None and head == target.sha and self._trusted:
            prev = self._last_good
            if prev is not None and prev.sha == head:
                log.debug("git source %s: %s unchanged at %s", self._url, self.spec.ref,
                          head[:7])
                return head, prev.message
            return head, self._message(self.workdir, head)
        if head is not None:
            try:
                return self._update(target, creds, skip_fetch=head == target.sha)
            except _GitFailed as err:
                reason = str(err)
        elif self.workdir.is_dir() and any(self.workdir.iterdir()):
            reason = self._why_unhealthy()
        elif self._last_good is not None:
            reason = f"the working copy {self.workdir} is gone"
        else:
            reason = ""  # the first clone
        if reason:
            log.warning("git source %s: re-cloning into a fresh working copy: %s",
                        self._url, reason)
        return self._clone(target, creds)

    def _resolve(self, creds: tuple[str, str] | None) -> _Target:
        pinned = self.spec.pinned_sha
        if pinned is not None:
            return _Target(sha=pinned)
        ref = self.spec.ref
        # Like `git clone --branch`: a branch first, then a tag.
        candidates = [ref] if ref.startswith("refs/") else [f"refs/heads/{ref}",
                                                            f"refs/tags/{ref}"]
        patterns = [*candidates, *(f"{c}^{{}}" for c in candidates if c.startswith("refs/tags/"))]
        try:
            out = self._run(["ls-remote", "--", self.spec.url, *patterns], op="ls-remote",
                            cwd=self._outside_dir(), creds=creds)
        except _GitFailed as err:
            raise SourceError(f"git ls-remote failed: {err.stderr}", subject=self._url) from None
        refs: dict[str, str] = {}
        for line in out.splitlines():
            sha, _, name = line.partition("\t")
            refs[name.strip()] = sha.strip()
        for cand in candidates:
            if cand in refs:
                sha = refs.get(f"{cand}^{{}}", refs[cand])  # annotated tags peel to a commit
                local = ("refs/remotes/origin/" + cand.removeprefix("refs/heads/")
                         if cand.startswith("refs/heads/") else cand)
                return _Target(sha=sha, remote_ref=cand, local_ref=local)
        raise SourceError(f"ref {ref!r} not found on the remote", subject=self._url)

    def _update(self, target: _Target, creds: tuple[str, str] | None, *,
                skip_fetch: bool) -> tuple[str, str]:
        """Fetch into the existing clone and hard-reset it. `_GitFailed` means corrupted."""
        repo = self.workdir
        if not self._trusted:
            url = self._run(["config", "--get", "remote.origin.url"], op="read the remote url",
                            repo=repo).strip()
            if url != self.spec.url:
                raise _GitFailed("check the remote url", "the working copy is a clone of "
                                 f"{scrub(url)}, not of the configured url")
        sha = target.sha if skip_fetch else self._fetch_into(repo, target, creds)
        self._validate(repo, sha)
        self._run(["reset", "-q", "--hard", sha], op="reset --hard", repo=repo)
        self._run(["clean", "-ffdxq"], op="clean", repo=repo)
        self._trusted = True
        message = self._message(repo, sha)
        log.info("git source %s: %s at %s %s", self._url, self.spec.ref, sha[:7], message)
        return sha, message

    def _clone(self, target: _Target, creds: tuple[str, str] | None) -> tuple[str, str]:
        """Clone into a fresh directory beside the workdir, then swap it into place."""
        parent = self.workdir.parent
        parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{self.workdir.name}.clone-", dir=parent))
        try:
            try:
                self._run(["init", "-q", str(tmp)], op="init", cwd=parent)
                self._run(["config", "core.logAllRefUpdates", "false"], op="config", repo=tmp)
                self._run(["remote", "add", "origin", self.spec.url], op="remote add",
                          repo=tmp)
                sha = self._fetch_into(tmp, target, creds)
                self._validate(tmp, sha)
                self._run(["checkout", "-q", "--detach", sha], op="checkout", repo=tmp)
                message = self._message(tmp, sha)
            except _GitFailed as err:
                raise SourceError(f"clone failed: {err}", subject=self._url) from None
            self._swap(tmp)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        self._trusted = True
        log.info("git source %s: cloned %s at %s %s", self._url, self.spec.ref, sha[:7],
                 message)
        return sha, message

    def _fetch_into(self, repo: Path, target: _Target, creds: tuple[str, str] | None) -> str:
        args = ["fetch", "-q", "--no-tags", "--no-write-fetch-head"]
        if self.spec.depth > 0:
            args.append(f"--depth={self.spec.depth}")
        if target.remote_ref:
            args += ["origin", f"+{target.remote_ref}:{target.local_ref}"]
            wanted = target.local_ref
        else:
            args += ["origin", target.sha]
            wanted = target.sha
        try:
            self._run(args, op="fetch", repo=repo, creds=creds)
        except _GitFailed as err:
            if _network_failure(err.stderr):
                raise SourceError(f"git fetch failed: {err.stderr}", subject=self._url) from None
            raise
        return self._run(["rev-parse", "--verify", "-q", f"{wanted}^{{commit}}"],
                         op="rev-parse", repo=repo).strip()

    def _validate(self, repo: Path, sha: str) -> None:
        """Refuse a revision before it is checked out: its signature, then the path."""
        if self.spec.verify is not None:
            try:
                self._run(["verify-commit", sha], op="verify-commit", repo=repo,
                          extra_env=self._verify_env(), config=self._verify_config())
            except _GitFailed as err:
                self._rejected.add(sha)
                log.debug("git source %s: verify-commit %s: %s", self._url, sha[:7], err.stderr)
                raise self._unsigned(sha) from None
        if self.spec.path:
            try:
                kind = self._run(["cat-file", "-t", f"{sha}:{self.spec.path}"],
                                 op="cat-file", repo=repo).strip()
            except _GitFailed:
                kind = ""
            if kind != "tree":
                raise SourceError(f"path {self.spec.path!r} is not a directory in revision "
                                  f"{sha[:7]}", subject=self._url)

    def _unsigned(self, sha: str) -> SourceError:
        return SourceError(f"revision {sha[:7]} is not signed by an allowed key",
                           subject=self._url)

    def _message(self, repo: Path, sha: str) -> str:
        out = self._run(["log", "-1", "--format=%s", sha], op="log", repo=repo)
        lines = out.splitlines()
        return lines[0][:MESSAGE_LIMIT] if lines else ""

    # ---------------------------------------------------------- the local working copy

    def _healthy_head(self) -> str | None:
        """The commit the working copy is at, or None when there is none or it is broken
        (missing or unreadable .git, HEAD, commit or tree)."""
        if not (self.workdir / ".git").is_dir():
            return None
        try:
            out = self._run(["cat-file", "--batch-check"], op="cat-file", repo=self.workdir,
                            stdin="HEAD\nHEAD^{tree}\n")
        except _GitFailed:
            return None
        lines = out.splitlines()
        if len(lines) != 2 or lines[0].split()[1:2] != ["commit"] \
                or lines[1].split()[1:2] != ["tree"]:
            return None
        return lines[0].split()[0]

    def _why_unhealthy(self) -> str:
        if not (self.workdir / ".git").is_dir():
            return f"{self.workdir} is not a git working copy"
        try:
            self._run(["rev-parse", "--verify", "HEAD^{tree}"], op="rev-parse HEAD",
                      repo=self.workdir)
        except _GitFailed as err:
            return str(err)
        return "HEAD is unreadable"

    def _swap(self, fresh: Path) -> None:
        """Put `fresh` at the workdir. Two renames on one filesystem: the workdir is
        always the old complete copy, the new complete copy, or (after a crash between
        the renames) absent; never half-written."""
        old: Path | None = None
        if self.workdir.exists() or self.workdir.is_symlink():
            old = Path(tempfile.mkdtemp(prefix=f".{self.workdir.name}.old-",
                                        dir=self.workdir.parent))
            old.rmdir()
            os.replace(self.workdir, old)
        os.replace(fresh, self.workdir)
        if old is not None:
            if old.is_dir() and not old.is_symlink():
                shutil.rmtree(old, ignore_errors=True)
            else:
                old.unlink(missing_ok=True)

    def _outside_dir(self) -> Path:
        parent = self.workdir.parent
        parent.mkdir(parents=True, exist_ok=True)
        return parent

    # ------------------------------------------------------------------ running git

    def _verify_config(self) -> dict[str, str]:
        verify = self.spec.verify
        assert verify is not None
        if verify.mode is VerifyMode.SSH:
            assert verify.allowed_signers_file is not None
            return {"gpg.format": "ssh",
                    "gpg.ssh.allowedSignersFile": str(verify.allowed_signers_file.absolute())}
        return {"gpg.format": "openpgp"}

    def _verify_env(self) -> dict[str, str]:
        verify = self.spec.verify
        assert verify is not None
        if verify.mode is not VerifyMode.GPG:
            return {}
        if verify.gpg_home is not None:
            return {"GNUPGHOME": str(verify.gpg_home.absolute())}
        assert verify.keyring is not None
        if self._gnupg_home is None:
            self._gnupg_home = Path(tempfile.mkdtemp(prefix="orksync-gnupg-"))
        # Imported on every verification so that a rotated keyring file takes effect.
        try:
            proc = subprocess.run(
                ["gpg", "--batch", "--quiet", "--import", str(verify.keyring)],
                env={**os.environ, "GNUPGHOME": str(self._gnupg_home)},
                capture_output=True, text=True, timeout=self.spec.timeout, check=False,
                stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as err:
            raise SourceError(f"cannot import the gpg keyring: {err}",
                              subject=str(verify.keyring)) from None
        if proc.returncode != 0:
            raise SourceError(f"cannot import the gpg keyring: {proc.stderr.strip()[-500:]}",
                              subject=str(verify.keyring))
        return {"GNUPGHOME": str(self._gnupg_home)}

    def _env(self, *, repo: Path | None, creds: tuple[str, str] | None,
             config: Mapping[str, str], extra_env: Mapping[str, str]) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("GIT_") or k in _KEPT_GIT_ENV}
        env.pop("SSH_ASKPASS", None)
        env.update({
            "LC_ALL": "C",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_SSH_COMMAND": ssh_command(self.spec.auth),
        })
        if repo is not None:
            env["GIT_DIR"] = str(repo / ".git")
            env["GIT_WORK_TREE"] = str(repo)
        cfg: list[tuple[str, str]] = [
            ("advice.detachedHead", "false"),
            ("gc.autoDetach", "false"),  # no background gc racing a swap or a delete
        ]
        if creds is not None:
            user, password = creds
            env[_ASKED_USER] = user
            env[_ASKED_PASSWORD] = password
            cfg.append(("credential.helper", ""))  # drop the user's helpers (no storing)
            scope = _credential_scope(self.spec.url)
            cfg.append((f"credential.{scope}.helper" if scope else "credential.helper",
                        _CREDENTIAL_HELPER))
        cfg += list(config.items())
        env["GIT_CONFIG_COUNT"] = str(len(cfg))
        for i, (key, value) in enumerate(cfg):
            env[f"GIT_CONFIG_KEY_{i}"] = key
            env[f"GIT_CONFIG_VALUE_{i}"] = value
        env.update(extra_env)
        return env

    def _run(self, args: list[str], *, op: str, repo: Path | None = None,
             cwd: Path | None = None, creds: tuple[str, str] | None = None,
             stdin: str | None = None, config: Mapping[str, str] | None = None,
             extra_env: Mapping[str, str] | None = None) -> str:
        """Run one git command with the timeout; kill its process group when it expires.
        Raises `_GitFailed` (scrubbed stderr) on a non-zero exit, `SourceError` on a
        timeout or when git cannot be started."""
        env = self._env(repo=repo, creds=creds, config=config or {}, extra_env=extra_env or {})
        argv = ["git", *args]
        log.debug("git source %s: %s", self._url, scrub(shlex.join(argv), self._secrets))
        workdir = cwd or repo or self._outside_dir()
        if not workdir.is_dir():
            raise _GitFailed(op, f"{workdir} does not exist")
        try:
            proc = subprocess.Popen(
                argv, cwd=workdir, env=env, text=True, start_new_session=True,
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except OSError as err:
            raise SourceError(f"cannot run git {op}: {err}", subject=self._url) from None
        try:
            out, err_text = proc.communicate(stdin, timeout=self.spec.timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            raise SourceError(f"git {op} timed out after {self.spec.timeout:g}s",
                              subject=self._url) from None
        if proc.returncode != 0:
            text = scrub(err_text.strip(), self._secrets)
            raise _GitFailed(op, text[-1000:] or f"exit status {proc.returncode}")
        return out


def _kill_group(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):  # a grandchild keeps a pipe open
        proc.communicate(timeout=5)


def _credential_scope(url: str) -> str:
    """`scheme://host[:port]` for URL-scoped credential config, "" when not a URL."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme in ("http", "https") and parts.hostname:
        host = parts.netloc.rpartition("@")[2]
        return f"{parts.scheme}://{host}"
    return ""


_NETWORK_HINTS = (
    "unable to access", "could not read from remote", "unable to connect",
    "connection refused", "could not resolve", "authentication failed",
    "could not read username", "could not read password", "terminal prompts disabled",
    "repository not found", "does not appear to be a git repository", "timed out",
    "host key verification failed", "permission denied", "the remote end hung up",
    "not our ref", "couldn't find remote ref", "no such remote ref",
)


def _network_failure(stderr: str) -> bool:
    """Whether a failed fetch is the remote's fault (then re-cloning cannot help)."""
    low = stderr.lower()
    return any(hint in low for hint in _NETWORK_HINTS)
