"""The `orksync agent` command: its flags (each with an ORKSYNC_* variable) and start-up."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orksync.errors import UsageError

if TYPE_CHECKING:
    from orksync.agent.config import AgentConfig
    from orksync.cluster.kube import Kube


def add_agent_parser(sub: Any, *, common_flags: tuple[Callable[[argparse.ArgumentParser], None],
                                                      ...],
                     seconds: Callable[[str], float]) -> None:
    p = sub.add_parser("agent", help="run the in-cluster agent: fetch, render, sync, repeat",
                       description="Keep the cluster equal to a Git repository: fetch it every "
                       "interval (or at a webhook); render and sync the custom resources a "
                       "new revision changed; render and sync everything every resync "
                       "interval (apply, prune); from watches, repair managed objects "
                       "edited or deleted by hand and render again a custom resource whose "
                       "children's status changed; rotate due Secrets on a schedule of "
                       "its own. "
                       "Leader-elected on a Lease; "
                       "serves /healthz, /readyz and /metrics. Every flag has an ORKSYNC_* "
                       "environment variable.")
    env = os.environ.get
    p.add_argument("--repo-url", default=env("ORKSYNC_REPO_URL"),
                   help="Git URL (https://, ssh://, git://, file://): serve this one repository "
                        "(the flags below); without it the agent serves the Sync objects of "
                        "the cluster (orksync.io/v1alpha1), each with its own settings "
                        "[ORKSYNC_REPO_URL]")
    p.add_argument("--watch-namespace", default=env("ORKSYNC_WATCH_NAMESPACE", ""),
                   help="without --repo-url: serve only the Syncs of this namespace "
                        "[ORKSYNC_WATCH_NAMESPACE, default every namespace]")
    p.add_argument("--concurrent-syncs", type=int,
                   default=int(env("ORKSYNC_CONCURRENT_SYNCS", "4")),
                   help="without --repo-url: how many Syncs sync at a time "
                        "[ORKSYNC_CONCURRENT_SYNCS, default 4]")
    p.add_argument("--allow-file-urls", action="store_true",
                   default=env("ORKSYNC_ALLOW_FILE_URLS", "false") == "true",
                   help="without --repo-url: admit Syncs of file:// URLs (they read the "
                        "agent's own disk) [ORKSYNC_ALLOW_FILE_URLS]")
    p.add_argument("--ref", default=env("ORKSYNC_REF", "main"),
                   help="branch, tag or commit [ORKSYNC_REF, default main]")
    p.add_argument("--path", default=env("ORKSYNC_PATH", ""),
                   help="directory inside the repository [ORKSYNC_PATH]")
    p.add_argument("--interval", type=seconds, default=env("ORKSYNC_INTERVAL", "60s"),
                   help="time between fetches of the repository: seconds or a duration like "
                        "3m [ORKSYNC_INTERVAL, default 60s]")
    p.add_argument("--resync-interval", type=seconds,
                   default=env("ORKSYNC_RESYNC_INTERVAL", "10m"),
                   help="time between full syncs (everything rendered, applied and pruned) "
                        "when no revision moved [ORKSYNC_RESYNC_INTERVAL, default 10m]")
    p.add_argument("--rotate-interval", type=seconds,
                   default=env("ORKSYNC_ROTATE_INTERVAL", "1h"),
                   help="time between rotation checks [ORKSYNC_ROTATE_INTERVAL, default 1h]")
    p.add_argument("--state-dir", type=Path, default=Path(env("ORKSYNC_STATE_DIR",
                                                             "/var/lib/orksync")),
                   help="working copy and rendered revisions [ORKSYNC_STATE_DIR]")
    p.add_argument("--listen", default=env("ORKSYNC_LISTEN", "0.0.0.0:8080"),
                   help="address of /healthz, /readyz, /metrics and the web view /ui/ "
                        "[ORKSYNC_LISTEN]")
    p.add_argument("--no-leader-elect", action="store_true",
                   default=env("ORKSYNC_LEADER_ELECT", "true") == "false",
                   help="write without holding the Lease (a single replica only)")
    p.add_argument("--lease-namespace", default=env("ORKSYNC_LEASE_NAMESPACE",
                                                    env("ORKSYNC_NAMESPACE", "orksync-system")),
                   help="namespace of the Lease [ORKSYNC_LEASE_NAMESPACE, else the pod's "
                        "ORKSYNC_NAMESPACE, else orksync-system]")
    p.add_argument("--lease-duration", type=seconds,
                   default=env("ORKSYNC_LEASE_DURATION", "15s"),
                   help="a standby takes the Lease over once it has seen no renewal for this "
                        "long [ORKSYNC_LEASE_DURATION, default 15s]")
    p.add_argument("--renew-deadline", type=seconds,
                   default=env("ORKSYNC_RENEW_DEADLINE", "10s"),
                   help="the leader stops writing when it could not renew for this long; "
                        "less than the lease duration minus the retry period "
                        "[ORKSYNC_RENEW_DEADLINE, default 10s]")
    p.add_argument("--retry-period", type=seconds,
                   default=env("ORKSYNC_RETRY_PERIOD", "2s"),
                   help="time between tries to renew or acquire the Lease "
                        "[ORKSYNC_RETRY_PERIOD, default 2s]")
    p.add_argument("--identity", default=env("ORKSYNC_POD_NAME"),
                   help="holder identity in the Lease [ORKSYNC_POD_NAME, else host-pid]")
    p.add_argument("--generation", default=env("ORKSYNC_GENERATION", ""),
                   help="this replica's release (deploy/: the pod-template-hash); replicas "
                        "sharing Syncs that start while others of another generation run "
                        "wait to take their place, so a rolling update moves each Sync "
                        "once [ORKSYNC_GENERATION]")
    p.add_argument("--webhook-secret-file", type=Path,
                   default=env("ORKSYNC_WEBHOOK_SECRET_FILE"),
                   help="serve POST /hooks/git, accepting hooks signed with this secret "
                        "(GitHub X-Hub-Signature-256, GitLab X-Gitlab-Token); a valid hook "
                        "fetches at once [ORKSYNC_WEBHOOK_SECRET_FILE]")
    p.add_argument("--shards", type=int, default=int(env("ORKSYNC_SHARDS", "1")),
                   help="split the custom resources across this many shards [ORKSYNC_SHARDS]")
    p.add_argument("--shard", type=int, default=int(env("ORKSYNC_SHARD", "0")),
                   help="the shard this agent runs, 0..shards-1; each shard has its own "
                        "Lease and inventory [ORKSYNC_SHARD]")
    p.add_argument("--repair-workers", type=int,
                   default=int(env("ORKSYNC_REPAIR_WORKERS", "4")),
                   help="threads repairing drift: a managed object edited or deleted by hand "
                        "is re-applied from the last render, one custom resource at a time "
                        "each; 0 leaves drift to the next sync [ORKSYNC_REPAIR_WORKERS, "
                        "default 4]")
    p.add_argument("--ui", choices=("true", "false"), default=env("ORKSYNC_UI", "true"),
                   help="serve the read-only web view on /ui/ of --listen, authorised by the "
                        "cluster: a bearer token checked with a TokenReview, what it may "
                        "read with SubjectAccessReviews [ORKSYNC_UI, default true]")
    p.add_argument("--git-username-file", type=Path, default=env("ORKSYNC_GIT_USERNAME_FILE"))
    p.add_argument("--git-password-file", type=Path, default=env("ORKSYNC_GIT_PASSWORD_FILE"),
                   help="file holding the password or token (read at every fetch)")
    p.add_argument("--git-ssh-key-file", type=Path, default=env("ORKSYNC_GIT_SSH_KEY_FILE"))
    p.add_argument("--git-known-hosts-file", type=Path,
                   default=env("ORKSYNC_GIT_KNOWN_HOSTS_FILE"))
    p.add_argument("--verify-signatures", choices=("ssh", "gpg"),
                   default=env("ORKSYNC_VERIFY_SIGNATURES"),
                   help="refuse revisions whose commit is not signed by an allowed key "
                        "[ORKSYNC_VERIFY_SIGNATURES]")
    p.add_argument("--allowed-signers-file", type=Path,
                   default=env("ORKSYNC_ALLOWED_SIGNERS_FILE"),
                   help="ssh: git's allowed-signers file [ORKSYNC_ALLOWED_SIGNERS_FILE]")
    p.add_argument("--gpg-keyring", type=Path, default=env("ORKSYNC_GPG_KEYRING"),
                   help="gpg: a public keyring file of the allowed keys [ORKSYNC_GPG_KEYRING]")
    n = p.add_argument_group("notifications", "the result of each revision's sync, posted "
                             "in the background (a notification never holds a sync)")
    n.add_argument("--notify-commit-status", choices=("github", "gitlab", "gitea"),
                   default=env("ORKSYNC_NOTIFY_COMMIT_STATUS") or None,
                   help="post a commit status for each revision's sync: pending when it "
                        "starts, success or failure with its message when it ends "
                        "[ORKSYNC_NOTIFY_COMMIT_STATUS]")
    n.add_argument("--notify-api-url", default=env("ORKSYNC_NOTIFY_API_URL", ""),
                   help="the forge's API (GitHub Enterprise https://HOST/api/v3, GitLab "
                        "https://HOST/api/v4, Gitea https://HOST/api/v1); default: from the "
                        "repository URL's host [ORKSYNC_NOTIFY_API_URL]")
    n.add_argument("--notify-repo", default=env("ORKSYNC_NOTIFY_REPO", ""),
                   metavar="OWNER/NAME",
                   help="the repository on the forge (GitLab: group/subgroup/project or the "
                        "project id); default: from the repository URL [ORKSYNC_NOTIFY_REPO]")
    n.add_argument("--notify-token-file", type=Path, default=env("ORKSYNC_NOTIFY_TOKEN_FILE"),
                   help="file holding the API token (a mounted Secret's key; read at each "
                        "post), else the variable ORKSYNC_NOTIFY_TOKEN "
                        "[ORKSYNC_NOTIFY_TOKEN_FILE]")
    n.add_argument("--notify-context", default=env("ORKSYNC_NOTIFY_CONTEXT", ""),
                   help="the commit status's name [ORKSYNC_NOTIFY_CONTEXT, default "
                        "orksync/NAME]")
    n.add_argument("--notify-target-url", default=env("ORKSYNC_NOTIFY_TARGET_URL", ""),
                   help="the link of the commit status, e.g. the web view "
                        "[ORKSYNC_NOTIFY_TARGET_URL]")
    n.add_argument("--notify-webhook-url", default=env("ORKSYNC_NOTIFY_WEBHOOK_URL", ""),
                   help="POST a JSON alert here when a revision's sync ends "
                        "[ORKSYNC_NOTIFY_WEBHOOK_URL]")
    n.add_argument("--notify-webhook-secret-file", type=Path,
                   default=env("ORKSYNC_NOTIFY_WEBHOOK_SECRET_FILE"),
                   help="sign the alert with HMAC-SHA256 of this secret, header "
                        "X-Orksync-Signature-256: sha256=HEX "
                        "[ORKSYNC_NOTIFY_WEBHOOK_SECRET_FILE]")
    n.add_argument("--notify-timeout", type=seconds, default=env("ORKSYNC_NOTIFY_TIMEOUT", "10s"),
                   help="bound of each notification's connect and of each read of its answer "
                        "[ORKSYNC_NOTIFY_TIMEOUT, default 10s]")
    for add in common_flags:
        add(p)



def cmd_agent(args: argparse.Namespace, kube: Kube) -> int:
    """The single-root agent with --repo-url; else the controller of the Sync objects."""
    from orksync.agent.runner import Agent

    if args.repo_url:
        return Agent(agent_config(args), kube).run()
    from orksync.agent.controller import Controller, ControllerConfig

    if args.concurrent_syncs < 1:
        raise UsageError(f"--concurrent-syncs {args.concurrent_syncs} is less than 1")
    base = agent_config(args)
    # --shards N --shard I: a static split of the Syncs (each shard a Lease of its own),
    # instead of the replicas sharing them
    suffix = f"-shard-{args.shard}-of-{args.shards}" if args.shards > 1 else ""
    base = replace(base, shards=1, shard=0, name=args.name,
                   lease_name=f"orksync-{args.name}")
    return Controller(ControllerConfig(
        base=base, lease_name=f"orksync-syncs-{args.name}{suffix}",
        shards=args.shards, shard=args.shard,
        watch_namespace=args.watch_namespace, concurrent_syncs=args.concurrent_syncs,
        allow_file_urls=args.allow_file_urls, generation=args.generation), kube).run()


def agent_config(args: argparse.Namespace) -> AgentConfig:
    """The agent's settings from its parsed flags."""
    from orksync.agent.config import AgentConfig
    from orksync.agent.notify import NotifyConfig
    from orksync.source.git import GitAuth, GitVerify, VerifyMode

    def present(path: Path | None) -> Path | None:
        # the credentials Secret is optional in deploy/: a missing file means "none"
        return path if path is not None and Path(path).exists() else None

    auth = GitAuth(username_file=present(args.git_username_file),
                   password_file=present(args.git_password_file),
                   ssh_key_file=present(args.git_ssh_key_file),
                   known_hosts_file=present(args.git_known_hosts_file))
    identity = {"identity": args.identity} if args.identity else {}
    verify = None
    if args.verify_signatures:
        verify = GitVerify(mode=VerifyMode(args.verify_signatures),
                           allowed_signers_file=args.allowed_signers_file,
                           keyring=args.gpg_keyring)
    if args.repair_workers < 0:
        raise UsageError(f"--repair-workers {args.repair_workers} is negative")
    if not 0 <= args.shard < args.shards:
        raise UsageError(f"--shard {args.shard} is not in 0..{args.shards - 1}")
    suffix = f"-shard-{args.shard}-of-{args.shards}" if args.shards > 1 else ""
    notify = NotifyConfig(commit_status=args.notify_commit_status or "",
                          api_url=args.notify_api_url, repo=args.notify_repo,
                          token_file=args.notify_token_file, context=args.notify_context,
                          target_url=args.notify_target_url,
                          webhook_url=args.notify_webhook_url,
                          webhook_secret_file=args.notify_webhook_secret_file,
                          timeout=args.notify_timeout)
    return AgentConfig(repo_url=args.repo_url or "", ref=args.ref, path=args.path,
                       interval=args.interval, resync_interval=args.resync_interval,
                       rotate_interval=args.rotate_interval,
                       state_dir=args.state_dir, listen=args.listen,
                       leader_elect=not args.no_leader_elect,
                       lease_name=f"orksync-{args.name}{suffix}",
                       lease_namespace=args.lease_namespace,
                       lease_duration=args.lease_duration,
                       renew_deadline=args.renew_deadline, retry_period=args.retry_period,
                       name=f"{args.name}{suffix}",
                       inventory_namespace=args.inventory_namespace, workers=args.workers,
                       auth=auth, shard=args.shard, shards=args.shards, verify=verify,
                       strict_cluster_scope=args.strict_cluster_scope,
                       webhook_secret_file=args.webhook_secret_file,
                       allow_empty=args.allow_empty, prune_crds=args.prune_crds,
                       default_service_account=args.default_service_account,
                       repair_workers=args.repair_workers, ui=args.ui == "true",
                       adopt_inventory=args.adopt_inventory, notify=notify, **identity)
