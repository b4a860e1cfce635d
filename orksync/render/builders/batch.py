"""Job and CronJob: Orkestra's builders (semantics §2.4). Pure. Pod shape: builders.pod.

* Job: pod restartPolicy OnFailure, `backoffLimit` default 3, `command`/`args` lists. No
  selector (Kubernetes generates it).
* CronJob: `schedule` required; fix of bug #8 (semantics §7.2): `suspend` (default
  false), `successfulJobsHistoryLimit` (default 3), `failedJobsHistoryLimit` (default 1),
  `concurrencyPolicy` (allow/forbid/replace, any case → Allow/Forbid/Replace, default
  Allow) and `startingDeadlineSeconds` (omitted when empty) are honoured, where the
  studied Orkestra dropped them. An empty value means the default; a value that is not a
  number (or a known policy) is an error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orksync.render.builders import BuildContext, metadata
from orksync.render.builders.common import as_bool, as_int, choice, required
from orksync.render.builders.pod import pod_spec

CONCURRENCY_POLICIES = ("Allow", "Forbid", "Replace")


def _job_spec(entry: Mapping[str, Any], ctx: BuildContext) -> dict[str, Any]:
    return {"template": {"metadata": {"labels": dict(ctx.labels)},
                         "spec": pod_spec(entry, ctx.name, restart_policy="OnFailure")}}


def build_job(entry: Mapping[str, Any], ctx: BuildContext) -> dict[str, Any]:
    spec = {"backoffLimit": as_int(entry.get("backoffLimit"), "backoffLimit", default=3,
                                   minimum=0),
            **_job_spec(entry, ctx)}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata(ctx), "spec": spec}


def build_cron_job(entry: Mapping[str, Any], ctx: BuildContext) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedule": required(entry.get("schedule"), "schedule",
                             " (a cron expression such as \"0 * * * *\")"),
        # Bug #8: these five fields were dropped by the studied Orkestra resolver.
        "suspend": as_bool(entry.get("suspend"), "suspend"),
        "concurrencyPolicy": choice(entry.get("concurrencyPolicy"), "concurrencyPolicy",
                                    CONCURRENCY_POLICIES, "Allow"),
        "successfulJobsHistoryLimit": as_int(entry.get("successfulJobsHistoryLimit"),
                                             "successfulJobsHistoryLimit", default=3,
                                             minimum=0),
        "failedJobsHistoryLimit": as_int(entry.get("failedJobsHistoryLimit"),
                                         "failedJobsHistoryLimit", default=1, minimum=0),
    }
    deadline = as_int(entry.get("startingDeadlineSeconds"), "startingDeadlineSeconds",
                      minimum=0)
    if deadline is not None:
        spec["startingDeadlineSeconds"] = deadline
    spec["jobTemplate"] = {"metadata": {"labels": dict(ctx.labels)},
                           "spec": _job_spec(entry, ctx)}
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": metadata(ctx),
            "spec": spec}
