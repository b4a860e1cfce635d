"""The agent's read-only web view (`GET /ui/`): server-rendered pages of the sync roots,
the custom resources and their trees, the last syncs, the drift repaired and the last
Events, shown only as far as the cluster authorises the bearer of the request's token
(orksync.agent.ui.access)."""
