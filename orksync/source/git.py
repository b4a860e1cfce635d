"""The only module that talks to git remotes: clone, poll (`git ls-remote` first), fetch,
verify and check out one ref into one working copy, credentials only through the
environment of the git process. I/O, narrow: it never parses what it checked out
(docs/operations.md#fetching-from-git)."""

from __future__ import annotations

import base64
import logging
import os
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from orksync.errors import SourceError
from orksync.source.gitrun import GitFailed, GitRunner
from orksync.source.gitspec import (
    DEFAULT_TIMEOUT,
    GitAuth,
    GitSourceSpec,
    GitVerify,
    Revision,
    VerifyMode,
    scrub,
    ssh_command,
)

__all__ = ["DEFAULT_TIMEOUT", "GitAuth", "GitSource", "GitSourceSpec", "GitVerify",
           "Revision", "VerifyMode", "scrub", "ssh_command"]

log = logging.getLogger(__name__)

MESSAGE_LIMIT = 200


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
        # sha -> the verification material (signers file or keyring) that refused it
        self._rejected: dict[str, object] = {}
        self._gnupg_home: Path | None = None
        self._url = scrub(spec.url)
        self._git = GitRunner(url=self._url, remote_url=spec.url,
                              ssh_command=ssh_command(spec.auth), timeout=spec.timeout)

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
                self._git.secrets = (password, urllib.parse.quote(password, safe=""), basic)
            try:
                try:
                    sha, message = self._sync(creds)
                except GitFailed as err:
                    raise SourceError(f"git {err}", subject=self._url) from None
                except OSError as err:
                    raise SourceError(f"working copy {self.workdir}: {err}",
                                      subject=self._url) from None
            except SourceError as err:
                log.warning("git source %s: %s", self._url, self._git.scrub(str(err)))
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
        if target.sha in self._rejected and \
                self._rejected[target.sha] == self._verify_material():
            raise self._unsigned(target.sha)  # refused before; not fetched again
        head = self._healthy_head()
        if head is not None and head == target.sha and self._trusted:
            prev = self._last_good
            if prev is not None and prev.sha == head:
                log.debug("git source %s: %s unchanged at %s", self._url, self.spec.wanted,
                          head[:7])
                return head, prev.message
            return head, self._message(self.workdir, head)
        if head is not None:
            try:
                return self._update(target, creds, skip_fetch=head == target.sha)
            except GitFailed as err:
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
        if self.spec.semver:
            return self._resolve_semver(creds)
        ref = self.spec.ref
        # Like `git clone --branch`: a branch first, then a tag.
        candidates = [ref] if ref.startswith("refs/") else [f"refs/heads/{ref}",
                                                            f"refs/tags/{ref}"]
        patterns = [*candidates, *(f"{c}^{{}}" for c in candidates if c.startswith("refs/tags/"))]
        try:
            out = self._run(["ls-remote", "--", self.spec.url, *patterns], op="ls-remote",
                            cwd=self._outside_dir(), creds=creds)
        except GitFailed as err:
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

    def _resolve_semver(self, creds: tuple[str, str] | None) -> _Target:
        """The highest tag of the remote satisfying `spec.semver` (one `ls-remote --tags`)."""
        from orksync.source.semver import highest

        try:
            out = self._run(["ls-remote", "--tags", "--", self.spec.url], op="ls-remote",
                            cwd=self._outside_dir(), creds=creds)
        except GitFailed as err:
            raise SourceError(f"git ls-remote failed: {err.stderr}", subject=self._url) from None
        refs: dict[str, str] = {}
        for line in out.splitlines():
            sha, _, name = line.partition("\t")
            refs[name.strip()] = sha.strip()
        tags = [name.removeprefix("refs/tags/") for name in refs
                if name.startswith("refs/tags/") and not name.endswith("^{}")]
        tag = highest(self.spec.semver, tags)
        if tag is None:
            raise SourceError(f"no tag satisfies the semver range {self.spec.semver!r} "
                              f"({len(tags)} tag(s) on the remote)", subject=self._url)
        name = f"refs/tags/{tag}"
        return _Target(sha=refs.get(f"{name}^{{}}", refs[name]), remote_ref=name,
                       local_ref=name)

    def _update(self, target: _Target, creds: tuple[str, str] | None, *,
                skip_fetch: bool) -> tuple[str, str]:
        """Fetch into the existing clone and hard-reset it. `GitFailed` means corrupted."""
        repo = self.workdir
        if not self._trusted:
            url = self._run(["config", "--get", "remote.origin.url"], op="read the remote url",
                            repo=repo).strip()
            if url != self.spec.url:
                raise GitFailed("check the remote url", "the working copy is a clone of "
                                 f"{scrub(url)}, not of the configured url")
        sha = target.sha if skip_fetch else self._fetch_into(repo, target, creds)
        self._validate(repo, sha)
        self._run(["reset", "-q", "--hard", sha], op="reset --hard", repo=repo)
        self._run(["clean", "-ffdxq"], op="clean", repo=repo)
        self._trusted = True
        message = self._message(repo, sha)
        log.info("git source %s: %s at %s %s", self._url, self.spec.wanted, sha[:7],
                 message)
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
            except GitFailed as err:
                raise SourceError(f"clone failed: {err}", subject=self._url) from None
            self._swap(tmp)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        self._trusted = True
        log.info("git source %s: cloned %s at %s %s", self._url, self.spec.wanted, sha[:7],
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
        except GitFailed as err:
            if err.remote_fault:
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
            except GitFailed as err:
                self._rejected[sha] = self._verify_material()
                log.debug("git source %s: verify-commit %s: %s", self._url, sha[:7], err.stderr)
                raise self._unsigned(sha) from None
        if self.spec.path:
            try:
                kind = self._run(["cat-file", "-t", f"{sha}:{self.spec.path}"],
                                 op="cat-file", repo=repo).strip()
            except GitFailed:
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
        except GitFailed:
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
        except GitFailed as err:
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

    def _verify_material(self) -> object:
        """Changes when the allowed signers or the keyring change (then a refused sha is
        verified again)."""
        verify = self.spec.verify
        if verify is None:
            return None
        path = verify.allowed_signers_file if verify.mode is VerifyMode.SSH else (
            verify.keyring or verify.gpg_home)
        try:
            st = path.stat() if path is not None else None
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino) if st is not None else None

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
        if self._gnupg_home is None:  # private, beside the workdir, kept across runs
            home = self.workdir.parent / f".{self.workdir.name}.gnupg"
            home.mkdir(mode=0o700, parents=True, exist_ok=True)
            self._gnupg_home = home
        # Imported on every verification so that a rotated keyring file takes effect.
        try:
            proc = subprocess.run(
                ["gpg", "--batch", "--quiet", "--no-autostart", "--import",
                 str(verify.keyring)],
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

    def _run(self, args: list[str], *, op: str, repo: Path | None = None,
             cwd: Path | None = None, **kw: object) -> str:
        return self._git.run(args, op=op, cwd=cwd or repo or self._outside_dir(), repo=repo,
                             **kw)  # type: ignore[arg-type]
