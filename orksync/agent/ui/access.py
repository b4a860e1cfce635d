"""Who a web request's bearer is and what the cluster lets them read.

The token (an `Authorization: Bearer` header or the login cookie) is checked with a
TokenReview; what its identity may see with SubjectAccessReviews, one per verb, API
group, resource and namespace. Both answers are cached for `TTL` seconds in bounded caches
(a token by its SHA-256, never by itself), so a page costs a few reviews once and none while
it is reloaded. A request may send at most `MAX_REVIEWS` SubjectAccessReviews not answered
by the cache; what it could not ask about is not shown (`Access.truncated` says so).
The agent asks as itself: its ClusterRole grants `create` on `tokenreviews` and
`subjectaccessreviews`, nothing more for the view.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from orksync.cluster.kube import Kube
from orksync.errors import ClusterError

__all__ = ["Access", "Reviewer", "User"]

TTL = 30.0  # seconds an answer of the API server is reused
MAX_TOKENS = 256  # tokens remembered
MAX_DECISIONS = 4096  # SubjectAccessReview answers remembered
MAX_REVIEWS = 40  # SubjectAccessReviews one request may send

K = TypeVar("K")
V = TypeVar("V")


class _TtlCache(Generic[K, V]):
    """At most `size` entries, each for `ttl` seconds; the oldest goes first."""

    def __init__(self, size: int, ttl: float, clock: Callable[[], float]) -> None:
        self._items: OrderedDict[K, tuple[float, V]] = OrderedDict()
        self._size, self._ttl, self._clock = size, ttl, clock
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            found = self._items.get(key)
            if found is None:
                return None
            if found[0] <= self._clock():
                del self._items[key]
                return None
            return found[1]

    def put(self, key: K, value: V) -> None:
        with self._lock:
            self._items[key] = (self._clock() + self._ttl, value)
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)


@dataclass(frozen=True, slots=True)
class User:
    """An identity as the TokenReview names it."""

    username: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def spec(self) -> dict[str, Any]:
        """The identity part of a SubjectAccessReview's spec."""
        out: dict[str, Any] = {"user": self.username, "groups": list(self.groups)}
        if self.uid:
            out["uid"] = self.uid
        if self.extra:
            out["extra"] = {k: list(v) for k, v in self.extra}
        return out


class Unavailable(Exception):
    """The API server could not answer a review: the request cannot be authorised now."""


class Reviewer:
    """The TokenReview and SubjectAccessReview client with its caches, shared by every
    request; `kube`: the agent's connection (ungated: a standby serves the view too)."""

    def __init__(self, kube: Kube, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.kube = kube
        # by the token's SHA-256: (its user,) or (None,) when the API server refused it
        self._tokens: _TtlCache[str, tuple[User | None]] = _TtlCache(MAX_TOKENS, TTL, clock)
        self._decisions: _TtlCache[tuple[str, str, str, str, str, str], bool] = \
            _TtlCache(MAX_DECISIONS, TTL, clock)
        self.reviews = 0  # SubjectAccessReviews sent, for tests

    def user(self, token: str) -> User | None:
        """The token's identity, None when the API server does not accept it. Raises
        Unavailable when it cannot be asked."""
        key = hashlib.sha256(token.encode()).hexdigest()
        cached = self._tokens.get(key)
        if cached is not None:
            return cached[0]
        try:
            answer = self.kube.request(
                "POST", "/apis/authentication.k8s.io/v1/tokenreviews",
                body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                      "spec": {"token": token}}, subject="TokenReview")
        except ClusterError as err:
            raise Unavailable(f"the token could not be checked: {err.detail}") from None
        status = (answer or {}).get("status") or {}
        user = None
        if status.get("authenticated"):
            info = status.get("user") or {}
            extra = info.get("extra") or {}
            user = User(username=str(info.get("username") or ""),
                        uid=str(info.get("uid") or ""),
                        groups=tuple(str(g) for g in info.get("groups") or ()),
                        extra=tuple(sorted((str(k), tuple(str(x) for x in v or ()))
                                           for k, v in extra.items())))
        self._tokens.put(key, (user,))
        return user

    def allowed(self, user: User, verb: str, group: str, resource: str, namespace: str,
                name: str = "") -> bool | None:
        """The cached answer, or None when it must be asked (`ask`)."""
        return self._decisions.get((user.username, verb, group, resource, namespace, name))

    def ask(self, user: User, verb: str, group: str, resource: str, namespace: str,
            name: str = "") -> bool:
        attributes = {"verb": verb, "group": group, "resource": resource}
        if namespace:
            attributes["namespace"] = namespace
        if name:
            attributes["name"] = name
        self.reviews += 1
        try:
            answer = self.kube.request(
                "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                body={"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                      "spec": {**user.spec(), "resourceAttributes": attributes}},
                subject="SubjectAccessReview")
        except ClusterError as err:
            raise Unavailable(f"access could not be checked: {err.detail}") from None
        allowed = bool(((answer or {}).get("status") or {}).get("allowed"))
        self._decisions.put((user.username, verb, group, resource, namespace, name), allowed)
        return allowed


@dataclass(slots=True)
class Access:
    """One request's view of what its user may read: cached answers first, then at most
    `budget` reviews; past the budget everything is refused and `truncated` is set."""

    reviewer: Reviewer
    user: User
    budget: int = MAX_REVIEWS
    truncated: bool = False
    _asked: dict[tuple[str, str, str, str, str], bool] = field(default_factory=dict)

    def may(self, verb: str, group: str, resource: str, namespace: str = "",
            name: str = "") -> bool:
        key = (verb, group, resource, namespace, name)
        if key in self._asked:
            return self._asked[key]
        answer = self.reviewer.allowed(self.user, *key)
        if answer is None:
            if self.budget <= 0:
                self.truncated = True
                return False
            self.budget -= 1
            answer = self.reviewer.ask(self.user, *key)
        self._asked[key] = answer
        return answer
