"""The web view's decisions, without a cluster: the authorisation caches and the budget of
reviews per request, what a partly readable tree shows, the journal's bounds, and that the
templates escape what they show. The same behaviour against the real control plane and in
a browser: tests/agent/test_webui_cluster.py."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from orksync.agent.ui import access, data, journal
from orksync.agent.ui.access import Access, Reviewer, Unavailable, User
from orksync.agent.ui.app import WebView
from orksync.cluster.kube import Resource
from orksync.errors import ClusterError
from orksync.lifecycle.overview import ChildRow, ResourceRow
from orksync.model import Action, Change, ObjRef

ALICE = User("alice", groups=("team-a",))


class FakeKube:
    """Answers TokenReviews and SubjectAccessReviews from tables; counts them."""

    def __init__(self, tokens: dict[str, str], allowed: set[tuple[str, str, str]]) -> None:
        self.tokens = tokens  # token -> username
        self.allowed = allowed  # (verb, resource, namespace)
        self.sent: list[dict[str, Any]] = []
        self.down = False

    def request(self, method: str, path: str, *, body: Any = None, subject: str = "",
                **_: Any) -> Any:
        if self.down:
            raise ClusterError("connection refused", subject=subject)
        self.sent.append(body)
        if path.endswith("/tokenreviews"):
            name = self.tokens.get(body["spec"]["token"])
            return {"status": {"authenticated": name is not None,
                               **({"user": {"username": name, "groups": ["g"]}}
                                  if name else {})}}
        attrs = body["spec"]["resourceAttributes"]
        return {"status": {"allowed": (attrs["verb"], attrs["resource"],
                                       attrs.get("namespace", "")) in self.allowed}}

    def resource(self, api_version: str, kind: str) -> Resource:
        group, _, version = api_version.rpartition("/")
        return Resource(group=group, version=version, kind=kind,
                        plural=kind.lower() + "s", namespaced=True)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_token_is_reviewed_once_per_ttl_and_kept_only_as_its_hash() -> None:
    kube = FakeKube({"tok-alice": "alice"}, set())
    clock = Clock()
    reviewer = Reviewer(kube, clock=clock)  # type: ignore[arg-type]
    assert reviewer.user("tok-alice") == User("alice", groups=("g",))
    assert reviewer.user("tok-alice") is not None
    assert reviewer.user("forged") is None
    assert reviewer.user("forged") is None  # a refusal is remembered as well
    assert len(kube.sent) == 2
    assert not any("tok-alice" in str(k) for k in reviewer._tokens._items)
    clock.now += access.TTL
    reviewer.user("tok-alice")
    assert len(kube.sent) == 3
    kube.down = True
    clock.now += access.TTL
    with pytest.raises(Unavailable):  # an outage is no refusal, and is not remembered
        reviewer.user("tok-alice")
    kube.down = False
    assert reviewer.user("tok-alice") is not None


def test_reviews_are_cached_per_user_and_bounded_per_request() -> None:
    kube = FakeKube({}, {("list", "widgets", "a"), ("list", "widgets", "b")})
    reviewer = Reviewer(kube)  # type: ignore[arg-type]
    first = Access(reviewer, ALICE, budget=2)
    assert first.may("list", "test.io", "widgets", "a")
    assert first.may("list", "test.io", "widgets", "a")  # asked once per request
    assert first.may("list", "test.io", "widgets", "b")
    assert not first.truncated
    # the budget is spent: what cannot be asked is refused, and the page says so
    assert not first.may("list", "test.io", "widgets", "c")
    assert first.truncated
    assert reviewer.reviews == 2
    # the next request finds the answers cached, and asks only about the rest
    second = Access(reviewer, ALICE, budget=2)
    assert second.may("list", "test.io", "widgets", "a")
    assert not second.may("list", "test.io", "widgets", "c")
    assert reviewer.reviews == 3 and not second.truncated
    # another user's answers are their own
    assert not Access(reviewer, User("bob"), budget=1).may("list", "test.io", "widgets", "z")
    assert reviewer.reviews == 4
    spec = kube.sent[0]["spec"]
    assert spec["user"] == "alice" and spec["groups"] == ["team-a"]
    assert spec["resourceAttributes"] == {"verb": "list", "group": "test.io",
                                          "resource": "widgets", "namespace": "a"}


def test_the_decision_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(access, "MAX_DECISIONS", 3)
    reviewer = Reviewer(FakeKube({}, set()))  # type: ignore[arg-type]
    for ns in "abcdef":
        Access(reviewer, ALICE).may("list", "", "pods", ns)
    assert len(reviewer._decisions) == 3


def _row(ns: str, children: tuple[ChildRow, ...], message: str = "m") -> ResourceRow:
    return ResourceRow(ref=ObjRef(api_version="test.io/v1", kind="Widget", namespace=ns,
                                  name="w"), root="r", ready="True", health="InProgress",
                       revision="abc", created="", message=message, children=children)


def test_a_tree_shows_only_the_children_its_reader_may_list() -> None:
    secret = ChildRow(ObjRef(api_version="v1", kind="Secret", namespace="a", name="w-db"),
                      "Missing", "not in the cluster")
    deploy = ChildRow(ObjRef(api_version="apps/v1", kind="Deployment", namespace="a",
                             name="w"), "Current", "")
    row = _row("a", (deploy, secret), message="Secret/a/w-db: Missing: not in the cluster")
    kube = FakeKube({}, {("list", "widgets", "a"), ("list", "deployments", "a")})
    flt = data.Filter(kube, Access(Reviewer(kube), ALICE))  # type: ignore[arg-type]
    shown = flt.row(row)
    assert shown is not None
    assert shown.children == (deploy,)
    assert "w-db" not in shown.message  # the health's message named the hidden child
    assert "1 of them not shown" in shown.message
    assert flt.row(_row("b", (deploy,))) is None


def _nested() -> tuple[ChildRow, ChildRow, ChildRow]:
    """A CacheCluster a `custom:` block created, with its Deployment and Secret beneath."""
    redis = ChildRow(ObjRef(api_version="apps/v1", kind="Deployment", namespace="a",
                            name="w-cache-redis"), "InProgress", "ready: 0/2")
    secret = ChildRow(ObjRef(api_version="v1", kind="Secret", namespace="a",
                             name="w-cache-auth"), "Current", "")
    cache = ChildRow(ObjRef(api_version="test.io/v1", kind="CacheCluster", namespace="a",
                            name="w-cache"), "InProgress", "Deployment/a/w-cache-redis: ...",
                     children=(redis, secret), ready="False")
    return cache, redis, secret


def test_a_created_custom_resources_children_are_cut_to_what_its_reader_may_list() -> None:
    cache, redis, _ = _nested()
    kube = FakeKube({}, {("list", "widgets", "a"), ("list", "cacheclusters", "a"),
                         ("list", "deployments", "a")})
    flt = data.Filter(kube, Access(Reviewer(kube), ALICE))  # type: ignore[arg-type]
    shown = flt.row(_row("a", (cache,)))
    assert shown is not None
    [shown_cache] = shown.children
    assert shown_cache.children == (redis,)
    assert "1 children not shown" in shown_cache.message
    assert "1 of them not shown" in shown.message and "health of 3 children" in shown.message
    kube.allowed.discard(("list", "cacheclusters", "a"))  # everything beneath goes with it
    flt = data.Filter(kube, Access(Reviewer(kube), ALICE))  # type: ignore[arg-type]
    shown = flt.row(_row("a", (cache,)))
    assert shown is not None and shown.children == ()
    assert "3 of them not shown" in shown.message


def test_the_children_shown_count_those_beneath_a_created_custom_resource(
        monkeypatch: pytest.MonkeyPatch) -> None:
    cache, redis, _ = _nested()
    monkeypatch.setattr(data, "MAX_CHILDREN", 2)
    shown, more = data.children(_row("a", (cache,)))
    assert [c.ref for c in shown] == [cache.ref] and shown[0].children == (redis,)
    assert more == 1


def test_the_tree_page_draws_a_created_custom_resource_with_its_children_beneath() -> None:
    cache, redis, secret = _nested()
    env = WebView(FakeKube({}, set()), journal.Journal(), list,  # type: ignore[arg-type]
                  "orksync-system").env
    html = env.get_template("tree.html").render(
        page=data.Page(user="u"), row=_row("a", (cache,)), children=[cache], more=0,
        max_children=300, csrf="x", prefix="/ui", now=datetime.now(UTC),
        age=lambda created: "-")
    inner = html.split(f"<code>{cache.ref}</code>", 1)[1]
    assert 'class="badge r-false"' in inner.split("<ul>", 1)[0]  # its Ready
    nested = inner.split("<ul>", 1)[1].split("</ul>", 1)[0]
    assert f"<code>{redis.ref}</code>" in nested and f"<code>{secret.ref}</code>" in nested


def test_the_journal_keeps_the_last_syncs_and_writes_only() -> None:
    j = journal.Journal()
    for i in range(journal.KEEP_SYNCS + 5):
        j.synced("root", kind="full", revision=f"r{i}", ok=True, counts={"created": i})
    syncs = j.syncs("root")
    assert len(syncs) == journal.KEEP_SYNCS and syncs[0].revision == f"r{journal.KEEP_SYNCS + 4}"
    assert syncs[-1].counts == {"created": 5}
    ref = ObjRef(api_version="v1", kind="ConfigMap", namespace="a", name="c")
    j.repaired("root", Change(ref=ref, action=Action.UNCHANGED))
    j.repaired("root", Change(ref=ref, action=Action.CREATED))
    assert [r.action for r in j.repairs("root")] == ["created"]
    assert j.syncs("other") == [] and j.repairs("other") == []
    seen = j.version
    j.touch()
    assert j.wait(seen, timeout=0) == seen + 1


def test_the_templates_escape_what_they_show() -> None:
    env = WebView(FakeKube({}, set()), journal.Journal(), list,  # type: ignore[arg-type]
                  "orksync-system").env
    evil = "<script>alert(1)</script>"
    page = data.Page(user=evil, rows=[_row("a", (), message=evil)])
    now = datetime.now(UTC)
    html = env.get_template("index.html").render(page=page, csrf="x", prefix="/ui",
                                                 now=now, age=lambda created: "-")
    assert evil not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
