"""Notifications (orksync.agent.notify) against local fakes of the forges' APIs: a small HTTP
server on 127.0.0.1 per test that records each request (method, path, headers, JSON body)
and answers as the real API does (201), or fails, or hangs until the test lets it go.

The shapes asserted are the documented ones: GitHub `POST /repos/{owner}/{repo}/statuses/{sha}`
(state pending|success|failure, context, description; `Authorization: Bearer`), GitLab
`POST /projects/{url-encoded path}/statuses/{sha}` (state pending|success|failed, name;
`PRIVATE-TOKEN`), Gitea `POST /repos/{owner}/{repo}/statuses/{sha}` (GitHub's body;
`Authorization: token`). A notifier whose endpoint hangs or fails holds no caller: the
calls return while the server has not answered, and what does not fit in the queue is
dropped and counted (steps counted, never time).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from orksync.agent.notify import (
    Notifier,
    NotifyConfig,
    notification_counter,
    parse_repository,
    public_url,
)
from orksync.errors import UsageError

SHA = "0123456789abcdef0123456789abcdef01234567"
TOKEN = "tok-" + "5ecret" * 4


@dataclass
class Fake:
    """A fake forge: records every request; `status` is the answer; while `hold` is
    clear, each handler waits for it (a hanging endpoint)."""

    status: int = 201
    requests: list[dict[str, Any]] = field(default_factory=list)
    hold: threading.Event = field(default_factory=threading.Event)
    arrived: threading.Semaphore = field(default_factory=lambda: threading.Semaphore(0))
    url: str = ""

    def wait_requests(self, n: int) -> list[dict[str, Any]]:
        for _ in range(n):
            assert self.arrived.acquire(timeout=30), f"{len(self.requests)} of {n} requests"
        return self.requests


@pytest.fixture
def fake() -> Iterator[Fake]:
    with serve_fake() as state:
        yield state


@contextlib.contextmanager
def serve_fake() -> Iterator[Fake]:
    """A fake forge serving on 127.0.0.1 until the block ends."""
    state = Fake()
    state.hold.set()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            raw = self.rfile.read(length)
            state.requests.append({"method": "POST", "path": self.path,
                                   "headers": dict(self.headers.items()), "raw": raw,
                                   "body": json.loads(raw)})
            state.arrived.release()
            state.hold.wait(60)
            with contextlib.suppress(OSError):  # the client may be gone (killed, timed out)
                self.send_response(state.status)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b"{}")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield state
    finally:
        state.hold.set()
        server.shutdown()
        server.server_close()


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    return path


def notifier(config: NotifyConfig, repository: str = "https://github.com/acme/platform.git"
             ) -> tuple[Notifier, CollectorRegistry]:
    registry = CollectorRegistry()
    return Notifier.of(config, root="default", repository=repository,
                       counter=notification_counter(registry)), registry


def count(registry: CollectorRegistry, sink: str, result: str) -> float:
    return registry.get_sample_value("orksync_notifications_total",
                                     {"sink": sink, "result": result}) or 0.0


def test_github_gets_pending_then_success_for_the_commit(fake: Fake, token_file: Path) -> None:
    n, _ = notifier(NotifyConfig(commit_status="github", api_url=fake.url,
                                 token_file=token_file))
    n.started(SHA)
    n.finished(SHA, True, "")
    pending, success = fake.wait_requests(2)
    n.close()
    for request in (pending, success):
        assert request["path"] == f"/repos/acme/platform/statuses/{SHA}"
        headers = request["headers"]
        assert headers["Authorization"] == f"Bearer {TOKEN}"
        assert headers["Accept"] == "application/vnd.github+json"
        assert headers["X-GitHub-Api-Version"] == "2022-11-28"
        assert headers["Content-Type"] == "application/json"
        assert request["body"]["context"] == "orksync/default"
        assert set(request["body"]) == {"state", "context", "description"}
    assert pending["body"]["state"] == "pending"
    assert success["body"]["state"] == "success"
    assert success["body"]["description"] == "synced"


def test_gitlab_gets_failed_with_the_message_for_a_project_with_subgroups(
        fake: Fake, token_file: Path) -> None:
    n, _ = notifier(NotifyConfig(commit_status="gitlab", api_url=fake.url + "/api/v4",
                                 token_file=token_file, target_url="https://orksync.example/ui/"),
                    repository="git@gitlab.example.com:platform/infra/repo.git")
    n.started(SHA)
    message = "platform/apps.yaml:3: WebApp team-a/shop: spec.replicas: not an integer"
    n.finished(SHA, False, message)
    pending, failed = fake.wait_requests(2)
    n.close()
    for request in (pending, failed):
        assert request["path"] == f"/api/v4/projects/platform%2Finfra%2Frepo/statuses/{SHA}"
        assert request["headers"]["PRIVATE-TOKEN"] == TOKEN
        assert "Authorization" not in request["headers"]
        assert request["body"]["name"] == "orksync/default"
        assert request["body"]["target_url"] == "https://orksync.example/ui/"
    assert pending["body"]["state"] == "pending"
    assert failed["body"] == {"state": "failed", "name": "orksync/default",
                              "description": message,
                              "target_url": "https://orksync.example/ui/"}


def test_gitea_gets_the_github_shape_with_its_token_header(fake: Fake, token_file: Path
                                                           ) -> None:
    n, registry = notifier(NotifyConfig(commit_status="gitea", api_url=fake.url + "/api/v1",
                                        token_file=token_file, context="deploy/prod"),
                           repository="https://git.example.org/ops/cluster")
    n.finished(SHA, False, "x" * 500)  # a long message: cut to what GitHub accepts
    (request,) = fake.wait_requests(1)
    n.close()
    assert request["path"] == f"/api/v1/repos/ops/cluster/statuses/{SHA}"
    assert request["headers"]["Authorization"] == f"token {TOKEN}"
    assert request["body"]["state"] == "failure"
    assert request["body"]["context"] == "deploy/prod"
    assert len(request["body"]["description"]) == 140
    assert count(registry, "commit-status", "sent") == 1


def test_the_webhook_alert_is_signed_json_sent_when_a_sync_ends(fake: Fake, tmp_path: Path
                                                               ) -> None:
    secret = tmp_path / "secret"
    secret.write_text("hmac-key\n")
    n, _ = notifier(NotifyConfig(webhook_url=fake.url + "/hooks/chat",
                                 webhook_secret_file=secret),
                    repository="https://user:" + TOKEN + "@git.example.com/acme/platform.git")
    n.started(SHA)  # an alert says how a sync ended: nothing for pending
    n.finished(SHA, False, "render error")
    (request,) = fake.wait_requests(1)
    n.close()
    assert request["path"] == "/hooks/chat"
    signature = request["headers"]["X-Orksync-Signature-256"]
    assert signature == "sha256=" + hmac.new(b"hmac-key", request["raw"],
                                             hashlib.sha256).hexdigest()
    body = request["body"]
    assert body["state"] == "failure" and body["revision"] == SHA and body["root"] == "default"
    assert body["message"] == "render error"
    assert body["repository"] == "https://git.example.com/acme/platform.git"  # no credentials
    assert body["text"] == f"orksync default: failed to sync revision {SHA[:12]}: render error"
    assert TOKEN not in request["raw"].decode()


def test_a_state_is_posted_once_per_revision(fake: Fake, token_file: Path) -> None:
    """A failing revision retried with backoff: one pending, one failure; it then
    succeeds: one success; the next revision: pending again."""
    n, _ = notifier(NotifyConfig(commit_status="github", api_url=fake.url,
                                 token_file=token_file))
    for _ in range(3):
        n.started(SHA)
        n.finished(SHA, False, "boom")
    n.started(SHA)
    n.finished(SHA, True)
    other = "f" * 40
    n.started(other)
    requests = fake.wait_requests(4)
    n.close()
    assert [(r["path"][-40:], r["body"]["state"]) for r in requests] == [
        (SHA, "pending"), (SHA, "failure"), (SHA, "success"), (other, "pending")]


def test_a_hanging_endpoint_holds_no_caller_and_a_full_queue_drops_and_counts(
        fake: Fake, token_file: Path, caplog: pytest.LogCaptureFixture) -> None:
    fake.hold.clear()  # the server takes each request and does not answer
    capacity = 4
    registry = CollectorRegistry()
    config = NotifyConfig(commit_status="github", api_url=fake.url, token_file=token_file,
                          capacity=capacity)
    n = Notifier.of(config, root="default", repository="https://github.com/acme/platform",
                    counter=notification_counter(registry))
    n.finished("0" * 40, True)
    fake.wait_requests(1)  # the thread is now inside its request, held by the server
    revisions = [f"{i:040x}" for i in range(1, capacity + 6)]
    with caplog.at_level(logging.WARNING, logger="orksync.agent.notify"):
        for revision in revisions:
            n.finished(revision, False, "failed")  # returns although nothing is answered
    assert len(fake.requests) == 1  # the server has answered nothing and seen one request
    assert count(registry, "commit-status", "dropped") == len(revisions) - capacity
    full = [r for r in caplog.records if "queue is full" in r.getMessage()]
    assert len(full) == 1, caplog.text  # once per failure streak, not per drop
    fake.hold.set()
    fake.wait_requests(capacity)  # the queued ones go out once the server answers
    n.close()
    assert count(registry, "commit-status", "sent") == capacity + 1


def test_a_failing_endpoint_is_counted_and_logged_once_per_streak_without_the_token(
        fake: Fake, token_file: Path, caplog: pytest.LogCaptureFixture) -> None:
    fake.status = 500
    n, registry = notifier(NotifyConfig(commit_status="github", api_url=fake.url,
                                        token_file=token_file))
    with caplog.at_level(logging.INFO, logger="orksync.agent.notify"):
        for i in range(3):
            n.finished(f"{i:040x}", True)
        fake.wait_requests(3)
        fake.status = 201
        n.finished("a" * 40, True)
        fake.wait_requests(1)
        n.close()
    assert count(registry, "commit-status", "failed") == 3
    assert count(registry, "commit-status", "sent") == 1
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "HTTP 500" in warnings[0], warnings
    assert any("posting again" in r.getMessage() for r in caplog.records)
    assert TOKEN not in caplog.text


def test_an_unreachable_endpoint_is_a_counted_failure(token_file: Path) -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    n, registry = notifier(NotifyConfig(commit_status="github",
                                        api_url=f"http://127.0.0.1:{port}",
                                        token_file=token_file))
    n.finished(SHA, True)
    n.close()  # waits for the queued notification
    assert count(registry, "commit-status", "failed") == 1


@pytest.mark.parametrize(("url", "expected"), [
    ("https://github.com/acme/platform.git", ("github.com", "acme/platform")),
    ("https://github.com/acme/platform", ("github.com", "acme/platform")),
    ("https://x:y@github.example.com/acme/platform.git/", ("github.example.com",
                                                            "acme/platform")),
    ("ssh://git@gitlab.example.com:2222/group/sub/project.git",
     ("gitlab.example.com", "group/sub/project")),
    ("git@github.com:acme/platform.git", ("github.com", "acme/platform")),
    ("file:///srv/git/repo.git", ("", "")),
    ("/srv/git/repo", ("", "")),
])
def test_the_repository_is_told_from_the_git_url(url: str, expected: tuple[str, str]) -> None:
    assert parse_repository(url) == expected


def test_the_api_url_defaults_from_the_host(token_file: Path) -> None:
    def sink(provider: str, url: str) -> Any:
        (s,) = NotifyConfig(commit_status=provider, token_file=token_file).sinks(
            root="r", repository=url)
        return s

    assert sink("github", "https://github.com/a/b").api_url == "https://api.github.com"
    assert sink("github", "git@ghe.corp:a/b.git").api_url == "https://ghe.corp/api/v3"
    assert sink("gitlab", "https://gl.corp/a/b/c").api_url == "https://gl.corp/api/v4"
    assert sink("gitea", "https://tea.corp/a/b").api_url == "https://tea.corp/api/v1"
    assert public_url("https://u:p@h/x") == "https://h/x"


def test_settings_that_cannot_work_are_refused_at_start_up(
        token_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ORKSYNC_NOTIFY_TOKEN", raising=False)
    with pytest.raises(UsageError, match="needs a token"):
        NotifyConfig(commit_status="github").sinks(root="r", repository="https://github.com/a/b")
    with pytest.raises(UsageError, match="--notify-repo"):
        NotifyConfig(commit_status="github", token_file=token_file).sinks(
            root="r", repository="file:///srv/repo")
    with pytest.raises(UsageError, match=str(tmp_path / "missing")):
        NotifyConfig(commit_status="gitea", token_file=tmp_path / "missing").sinks(
            root="r", repository="https://tea/a/b")
    with pytest.raises(UsageError, match="not an http"):
        NotifyConfig(webhook_url="ftp://x").sinks(root="r", repository="")
    monkeypatch.setenv("ORKSYNC_NOTIFY_TOKEN", TOKEN)
    (sink,) = NotifyConfig(commit_status="github").sinks(root="r",
                                                          repository="https://github.com/a/b")
    assert sink.repo == "a/b"
