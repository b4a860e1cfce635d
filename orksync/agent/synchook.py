"""A Sync's Git webhook (`POST /hooks/git/<namespace>/<name>`, orksync.agent.controller):
verified with the key of the Secret the Sync names, counted, and for a Sync of several
shards passed on to the other shards' servers through an annotation on the Sync."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from orksync.agent import syncs, webhook
from orksync.agent.metrics import Metrics
from orksync.cluster.kube import Kube
from orksync.cluster.live import rfc3339
from orksync.errors import ClusterError, OrksyncError

log = logging.getLogger("orksync.agent.controller")


def verify(kube: Kube, metrics: Metrics, spec: syncs.SyncSpec, key: str,
           headers: webhook.Headers, body: bytes, client: str) -> webhook.Verdict:
    """The hook checked against the key `token` of the Sync's webhook Secret (read in its
    namespace; its value reaches no message); counted by result."""
    try:
        data = syncs.read_secret(kube, spec.namespace, spec.webhook_secret,
                                 "spec.webhook.secretRef")
    except OrksyncError as err:  # missing, unreadable, or the Lease lost meanwhile
        metrics.webhooks.labels(result="error").inc()
        log.error("webhook for Sync %s: %s", key, err)
        return webhook.Verdict(500, "the webhook secret cannot be read")
    token = data.get("token", b"").strip()
    if not token:  # an empty HMAC key is no secret
        log.error("webhook for Sync %s: its Secret %s has no key token", key,
                  spec.webhook_secret)
        return webhook.Verdict(500, "the webhook secret cannot be read")
    verdict = webhook.verify(token, headers, body)
    if verdict.status == 401:
        metrics.webhooks.labels(result="refused").inc()
        log.warning("webhook for Sync %s from %s refused: %s", key, client, verdict.message)
    elif not verdict.accepted:
        metrics.webhooks.labels(result="ping").inc()
    else:
        metrics.webhooks.labels(result="accepted").inc()
    return verdict


def tell_shards(kube: Kube, obj: Mapping[str, Any], key: str) -> None:
    """`syncs.HOOK_ANNOTATION` set on the Sync: every replica serving one of its shards
    sees it on its watch and fetches at once."""
    try:
        syncs.annotate(kube, obj, syncs.HOOK_ANNOTATION, rfc3339(datetime.now(UTC)))
    except ClusterError as err:
        log.error("webhook for Sync %s: the other shards are not told (they fetch at their "
                  "interval): %s", key, err)
