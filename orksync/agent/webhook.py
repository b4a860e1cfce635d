"""Git webhooks (`POST /hooks/git`): who may ask the agent to fetch at once.

A hook is accepted only when it proves the shared secret: GitHub's (and Gitea's, which
sends the same header) `X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body>`, or
GitLab's `X-Gitlab-Token: <secret>`. Comparisons are constant-time. The body is not
otherwise read: a hook only says "look now", and the agent then asks the remote itself
(`git ls-remote`), so a forged payload could at most cause one needless ls-remote, and it
cannot even do that without the secret. The secret file is read at every hook, so a
rotated Secret takes effect without a restart.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from orksync.errors import UsageError

PATH = "/hooks/git"
# A push event's payload is a few kilobytes (tens for a push of many commits); a longer
# body is refused unread (413). GitHub caps payloads at 25 MB, which only events carrying
# whole file lists or large diffs reach: the agent never needs their content, as a hook
# only says "look now".
MAX_BODY = 1024 * 1024


class Headers(Protocol):
    """A request's headers, looked up without regard to case (an email.message.Message,
    as orksync.agent.server and http.server give them)."""

    def get(self, name: str) -> str | None: ...


@dataclass(frozen=True, slots=True)
class Verdict:
    status: int  # the HTTP answer: 202 accepted, 200 ping, 401, 413, 500
    message: str
    provider: str = ""  # github or gitlab, when accepted

    @property
    def accepted(self) -> bool:
        return self.status == 202


def read_secret(path: Path) -> bytes:
    """The secret, without surrounding whitespace (a file written with `echo` ends in a
    line break). Empty is refused: an empty HMAC key is no secret."""
    try:
        secret = path.read_bytes().strip()
    except OSError as err:
        raise UsageError(f"cannot read the webhook secret: {err.strerror}",
                         subject=str(path)) from None
    if not secret:
        raise UsageError("the webhook secret is empty", subject=str(path))
    return secret


def verify(secret: bytes, headers: Headers, body: bytes) -> Verdict:
    """Whether a hook proves the secret. `headers`: case-insensitive (http.server's)."""
    signature = headers.get("X-Hub-Signature-256")
    token = headers.get("X-Gitlab-Token")
    if signature is not None:
        scheme, _, digest = signature.strip().partition("=")
        expected = hmac.new(secret, body, hashlib.sha256).hexdigest()
        if scheme != "sha256" or not hmac.compare_digest(expected, digest.lower()):
            return Verdict(401, "signature does not match")
        provider = "github"
    elif token is not None:
        if not hmac.compare_digest(secret, token.strip().encode("utf-8", "replace")):
            return Verdict(401, "token does not match")
        provider = "gitlab"
    else:
        return Verdict(401, "no X-Hub-Signature-256 or X-Gitlab-Token header")
    if (headers.get("X-GitHub-Event") or headers.get("X-Gitea-Event")) == "ping":
        return Verdict(200, "pong", provider)
    return Verdict(202, "fetch requested", provider)
