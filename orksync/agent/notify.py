"""Notifications of each revision's sync: a commit status on GitHub, GitLab or Gitea
(pending when a revision's sync starts, success or failure with its message when it ends)
and a generic webhook alert (a JSON body signed with HMAC-SHA256) for chat tools. I/O.

A notification never holds a sync: `Notifier.started` and `Notifier.finished` only put
the notification in a bounded queue, which one background thread empties, each request
bounded by a timeout. When the queue is full the notification is dropped and counted
(`orksync_notifications_total{result="dropped"}`); a failed post is counted and logged
once per failure streak of its sink, and not retried (the next outcome is posted anew).
The same state of the same revision is posted once, whatever the number of syncs that
reach it (a failing revision retried with backoff posts one failure).

What a notification says is the revision, its state and the sync's message (error
messages name files, objects and fields, never a generated value); the token and the
webhook's secret are read from their files at each post and go only into the request's
header.
"""

from __future__ import annotations

import contextlib
import enum
import hashlib
import hmac
import json
import logging
import os
import queue
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote, urlsplit, urlunsplit

import urllib3
from prometheus_client import CollectorRegistry, Counter

from orksync import __version__
from orksync.errors import UsageError

__all__ = ["CommitStatus", "Event", "Notifier", "NotifyConfig", "Request", "State",
           "WebhookAlert", "notification_counter", "parse_repository", "public_url"]

log = logging.getLogger("orksync.agent.notify")

PROVIDERS = ("github", "gitlab", "gitea")
SIGNATURE_HEADER = "X-Orksync-Signature-256"
DESCRIPTION_LIMIT = 140  # GitHub refuses a longer commit status description


class State(enum.Enum):
    PENDING = "pending"
    SUCCESS = "success"
    FAILURE = "failure"


@dataclass(frozen=True, slots=True)
class Event:
    """One revision's state, for one sync root."""

    root: str  # the sync root's name (its inventory's)
    revision: str  # the commit sha
    state: State
    message: str  # the sync's error, or what it did
    repository: str  # the repository's URL without credentials
    path: str = ""  # the directory inside the repository


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    url: str
    headers: dict[str, str]
    body: bytes


class Sink(Protocol):
    """Where notifications go: `wants` says which states it is told of, `request` makes
    the HTTP request of one event."""

    @property
    def name(self) -> str: ...

    def wants(self, state: State) -> bool: ...

    def request(self, event: Event) -> Request: ...


def read_secret_file(path: Path, what: str) -> str:
    """A token or secret from its file (a mounted Secret's key), surrounding whitespace
    removed; an error naming the file, never its content."""
    try:
        value = Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as err:
        raise UsageError(f"{path}: cannot read the {what}: {err.__class__.__name__}") from None
    if not value:
        raise UsageError(f"{path}: the {what} file is empty")
    return value


def public_url(url: str) -> str:
    """A repository URL without its credentials (`https://user:token@host/x` ->
    `https://host/x`), fit for a notification."""
    parts = urlsplit(url)
    if parts.scheme and "@" in parts.netloc:
        host = parts.netloc.rsplit("@", 1)[1]
        return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))
    return url


_SCP = re.compile(r"^(?:[^@/]+@)?(?P<host>[^:/]+):(?P<path>[^/].*)$")


def parse_repository(url: str) -> tuple[str, str]:
    """(host, owner/name) of a Git URL: https://host/owner/name(.git),
    ssh://git@host[:port]/owner/name.git, git@host:owner/name.git. GitLab's subgroups stay
    in the path (group/sub/name). ("", "") when the URL names no host (a local path,
    file://)."""
    parts = urlsplit(url)
    if parts.scheme in ("http", "https", "ssh", "git") and parts.hostname:
        host, path = parts.hostname, parts.path
    elif not parts.scheme or len(parts.scheme) == 1:  # scp-like, or a Windows drive
        match = _SCP.match(url)
        if match is None:
            return "", ""
        host, path = match["host"], match["path"]
    else:
        return "", ""
    path = path.strip("/")
    path = path.removesuffix(".git")
    return host, path


def default_api_url(provider: str, host: str) -> str:
    if provider == "github":
        return "https://api.github.com" if host == "github.com" else f"https://{host}/api/v3"
    if provider == "gitlab":
        return f"https://{host}/api/v4"
    return f"https://{host}/api/v1"


def _description(message: str) -> str:
    text = " ".join(message.split())
    return text if len(text) <= DESCRIPTION_LIMIT else text[:DESCRIPTION_LIMIT - 1] + "…"


def _default_message(event: Event) -> str:
    if event.state is State.PENDING:
        return "sync started"
    return "synced" if event.state is State.SUCCESS else "sync failed"


@dataclass(frozen=True, slots=True, kw_only=True)
class CommitStatus:
    """A commit status on a forge, for the sha of each revision. `repo` is owner/name
    (GitLab: the project's path with its groups, or its numeric id); `token` returns the
    API token, read when a status is posted."""

    provider: str  # github | gitlab | gitea
    api_url: str  # e.g. https://api.github.com, https://gitlab.example.com/api/v4
    repo: str
    token: Callable[[], str]
    context: str = "orksync"  # the status's name on the commit
    target_url: str = ""  # a link from the status (the web view), optional
    name: str = "commit-status"

    def wants(self, state: State) -> bool:
        return True

    def request(self, event: Event) -> Request:
        base = self.api_url.rstrip("/")
        description = _description(event.message or _default_message(event))
        token = self.token()
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.provider == "gitlab":
            # https://docs.gitlab.com/api/commits/#set-the-pipeline-status-of-a-commit
            state = {State.PENDING: "pending", State.SUCCESS: "success",
                     State.FAILURE: "failed"}[event.state]
            url = f"{base}/projects/{quote(self.repo, safe='')}/statuses/{event.revision}"
            body: dict[str, Any] = {"state": state, "name": self.context,
                                    "description": description}
            headers["PRIVATE-TOKEN"] = token
        else:
            # GitHub: POST /repos/{owner}/{repo}/statuses/{sha}; Gitea has the same path
            # and body, and takes `Authorization: token ...`
            url = f"{base}/repos/{self.repo}/statuses/{event.revision}"
            body = {"state": event.state.value, "context": self.context,
                    "description": description}
            if self.provider == "github":
                headers["Accept"] = "application/vnd.github+json"
                headers["X-GitHub-Api-Version"] = "2022-11-28"
                headers["Authorization"] = f"Bearer {token}"
            else:
                headers["Authorization"] = f"token {token}"
        if self.target_url:
            body["target_url"] = self.target_url
        return Request("POST", url, headers, json.dumps(body).encode())


@dataclass(frozen=True, slots=True, kw_only=True)
class WebhookAlert:
    """A JSON alert when a revision's sync ends (success or failure), signed with
    HMAC-SHA256 of the body under `secret` in the header X-Orksync-Signature-256
    (`sha256=<hex>`, as GitHub's webhooks sign). Its `text` makes it a ready message for
    Slack- and Mattermost-style incoming webhooks."""

    url: str
    secret: Callable[[], str] | None = None
    name: str = "webhook"

    def wants(self, state: State) -> bool:
        return state is not State.PENDING  # an alert says how a sync ended

    def request(self, event: Event) -> Request:
        verb = "synced" if event.state is State.SUCCESS else "failed to sync"
        text = f"orksync {event.root}: {verb} revision {event.revision[:12]}"
        if event.message and event.state is State.FAILURE:
            text += f": {event.message}"
        payload = {"root": event.root, "revision": event.revision, "state": event.state.value,
                   "message": event.message, "repository": event.repository,
                   "path": event.path, "time": datetime.now(UTC).isoformat(timespec="seconds"),
                   "text": text}
        body = json.dumps(payload).encode()
        headers = {"Content-Type": "application/json"}
        if self.secret is not None:
            digest = hmac.new(self.secret().encode(), body, hashlib.sha256).hexdigest()
            headers[SIGNATURE_HEADER] = f"sha256={digest}"
        return Request("POST", self.url, headers, body)


@dataclass(frozen=True, slots=True, kw_only=True)
class NotifyConfig:
    """What the agent notifies, from its flags (orksync.agent.command); a `Sync`'s
    controller can make one per Sync."""

    commit_status: str = ""  # "", github, gitlab or gitea
    api_url: str = ""  # default: from the repository's host
    repo: str = ""  # default: from the repository's URL
    token_file: Path | None = None  # else the environment's ORKSYNC_NOTIFY_TOKEN
    context: str = ""  # default: orksync/<root>
    target_url: str = ""
    webhook_url: str = ""
    webhook_secret_file: Path | None = None
    capacity: int = 64  # notifications waiting; more are dropped
    timeout: float = 10.0  # seconds, each request

    def sinks(self, *, root: str, repository: str) -> list[Sink]:
        """The sinks configured; a setting that cannot work (no token, a repository
        whose owner/name cannot be told) is refused here, at start-up."""
        sinks: list[Sink] = []
        if self.commit_status:
            if self.commit_status not in PROVIDERS:
                raise UsageError(f"--notify-commit-status {self.commit_status}: expected one "
                                 f"of {', '.join(PROVIDERS)}")
            host, path = parse_repository(repository)
            repo = self.repo or path
            if not repo or ("/" not in repo and not repo.isdigit()):
                raise UsageError(f"--notify-commit-status: cannot tell the repository's "
                                 f"owner/name from {public_url(repository)!r}: give "
                                 f"--notify-repo OWNER/NAME")
            api_url = self.api_url or (default_api_url(self.commit_status, host) if host
                                       else "")
            if not api_url:
                raise UsageError(f"--notify-commit-status: {public_url(repository)!r} names no "
                                 f"host: give --notify-api-url")
            sinks.append(CommitStatus(provider=self.commit_status, api_url=api_url, repo=repo,
                                      token=self._token(), context=self.context or
                                      f"orksync/{root}", target_url=self.target_url))
        if self.webhook_url:
            if urlsplit(self.webhook_url).scheme not in ("http", "https"):
                raise UsageError(f"--notify-webhook-url {self.webhook_url!r}: not an http(s) "
                                 f"URL")
            secret = None
            if self.webhook_secret_file is not None:
                secret_file = self.webhook_secret_file
                read_secret_file(secret_file, "webhook secret")  # refused at start-up if bad

                def secret() -> str:
                    return read_secret_file(secret_file, "webhook secret")
            sinks.append(WebhookAlert(url=self.webhook_url, secret=secret))
        return sinks

    def _token(self) -> Callable[[], str]:
        path = self.token_file
        if path is not None:
            read_secret_file(path, "notification token")  # refused at start-up if bad
            return lambda: read_secret_file(path, "notification token")
        if not os.environ.get("ORKSYNC_NOTIFY_TOKEN"):
            raise UsageError("--notify-commit-status needs a token: --notify-token-file "
                             "(a mounted Secret's key) or ORKSYNC_NOTIFY_TOKEN")
        return lambda: os.environ.get("ORKSYNC_NOTIFY_TOKEN", "")


def notification_counter(registry: CollectorRegistry) -> Counter:
    """The counter of notifications, one per registry (every Notifier of an agent shares
    it)."""
    return Counter("orksync_notifications_total",
                   "Notifications by sink (commit-status, webhook) and result (sent, failed, "
                   "dropped: the queue was full)", ["sink", "result"], registry=registry)


class Notifier:
    """The notifications of one sync root: `started(revision)` when a revision's sync
    begins, `finished(revision, ok, message)` when it ends. Neither waits for the network
    (see the module's docstring); `close` ends the background thread."""

    def __init__(self, sinks: Sequence[Sink], *, root: str, repository: str, path: str = "",
                 counter: Counter | None = None, capacity: int = 64,
                 timeout: float = 10.0) -> None:
        self.sinks = list(sinks)
        self.root, self.repository, self.path = root, public_url(repository), path
        self.counts = counter or notification_counter(CollectorRegistry())
        # a queue and a thread per sink: a chat webhook that hangs holds no commit status
        self._queues: list[queue.Queue[Event | None]] = [queue.Queue(maxsize=capacity)
                                                         for _ in self.sinks]
        self._http = urllib3.PoolManager(
            retries=False, timeout=urllib3.Timeout(connect=timeout, read=timeout),
            headers={"User-Agent": f"orksync/{__version__}"})
        self._last: tuple[str, State] | None = None  # the last state posted, by revision
        self._failing: set[str] = set()  # sinks in a failure streak (logged once)
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    @classmethod
    def of(cls, config: NotifyConfig, *, root: str, repository: str, path: str = "",
           counter: Counter | None = None) -> Notifier:
        return cls(config.sinks(root=root, repository=repository), root=root,
                   repository=repository, path=path, counter=counter,
                   capacity=config.capacity, timeout=config.timeout)

    def started(self, revision: str) -> None:
        """A revision's sync begins: pending, unless this revision was already notified
        (a retry of the same revision)."""
        with self._lock:
            if self._last is not None and self._last[0] == revision:
                return
        self._notify(revision, State.PENDING, "")

    def finished(self, revision: str, ok: bool, message: str = "") -> None:
        self._notify(revision, State.SUCCESS if ok else State.FAILURE, message)

    def _notify(self, revision: str, state: State, message: str) -> None:
        if not self.sinks or not revision:
            return
        with self._lock:
            if self._last == (revision, state):
                return
            self._last = (revision, state)
            self._start()
        event = Event(root=self.root, revision=revision, state=state, message=message,
                      repository=self.repository, path=self.path)
        for sink, waiting in zip(self.sinks, self._queues, strict=True):
            if not sink.wants(state):
                continue
            try:
                waiting.put_nowait(event)
            except queue.Full:
                self.counts.labels(sink=sink.name, result="dropped").inc()
                self._failed(sink, "the notification queue is full: notification dropped")

    def _start(self) -> None:
        if not self._threads:
            for sink, waiting in zip(self.sinks, self._queues, strict=True):
                thread = threading.Thread(target=self._run, args=(sink, waiting),
                                          name=f"orksync-notify-{sink.name}", daemon=True)
                thread.start()
                self._threads.append(thread)

    def _run(self, sink: Sink, waiting: queue.Queue[Event | None]) -> None:
        while True:
            event = waiting.get()
            if event is None:
                return
            try:
                problem = self._post(sink, event)
            except Exception as err:  # a notification never ends the thread
                problem = f"{err.__class__.__name__}: {err}"
            if problem is None:
                self.counts.labels(sink=sink.name, result="sent").inc()
                with self._lock:
                    recovered = sink.name in self._failing
                    self._failing.discard(sink.name)
                if recovered:
                    log.info("notify %s: posting again", sink.name)
            else:
                self.counts.labels(sink=sink.name, result="failed").inc()
                self._failed(sink, problem)

    def _post(self, sink: Sink, event: Event) -> str | None:
        """None when posted, else what went wrong (no header, no body sent)."""
        try:
            request = sink.request(event)
        except UsageError as err:  # the token or secret file became unreadable
            return str(err)
        try:
            response = self._http.request(request.method, request.url, body=request.body,
                                          headers=request.headers, redirect=False,
                                          preload_content=False)
        except urllib3.exceptions.HTTPError as err:
            return f"POST {_safe_url(request.url)}: {err.__class__.__name__}"
        try:
            if 200 <= response.status < 300:
                return None
            return f"POST {_safe_url(request.url)}: HTTP {response.status} {response.reason}"
        finally:
            response.drain_conn()
            response.release_conn()

    def _failed(self, sink: Sink, problem: str) -> None:
        with self._lock:
            first = sink.name not in self._failing
            self._failing.add(sink.name)
        if first:
            log.warning("notify %s: %s (further failures are counted, not logged, until a "
                        "notification goes through)", sink.name, problem)

    def close(self, grace: float = 5.0) -> None:
        """Stop the threads once the notifications queued are posted, waiting at most
        `grace` seconds in all (a pod's termination grace period is short); a thread
        still busy then is left, a daemon, to the process's end."""
        for waiting in self._queues:
            with contextlib.suppress(queue.Full):
                waiting.put_nowait(None)
        deadline = time.monotonic() + grace
        for thread in self._threads:
            thread.join(timeout=max(deadline - time.monotonic(), 0.0))
        if not any(thread.is_alive() for thread in self._threads):
            self._http.clear()


def _safe_url(url: str) -> str:
    """A URL for a log line: scheme and host only (a chat tool's webhook URL carries its
    token in the path, others in the query or the user info)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    return f"{parts.scheme}://{host}/…"


