"""Soak: many sync cycles of the agent, in-process, with a random repository change
pushed before each, against the real control plane and a real git daemon. Memory,
threads and open file descriptors stay flat; the final state is exactly the final
repository; no once-Secret is ever regenerated.

`ORKSYNC_SOAK_CYCLES` sets the number of cycles (default 40, about half a minute here;
docs/reliability.md records a long run), `ORKSYNC_SOAK_SEED` the random changes.
"""

from __future__ import annotations

import os
import random
import statistics
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from orksync.cluster.kube import Kube
from orksync.model import ObjRef
from orksync.sync import read_inventory
from testbed.controlplane import ControlPlane
from testbed.gitdaemon import GitDaemon
from tests.source.test_git_source import Upstream
from tests.sync.test_faults_cluster import (
    Keepsake,
    World,
    agent_for,
    git_served,
    live,
    publish,
    ref,
    scratch_namespace,
)

pytestmark = pytest.mark.cluster

CYCLES = int(os.environ.get("ORKSYNC_SOAK_CYCLES", "40"))
SEED = int(os.environ.get("ORKSYNC_SOAK_SEED", "8"))
MAX_WIDGETS = 6
# Bounds on growth from the first half of the run (after warm-up) to the second half.
RSS_SLACK_KB = 4 * 1024
FD_SLACK = 2


@dataclass(frozen=True)
class Sample:
    rss_kb: int
    threads: int
    fds: int


def sample() -> Sample:
    """This process's resident memory, thread count and open descriptors (/proc). The
    descriptors are the fewest of five readings 50 ms apart: a background thread's
    transient ones (a connection or a pipe being closed while /proc is read) are not a
    leak, and a leaked one is in every reading."""
    status = dict(line.split(":", 1) for line in
                  Path("/proc/self/status").read_text().splitlines() if ":" in line)
    fds = []
    for _ in range(5):
        fds.append(len(os.listdir("/proc/self/fd")))
        time.sleep(0.05)
    return Sample(rss_kb=int(status["VmRSS"].split()[0]), threads=int(status["Threads"]),
                  fds=min(fds))


class Changes:
    """Random repository changes: add or remove a widget, edit an image, toggle a flag.
    New widgets get new names (a removed widget's children go to the garbage collector
    in its own time; a reused name would race it)."""

    def __init__(self, w: World, seed: int) -> None:
        self.w = w
        self.rng = random.Random(seed)
        self.counter = 0
        self.log: list[str] = []

    def add(self) -> None:
        self.counter += 1
        name = f"w{self.counter}"
        self.w.put(name, image=f"nginx:{self.rng.randint(1, 5)}",
                   flag=self.rng.choice(["on", "off"]))
        self.log.append(f"add {name}")

    def apply_one(self) -> None:
        names = sorted(self.w.widgets)
        choice = self.rng.choices(["add", "remove", "edit", "toggle"], [2, 2, 4, 3])[0]
        if (choice == "add" and len(names) < MAX_WIDGETS) or len(names) <= 1:
            self.add()
            return
        name = self.rng.choice(names)
        spec = self.w.widgets[name]
        if choice in ("add", "remove"):
            self.w.remove(name)
        elif choice == "edit":
            self.w.put(name, image=f"nginx:{self.rng.randint(1, 5)}", flag=spec["flag"])
        else:
            self.w.put(name, image=spec["image"], flag="off" if spec["flag"] == "on" else "on")
        self.log.append(f"{'remove' if choice == 'add' else choice} {name}")


def test_hundreds_of_agent_cycles_keep_memory_threads_and_descriptors_flat(
        control_plane: ControlPlane, tmp_path: Path) -> None:
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    with scratch_namespace(kube) as ns, git_served(tmp_path) as (upstream, daemon):
        soak(kube, ns, upstream, daemon, tmp_path)
    kube.close()


def soak(kube: Kube, ns: str, upstream: Upstream, daemon: GitDaemon, tmp_path: Path) -> None:
    w = World(tmp_path / "mirror", ns)
    changes = Changes(w, SEED)
    for _ in range(3):
        changes.add()
    publish(upstream, w, "start")
    agent = agent_for(kube, daemon, w, tmp_path / "state")
    kept: dict[ObjRef, Keepsake] = {}
    samples: list[Sample] = []
    start = time.monotonic()
    for cycle in range(CYCLES):
        changes.apply_one()
        publish(upstream, w, f"cycle {cycle}: {changes.log[-1]}")
        assert agent.sync(), f"cycle {cycle} ({changes.log[-1]}): {agent.state.last_error}"
        for r, now in w.keepsakes(kube).items():
            assert kept.setdefault(r, now) == now, f"cycle {cycle}: {r} was regenerated"
        samples.append(sample())
    elapsed = time.monotonic() - start

    # the final state is the final repository, exactly
    _, rendered = w.render()
    assert read_inventory(kube, w.name).refs() == {o.ref for o in rendered.objects}
    assert w.live_children(kube) == {o.ref for o in rendered.objects if o.owner}
    widgets = kube.list(kube.resource("test.orksync.io/v1", "Widget"), namespace=ns)
    assert sorted(o["metadata"]["name"] for o in widgets) == sorted(w.widgets)
    for name, spec in w.widgets.items():
        deploy = live(kube, ref("Deployment", ns, name))
        assert deploy is not None
        assert deploy["spec"]["template"]["spec"]["containers"][0]["image"] == spec["image"]
        flagged = live(kube, ref("ConfigMap", ns, f"{name}-flagged"))
        assert (flagged is not None) == (spec["flag"] == "on"), name
    w.assert_converged(kube, kept)

    # flat: the second half grows no more than the slack over the first (after warm-up)
    warm = max(CYCLES // 5, 3)
    first, second = samples[warm:(warm + CYCLES) // 2], samples[(warm + CYCLES) // 2:]
    rss = [s.rss_kb for s in samples]
    report = (f"{CYCLES} cycles in {elapsed:.0f}s; rss {rss[0]}->{rss[-1]} kB (min {min(rss)},"
              f" max {max(rss)}; median first half {median(first, 'rss_kb')}, second half "
              f"{median(second, 'rss_kb')}); threads {samples[0].threads}->"
              f"{samples[-1].threads} (max {max(s.threads for s in samples)}); fds "
              f"{samples[0].fds}->{samples[-1].fds} (max {max(s.fds for s in samples)}); "
              f"changes: {dict(Counter(c.split()[0] for c in changes.log))}")
    print(report)
    # threads: a transient one (a git output pump, a pool worker ending) may be sampled at
    # any cycle; a leak grows from cycle to cycle, which the median and the end show
    assert median(second, "threads") <= median(first, "threads"), report
    assert samples[-1].threads <= max(s.threads for s in first), report
    assert max(s.fds for s in second) <= max(s.fds for s in first) + FD_SLACK, report
    assert median(second, "rss_kb") - median(first, "rss_kb") <= RSS_SLACK_KB, report


def median(samples: list[Sample], field: str) -> int:
    return int(statistics.median(getattr(s, field) for s in samples))
