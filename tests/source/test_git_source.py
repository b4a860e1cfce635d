"""orksync.source.git against real repositories served on 127.0.0.1: `git daemon` for
git://, and `git http-backend` behind a small HTTP server with basic auth. No mocks: the
one spy records the command lines orksync starts and lets them run."""

from __future__ import annotations

import base64
import gzip
import io
import logging
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from orksync.errors import SourceError
from orksync.source import git as gitsource
from orksync.source.git import (
    GitAuth,
    GitSource,
    GitSourceSpec,
    GitVerify,
    VerifyMode,
    scrub,
    ssh_command,
)
from testbed.gitdaemon import GitDaemon, free_port, wait_for_port
from tests.corpus import HANG, bounded
from tests.helpers import unavailable

# The test's own git calls never read the user's configuration.
_GIT_ENV = {**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_TERMINAL_PROMPT": "0"}
_ID = ["-c", "user.name=t", "-c", "user.email=t@t"]


def git(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, env={**_GIT_ENV, **(env or {})},
                          capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode == 0, f"git {' '.join(args)}: {proc.stderr}"
    return proc.stdout.strip()


class Upstream:
    """A bare repository under `root` (what the servers export) and a working clone that
    commits and pushes to it."""

    def __init__(self, root: Path, name: str = "repo.git") -> None:
        self.name = name
        self.bare = root / name
        git("init", "-q", "--bare", "--initial-branch=main", str(self.bare))
        self.work = root.parent / f"{name}-work"
        git("init", "-q", "--initial-branch=main", str(self.work))
        git("remote", "add", "origin", str(self.bare), cwd=self.work)

    def commit(self, files: dict[str, str | None], message: str = "change", *,
               branch: str = "main", sign_with: Path | None = None, push: bool = True) -> str:
        for rel, text in files.items():
            path = self.work / rel
            if text is None:
                path.unlink()
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        git("add", "-A", cwd=self.work)
        sign = ["-c", "gpg.format=ssh", "-c", f"user.signingkey={sign_with}"] if sign_with \
            else []
        extra = ["-S"] if sign_with else []
        git(*_ID, *sign, "commit", "-q", "--allow-empty", "-m", message, *extra, cwd=self.work)
        if push:
            self.push(branch)
        return git("rev-parse", "HEAD", cwd=self.work)

    def push(self, branch: str = "main") -> None:
        git("push", "-q", "-f", "origin", f"HEAD:refs/heads/{branch}", cwd=self.work)

    def switch(self, branch: str, *, orphan: bool = False) -> None:
        if orphan:
            git("checkout", "-q", "--orphan", branch, cwd=self.work)
            git("rm", "-q", "-rf", "--ignore-unmatch", ".", cwd=self.work)
        else:
            git("checkout", "-q", "-B", branch, cwd=self.work)

    def tag(self, name: str) -> None:
        git(*_ID, "tag", "-f", "-a", "-m", f"release {name}", name, cwd=self.work)
        git("push", "-q", "-f", "origin", f"refs/tags/{name}", cwd=self.work)


class GitHttp:
    """`git http-backend` run as CGI behind basic auth; `log` records each request as
    (method, what, authorised) where `what` is `info/refs` or the protocol-v2 command
    (`ls-refs`, `fetch`) of a POST."""

    def __init__(self, root: Path, user: str, password: str) -> None:
        self.root = root
        self.expected = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        self.log: list[tuple[str, str, bool]] = []
        self.headers_seen: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            timeout = 20

            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                self.handle_git()

            def do_POST(self) -> None:
                self.handle_git()

            def handle_git(self) -> None:
                path, _, query = self.path.partition("?")
                length = int(self.headers.get("Content-Length") or 0)
                assert length < 50_000_000
                body = self.rfile.read(length) if length else b""
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    body = read_chunked(self.rfile)
                auth = self.headers.get("Authorization", "")
                server.headers_seen.append(auth)
                ok = auth == server.expected
                plain = gzip.decompress(body) if self.headers.get(
                    "Content-Encoding") == "gzip" else body
                what = "info/refs" if path.endswith("/info/refs") else (
                    "fetch" if b"command=fetch" in plain or b"want " in plain
                    else "ls-refs" if b"command=ls-refs" in plain else "other")
                server.log.append((self.command, what, ok))
                if not ok:
                    self.send_response(401)
                    self.send_header("WWW-Authenticate", 'Basic realm="git"')
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                env = {
                    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                    "GIT_PROJECT_ROOT": str(server.root), "GIT_HTTP_EXPORT_ALL": "1",
                    "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1",
                    "PATH_INFO": path, "QUERY_STRING": query,
                    "REQUEST_METHOD": self.command, "REMOTE_USER": "t",
                    "REMOTE_ADDR": "127.0.0.1",
                    "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                    "CONTENT_LENGTH": str(len(body)),
                }
                for name, env_name in (("Git-Protocol", "GIT_PROTOCOL"),
                                       ("Git-Protocol", "HTTP_GIT_PROTOCOL"),
                                       ("Content-Encoding", "HTTP_CONTENT_ENCODING")):
                    if self.headers.get(name):
                        env[env_name] = self.headers[name]
                proc = subprocess.Popen(["git", "http-backend"], env=env,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL)
                assert proc.stdin is not None and proc.stdout is not None
                proc.stdin.write(body)
                proc.stdin.close()
                status, headers = 200, []
                while True:  # the CGI header block
                    line = proc.stdout.readline().decode("latin-1").rstrip("\r\n")
                    if not line:
                        break
                    key, _, value = line.partition(":")
                    if key.lower() == "status":
                        status = int(value.split()[0])
                    else:
                        headers.append((key, value.strip()))
                self.send_response(status)
                for key, value in headers:
                    self.send_header(key, value)
                self.end_headers()  # HTTP/1.0: the body ends when the connection closes
                shutil.copyfileobj(proc.stdout, self.wfile)
                proc.wait(timeout=20)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,),
                                       daemon=True)

    def url(self, name: str = "repo.git") -> str:
        return f"http://127.0.0.1:{self.port}/{name}"

    def fetches(self) -> int:
        return sum(1 for _, what, ok in self.log if what == "fetch" and ok)

    def __enter__(self) -> GitHttp:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=10)


def read_chunked(stream: io.BufferedIOBase) -> bytes:
    out = b""
    while True:
        size = int(stream.readline().split(b";")[0], 16)
        if size == 0:
            stream.readline()
            return out
        out += stream.read(size)
        stream.readline()


SECRET = "s3cr3t-T0ken-9f8e7d"


@pytest.fixture
def srv(tmp_path: Path) -> Path:
    root = tmp_path / "srv"
    root.mkdir()
    return root


@pytest.fixture
def upstream(srv: Path) -> Upstream:
    up = Upstream(srv)
    up.commit({"README.md": "hello\n", "deploy/app.yaml": "kind: A\n"}, "first commit")
    return up


@pytest.fixture
def daemon(srv: Path) -> Iterator[GitDaemon]:
    d = GitDaemon(srv, env=_GIT_ENV)
    d.start()
    yield d
    d.stop()


@pytest.fixture
def http(srv: Path) -> Iterator[GitHttp]:
    with GitHttp(srv, "robot", SECRET) as server:
        yield server


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "secrets" / "token"
    path.parent.mkdir()
    path.write_text(SECRET + "\n", encoding="utf-8")
    return path


def http_source(http: GitHttp, token_file: Path, workdir: Path, **kw: object) -> GitSource:
    auth = GitAuth(username="robot", password_file=token_file)
    return GitSource(GitSourceSpec(url=http.url(), auth=auth, **kw), workdir)  # type: ignore[arg-type]


# ------------------------------------------------------------------- polling and fetching


def test_the_first_fetch_clones_and_an_unchanged_remote_is_not_fetched_again(
        upstream: Upstream, http: GitHttp, token_file: Path, tmp_path: Path) -> None:
    source = http_source(http, token_file, tmp_path / "wc")
    first = source.fetch()
    assert first.changed
    assert first.sha == git("rev-parse", "HEAD", cwd=upstream.work)
    assert first.message == "first commit"
    assert (first.path / "deploy" / "app.yaml").read_text() == "kind: A\n"
    assert git("rev-parse", "--is-shallow-repository", cwd=first.path) == "true"
    assert http.fetches() == 1

    before = len(http.log)
    second = source.fetch()
    assert not second.changed
    assert second.sha == first.sha and second.message == "first commit"
    assert http.fetches() == 1, "an unchanged remote must not be fetched"
    assert {what for _, what, _ in http.log[before:]} <= {"info/refs", "ls-refs"}
    assert second.duration >= 0 and source.last_good == second


def test_a_new_commit_is_picked_up_and_stray_files_are_cleaned(
        upstream: Upstream, daemon: GitDaemon, tmp_path: Path) -> None:
    source = GitSource(GitSourceSpec(url=daemon.url()), tmp_path / "wc")
    first = source.fetch()
    (first.path / "stray.txt").write_text("left behind")
    (first.path / "README.md").write_text("edited locally")
    sha = upstream.commit({"deploy/app.yaml": "kind: B\n"}, "second commit\n\nbody text")
    second = source.fetch()
    assert second.changed and second.sha == sha
    assert second.message == "second commit"
    assert (second.path / "deploy" / "app.yaml").read_text() == "kind: B\n"
    assert not (second.path / "stray.txt").exists()
    assert (second.path / "README.md").read_text() == "hello\n"
    assert not source.fetch().changed


def test_a_long_commit_subject_is_cut_to_200_characters(
        upstream: Upstream, daemon: GitDaemon, tmp_path: Path) -> None:
    upstream.commit({}, "x" * 300)
    assert GitSource(GitSourceSpec(url=daemon.url()), tmp_path / "wc").fetch().message \
        == "x" * 200


def test_a_branch_other_than_main_is_followed(
        upstream: Upstream, daemon: GitDaemon, tmp_path: Path) -> None:
    upstream.switch("staging")
    sha = upstream.commit({"stage.txt": "1"}, "on staging", branch="staging")
    rev = GitSource(GitSourceSpec(url=daemon.url(), ref="staging"), tmp_path / "wc").fetch()
    assert rev.sha == sha and (rev.path / "stage.txt").exists()


def test_a_tag_checks_out_the_tagged_commit_and_follows_a_moved_tag(
        upstream: Upstream, daemon: GitDaemon, tmp_path: Path) -> None:
    tagged = git("rev-parse", "HEAD", cwd=upstream.work)
    upstream.tag("v1")
    upstream.commit({"later.txt": "1"}, "after the tag")
    source = GitSource(GitSourceSpec(url=daemon.url(), ref="v1"), tmp_path / "wc")
    rev = source.fetch()
    assert rev.sha == tagged and not (rev.path / "later.txt").exists()
    assert not source.fetch().changed
    upstream.tag("v1")  # moved to the later commit
    moved = source.fetch()
    assert moved.changed and (moved.path / "later.txt").exists()


def test_a_full_commit_sha_is_checked_out_exactly_and_never_polled_again(
        upstream: Upstream, daemon: GitDaemon, tmp_path: Path) -> None:
    pinned = git("rev-parse", "HEAD", cwd=upstream.work)
    upstream.commit({"later.txt": "1"}, "not this one")
    source = GitSource(GitSourceSpec(url=daemon.url(), ref=pinned), tmp_path / "wc")
    rev = source.fetch()
    assert rev.sha == pinned and not (rev.path / "later.txt").exists()
    daemon.stop()  # a commit never moves: no remote needed any more
    again = source.fetch()
    assert again.sha == pinned and not again.changed


def test_the_path_is_the_checked_out_subdirectory_and_a_missing_one_is_refused(
        upstream: Upstream, daemon: GitDaemon, tmp_path: Path) -> None:
    source = GitSource(GitSourceSpec(url=daemon.url(), path="deploy"), tmp_path / "wc")
    rev = source.fetch()
    assert rev.path == tmp_path / "wc" / "deploy"
    assert (rev.path / "app.yaml").is_file()
    upstream.commit({"deploy/app.yaml": None}, "remove the directory")
    with pytest.raises(SourceError, match="path 'deploy' is not a directory in revision"):
        source.fetch()
    assert (rev.path / "app.yaml").is_file(), "the previous working copy stays"
    assert source.last_good == rev


def test_a_force_push_to_unrelated_history_is_recovered(
        upstream: Upstream, daemon: GitDaemon, tmp_path: Path) -> None:
    source = GitSource(GitSourceSpec(url=daemon.url()), tmp_path / "wc")
    old = source.fetch()
    upstream.switch("rewritten", orphan=True)
    sha = upstream.commit({"new.txt": "n"}, "rewritten history")  # pushed to main with -f
    unrelated = subprocess.run(["git", "merge-base", "--is-ancestor", old.sha, sha],
                               cwd=upstream.work, env=_GIT_ENV, capture_output=True)
    assert unrelated.returncode == 1, "the new sha does not descend from the old one"
    rev = source.fetch()
    assert rev.changed and rev.sha == sha
    assert sorted(p.name for p in rev.path.iterdir() if p.name != ".git") == ["new.txt"]


def test_full_history_is_fetched_with_depth_zero(
        upstream: Upstream, daemon: GitDaemon, tmp_path: Path) -> None:
    upstream.commit({"b": "b"}, "second")
    rev = GitSource(GitSourceSpec(url=daemon.url(), depth=0), tmp_path / "wc").fetch()
    assert git("rev-parse", "--is-shallow-repository", cwd=rev.path) == "false"
    assert git("rev-list", "--count", "HEAD", cwd=rev.path) == "2"


# ------------------------------------------------------------------------ recovering


def _delete_head(wc: Path) -> None:
    (wc / ".git" / "HEAD").unlink()


def _delete_objects(wc: Path) -> None:
    shutil.rmtree(wc / ".git" / "objects")
    (wc / ".git" / "objects").mkdir()


def _delete_workdir(wc: Path) -> None:
    shutil.rmtree(wc)


def _replace_with_a_file(wc: Path) -> None:
    shutil.rmtree(wc)
    wc.write_text("not a directory")


@pytest.mark.parametrize("corrupt", [_delete_head, _delete_objects, _delete_workdir,
                                     _replace_with_a_file])
@pytest.mark.parametrize("new_commit", [False, True], ids=["same-sha", "new-sha"])
def test_a_corrupted_working_copy_is_recloned_and_the_log_says_so(
        corrupt: Callable[[Path], None], new_commit: bool, upstream: Upstream,
        daemon: GitDaemon,
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    source = GitSource(GitSourceSpec(url=daemon.url()), tmp_path / "wc")
    first = source.fetch()
    corrupt(tmp_path / "wc")
    sha = upstream.commit({"c": "c"}, "after") if new_commit else first.sha
    with caplog.at_level(logging.INFO, logger="orksync"):
        rev = source.fetch()
    assert rev.sha == sha and rev.changed == new_commit
    assert (rev.path / "README.md").read_text() == "hello\n"
    assert git("rev-parse", "HEAD", cwd=rev.path) == sha
    assert "re-cloning into a fresh working copy" in caplog.text
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".wc")] == [], \
        "no temporary clone is left behind"


def test_a_new_agent_process_reuses_an_existing_clone(
        upstream: Upstream, daemon: GitDaemon, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    spec = GitSourceSpec(url=daemon.url())
    first = GitSource(spec, tmp_path / "wc").fetch()
    inode = (tmp_path / "wc" / ".git").stat().st_ino
    (tmp_path / "wc" / "stray").write_text("x")
    with caplog.at_level(logging.INFO, logger="orksync"):
        rev = GitSource(spec, tmp_path / "wc").fetch()
    assert rev.sha == first.sha and rev.changed  # new to this process
    assert (tmp_path / "wc" / ".git").stat().st_ino == inode, "not cloned again"
    assert not (tmp_path / "wc" / "stray").exists()
    assert "re-cloning" not in caplog.text


def test_a_clone_of_another_url_in_the_workdir_is_replaced(
        upstream: Upstream, srv: Path, daemon: GitDaemon, tmp_path: Path) -> None:
    other = Upstream(srv, "other.git")
    other.commit({"other.txt": "o"}, "other repo")
    GitSource(GitSourceSpec(url=daemon.url("other.git")), tmp_path / "wc").fetch()
    rev = GitSource(GitSourceSpec(url=daemon.url()), tmp_path / "wc").fetch()
    assert (rev.path / "README.md").exists() and not (rev.path / "other.txt").exists()


# --------------------------------------------------------------------------- failures


def test_a_stopped_remote_raises_source_error_naming_the_url_and_keeps_last_good(
        upstream: Upstream, daemon: GitDaemon, tmp_path: Path) -> None:
    source = GitSource(GitSourceSpec(url=daemon.url()), tmp_path / "wc")
    good = source.fetch()
    daemon.stop()
    with pytest.raises(SourceError) as info:
        source.fetch()
    assert daemon.url() in str(info.value) and "ls-remote" in str(info.value)
    assert source.last_good == good
    assert (good.path / "README.md").is_file()


def test_a_first_clone_from_an_unreachable_remote_raises_source_error(tmp_path: Path) -> None:
    source = GitSource(GitSourceSpec(url=f"git://127.0.0.1:{free_port()}/repo.git"),
                       tmp_path / "wc")
    with pytest.raises(SourceError, match="ls-remote failed"):
        source.fetch()
    assert source.last_good is None


def test_a_missing_ref_raises_source_error(
        upstream: Upstream, daemon: GitDaemon, tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="ref 'nope' not found"):
        GitSource(GitSourceSpec(url=daemon.url(), ref="nope"), tmp_path / "wc").fetch()


def test_a_hanging_remote_times_out(tmp_path: Path) -> None:
    """A remote that accepts the connection and never answers: the fetch ends with the
    configured timeout's error. Without a timeout it would never end (HANG: a hang guard,
    not a speed bound; the message names the timeout that fired)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        spec = GitSourceSpec(url=f"git://127.0.0.1:{port}/repo.git", timeout=0.5)
        with bounded(HANG), \
                pytest.raises(SourceError, match=r"ls-remote timed out after 0.5s"):
            GitSource(spec, tmp_path / "wc").fetch()


# ------------------------------------------------------------------------- credentials


def test_a_wrong_password_raises_source_error_without_the_password(
        upstream: Upstream, http: GitHttp, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    wrong = "Wr0ng-Passw0rd-4c3b2a"
    bad = tmp_path / "bad-token"
    bad.write_text(wrong)
    source = GitSource(GitSourceSpec(url=http.url(), auth=GitAuth(
        username="robot", password_file=bad)), tmp_path / "wc")
    with caplog.at_level(logging.DEBUG, logger="orksync"), \
            pytest.raises(SourceError) as info:
        source.fetch()
    message = str(info.value)
    assert http.url() in message and "ls-remote" in message
    assert "Authentication failed" in message
    assert wrong not in message and wrong not in caplog.text
    assert http.log and all(not ok for _, _, ok in http.log)


def test_the_token_never_reaches_git_config_logs_or_command_lines(
        upstream: Upstream, http: GitHttp, token_file: Path, tmp_path: Path,
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    argvs: list[str] = []

    class RecordingPopen(subprocess.Popen[str]):
        def __init__(self, args: list[str], *a: Any, **kw: Any) -> None:
            argvs.append(" ".join(map(str, args)))
            super().__init__(args, *a, **kw)

    monkeypatch.setattr(gitsource.subprocess, "Popen", RecordingPopen)
    wc = tmp_path / "wc"
    source = http_source(http, token_file, wc)
    with caplog.at_level(logging.DEBUG, logger="orksync"):
        source.fetch()
        source.fetch()
        upstream.commit({"n": "n"}, "new")
        source.fetch()
        shutil.rmtree(wc / ".git" / "objects")
        source.fetch()  # re-clone
    assert http.fetches() == 3
    assert any(ok for _, _, ok in http.log), "the server saw the right credentials"
    assert argvs and not [a for a in argvs if SECRET in a]
    assert SECRET not in caplog.text
    assert git("config", "--get", "remote.origin.url", cwd=wc) == http.url()
    for path in (wc / ".git").rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
    leftovers = [p for p in tmp_path.rglob("*") if p.is_file() and p != token_file
                 and SECRET.encode() in p.read_bytes()]
    assert leftovers == []


def test_the_password_can_come_from_an_environment_variable(
        upstream: Upstream, http: GitHttp, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORKSYNC_TEST_TOKEN", SECRET)
    auth = GitAuth(username="robot", password_env="ORKSYNC_TEST_TOKEN")
    rev = GitSource(GitSourceSpec(url=http.url(), auth=auth), tmp_path / "wc").fetch()
    assert (rev.path / "README.md").exists()
    monkeypatch.delenv("ORKSYNC_TEST_TOKEN")
    with pytest.raises(SourceError, match=r"ORKSYNC_TEST_TOKEN .* is not set"):
        GitSource(GitSourceSpec(url=http.url(), auth=auth), tmp_path / "wc2").fetch()


def test_a_url_with_an_inline_password_is_refused_without_echoing_it() -> None:
    with pytest.raises(SourceError, match="must not carry a password") as info:
        GitSourceSpec(url=f"https://robot:{SECRET}@example.invalid/repo.git")
    assert SECRET not in str(info.value)
    assert scrub(f"fatal: https://u:{SECRET}@h/r x {SECRET}", [SECRET]) == \
        "fatal: https://u:***@h/r x ***"


def test_the_ssh_command_checks_host_keys_strictly_with_the_given_known_hosts() -> None:
    auth = GitAuth(ssh_key_file=Path("/keys/id ed25519"),
                   known_hosts_file=Path("/keys/known_hosts"))
    command = ssh_command(auth)
    assert command == ("ssh -i '/keys/id ed25519' -o IdentitiesOnly=yes "
                       "-o StrictHostKeyChecking=yes -o UserKnownHostsFile=/keys/known_hosts "
                       "-o BatchMode=yes")
    assert "StrictHostKeyChecking=yes" in ssh_command(GitAuth())


# --------------------------------------------------------------------- verification


@pytest.fixture
def signing_key(tmp_path: Path) -> tuple[Path, Path]:
    key = tmp_path / "keys" / "signer"
    key.parent.mkdir()
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "t@t", "-f",
                    str(key)], check=True, timeout=30)
    allowed = tmp_path / "keys" / "allowed_signers"
    allowed.write_text(f't@t namespaces="git" {key.with_suffix(".pub").read_text()}')
    return key, allowed


def test_a_signed_commit_passes_and_an_unsigned_one_is_refused_keeping_the_old_copy(
        srv: Path, daemon: GitDaemon, signing_key: tuple[Path, Path], tmp_path: Path) -> None:
    key, allowed = signing_key
    up = Upstream(srv)
    signed = up.commit({"a.txt": "signed"}, "signed commit", sign_with=key)
    spec = GitSourceSpec(url=daemon.url(), verify=GitVerify(
        mode=VerifyMode.SSH, allowed_signers_file=allowed))
    source = GitSource(spec, tmp_path / "wc")
    rev = source.fetch()
    assert rev.sha == signed and (rev.path / "a.txt").read_text() == "signed"

    unsigned = up.commit({"a.txt": "unsigned"}, "unsigned commit")
    with pytest.raises(SourceError, match=f"revision {unsigned[:7]} is not signed by an "
                                          "allowed key"):
        source.fetch()
    assert (rev.path / "a.txt").read_text() == "signed"
    assert git("rev-parse", "HEAD", cwd=rev.path) == signed
    assert source.last_good == rev

    other_key = tmp_path / "keys" / "stranger"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other_key)],
                   check=True, timeout=30)
    strangers = up.commit({"a.txt": "stranger"}, "signed by a stranger", sign_with=other_key)
    with pytest.raises(SourceError, match="is not signed by an allowed key"):
        source.fetch()
    with pytest.raises(SourceError, match="is not signed by an allowed key"):
        source.fetch()  # refused again, from memory
    time.sleep(0.01)
    with allowed.open("a") as f:  # the operator trusts the stranger now
        f.write(f'stranger namespaces="git" {other_key.with_suffix(".pub").read_text()}')
    assert source.fetch().sha == strangers

    fixed = up.commit({"a.txt": "signed again"}, "signed again", sign_with=key)
    again = source.fetch()
    assert again.sha == fixed and (again.path / "a.txt").read_text() == "signed again"


def test_an_unsigned_first_clone_leaves_no_working_copy(
        upstream: Upstream, daemon: GitDaemon, signing_key: tuple[Path, Path],
        tmp_path: Path) -> None:
    spec = GitSourceSpec(url=daemon.url(), verify=GitVerify(
        mode=VerifyMode.SSH, allowed_signers_file=signing_key[1]))
    with pytest.raises(SourceError, match="is not signed by an allowed key"):
        GitSource(spec, tmp_path / "wc").fetch()
    assert not (tmp_path / "wc").exists()
    assert [p for p in tmp_path.iterdir() if p.name.startswith(".wc")] == []


def test_a_gpg_signed_commit_verifies_against_a_keyring_file(
        srv: Path, daemon: GitDaemon, tmp_path: Path) -> None:
    if shutil.which("gpg") is None:
        unavailable("gpg is not installed (Debian: gnupg)")
    home = tmp_path / "gnupg"
    home.mkdir(mode=0o700)
    env = {**_GIT_ENV, "GNUPGHOME": str(home)}
    try:
        subprocess.run(["gpg", "--batch", "--passphrase", "", "--quick-gen-key", "T <t@t>",
                        "ed25519", "sign", "never"], env=env, check=True, timeout=60,
                       capture_output=True)
        keyring = tmp_path / "pubring.gpg"
        keyring.write_bytes(subprocess.run(["gpg", "--batch", "--export", "t@t"], env=env,
                                           check=True, timeout=30,
                                           capture_output=True).stdout)
        up = Upstream(srv)
        up.commit({"a": "a"}, "unsigned first", push=False)
        git(*_ID, "-c", "user.signingkey=t@t", "commit", "-q", "--allow-empty", "-S", "-m",
            "gpg signed", cwd=up.work, env={"GNUPGHOME": str(home)})
        up.push()
        spec = GitSourceSpec(url=daemon.url(), verify=GitVerify(mode=VerifyMode.GPG,
                                                                keyring=keyring))
        source = GitSource(spec, tmp_path / "wc")
        assert source.fetch().message == "gpg signed"
        up.commit({"b": "b"}, "not signed")
        with pytest.raises(SourceError, match="is not signed by an allowed key"):
            source.fetch()
    finally:
        subprocess.run(["gpgconf", "--kill", "all"], env=env, check=False, timeout=30,
                       capture_output=True)


# ------------------------------------------------------------------- ssh, with an sshd


SSHD = shutil.which("sshd") or ("/usr/sbin/sshd" if Path("/usr/sbin/sshd").exists() else None)


@pytest.fixture
def sshd(tmp_path: Path, signing_key: tuple[Path, Path]) -> Iterator[tuple[int, Path]]:
    """sshd on 127.0.0.1 for the current user, accepting `signing_key`; yields the port
    and a known_hosts file with its host key."""
    if SSHD is None:
        unavailable("sshd is not installed (Debian: openssh-server)")
    if not Path("/run/sshd").is_dir():
        try:
            Path("/run/sshd").mkdir(mode=0o755, parents=True)
        except OSError:
            unavailable("sshd needs /run/sshd")
    d = tmp_path / "sshd"
    d.mkdir()
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "host")],
                   check=True, timeout=30)
    (d / "authorized_keys").write_text(signing_key[0].with_suffix(".pub").read_text())
    port = free_port()
    (d / "config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {d / 'host'}\n"
        f"PidFile {d / 'pid'}\nAuthorizedKeysFile {d / 'authorized_keys'}\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n"
        "StrictModes no\nPermitRootLogin prohibit-password\n")
    proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(d / "config")],
                            start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port)
        known = d / "known_hosts"
        known.write_text(f"[127.0.0.1]:{port} {(d / 'host.pub').read_text()}")
        yield port, known
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)


def test_an_ssh_remote_is_cloned_with_the_key_and_a_known_host_key(
        upstream: Upstream, sshd: tuple[int, Path], signing_key: tuple[Path, Path],
        tmp_path: Path) -> None:
    port, known = sshd
    user = os.environ.get("USER") or subprocess.run(
        ["id", "-un"], capture_output=True, text=True, check=True).stdout.strip()
    url = f"ssh://{user}@127.0.0.1:{port}{upstream.bare}"
    auth = GitAuth(ssh_key_file=signing_key[0], known_hosts_file=known)
    rev = GitSource(GitSourceSpec(url=url, auth=auth, timeout=20), tmp_path / "wc").fetch()
    assert (rev.path / "README.md").read_text() == "hello\n"

    stranger = tmp_path / "known_hosts_other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f",
                    str(tmp_path / "fake_host")], check=True, timeout=30)
    stranger.write_text(f"[127.0.0.1]:{port} {(tmp_path / 'fake_host.pub').read_text()}")
    for hosts in (stranger, tmp_path / "empty_known_hosts"):
        hosts.touch()
        spec = GitSourceSpec(url=url, timeout=20,
                             auth=GitAuth(ssh_key_file=signing_key[0], known_hosts_file=hosts))
        with pytest.raises(SourceError, match="Host key verification failed"):
            GitSource(spec, tmp_path / "wc2").fetch()


def test_a_semver_range_checks_out_its_highest_satisfying_tag_and_follows_a_new_one(
        upstream: Upstream, daemon: GitDaemon, tmp_path: Path) -> None:
    """Real tags of a real remote: the highest version in the range (numeric order:
    v1.10.0 above v1.9.0; v2.0.0, a prerelease and a tag that is no version ignored),
    a new satisfying tag picked up at the next fetch; no satisfying tag and a range that
    does not parse are errors naming the range."""
    shas = {}
    for tag in ("v1.2.0", "v1.9.0", "v1.10.0", "v2.0.0", "1.11.0-rc.1", "latest"):
        shas[tag] = upstream.commit({"version.txt": tag}, f"release {tag}")
        upstream.tag(tag)
    source = GitSource(GitSourceSpec(url=daemon.url(), semver=">=1.0.0, <2.0.0"),
                       tmp_path / "wc")
    rev = source.fetch()
    assert rev.sha == shas["v1.10.0"]
    assert (rev.path / "version.txt").read_text() == "v1.10.0"
    assert not source.fetch().changed
    shas["1.10.1"] = upstream.commit({"version.txt": "1.10.1"}, "a patch")
    upstream.tag("1.10.1")
    moved = source.fetch()
    assert moved.changed and moved.sha == shas["1.10.1"]
    tilde = GitSource(GitSourceSpec(url=daemon.url(), semver="~1.2"), tmp_path / "wc2")
    assert tilde.fetch().sha == shas["v1.2.0"]
    with pytest.raises(SourceError, match=r"no tag satisfies the semver range '>=3'"):
        GitSource(GitSourceSpec(url=daemon.url(), semver=">=3"), tmp_path / "wc3").fetch()
    with pytest.raises(SourceError, match=r"semver range 'not a range' does not parse"):
        GitSourceSpec(url=daemon.url(), semver="not a range")
