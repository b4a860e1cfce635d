"""Shared helpers for the benchmarks in bench/: object generation, the control plane,
timing of the two CLIs, API server request counts and the record of each run
(bench/results/<benchmark>.jsonl, bench/record.py).

Every benchmark starts its own ControlPlane (no controller manager), so nothing here
depends on a running cluster. Numbers are reported as ratios measured in one run: the
machine is small and the control plane shares its cores with the clients.
"""

from __future__ import annotations

import compileall
import contextlib
import hashlib
import hmac
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # testbed/, not installed

import record

from orksync.cluster.kube import Kube
from orksync.model import ObjRef, Origin, RenderedObject, RenderedSet, WritePolicy
from orksync.render.entry import STAGE_CHILDREN
from orksync.render.kinds import ORDER
from orksync.rendered.directory import write_rendered
from testbed.controlplane import ControlPlane
from testbed.gitdaemon import GitDaemon, free_port

ROOT = Path(__file__).resolve().parent.parent
MANAGED = {"app.kubernetes.io/managed-by": "orksync"}
EDIT_LABEL = "bench.orksync.io/tier"
KUBECTL_MANAGER = "kubectl-bench"
# kind -> (apiVersion, REST plural, Orkestra order key)
KINDS = {
    "ConfigMap": ("v1", "configmaps", "configMaps"),
    "ServiceAccount": ("v1", "serviceaccounts", "serviceAccounts"),
    "Deployment": ("apps/v1", "deployments", "deployments"),
    "Service": ("v1", "services", "services"),
}


# --- objects -----------------------------------------------------------------------------


def namespaces(prefix: str, count: int = 20) -> list[str]:
    return [f"{prefix}-ns{i:02d}" for i in range(count)]


def _body(kind: str, namespace: str, name: str, i: int) -> dict[str, Any]:
    api_version = KINDS[kind][0]
    labels = {**MANAGED, EDIT_LABEL: "gold", "app": name}
    body: dict[str, Any] = {"apiVersion": api_version, "kind": kind,
                            "metadata": {"name": name, "namespace": namespace, "labels": labels}}
    if kind == "ConfigMap":
        body["data"] = {"key0": f"value-{i}", "key1": "x" * 64, "settings.yaml": "a: 1\nb: 2\n"}
    elif kind == "Service":
        # headless: the local API server's service IP range is too small for 500 Services
        body["spec"] = {"clusterIP": "None", "selector": {"app": name},
                        "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}
    elif kind == "Deployment":
        body["spec"] = {"replicas": 0, "selector": {"matchLabels": {"app": name}},
                        "template": {"metadata": {"labels": {"app": name}}, "spec": {
                            "containers": [{"name": "app", "image": "nginx:1.27",
                                            "ports": [{"containerPort": 8080}]}]}}}
    return body


def make_objects(prefix: str, total: int = 1000, ns_count: int = 20) -> list[RenderedObject]:
    """`total` plain objects (no owner) spread evenly over `ns_count` namespaces, the four
    kinds in rotation, each labelled managed-by orksync."""
    names = namespaces(prefix, ns_count)
    kinds = list(KINDS)
    out = []
    for i in range(total):
        kind = kinds[i % len(kinds)]
        ns = names[i % ns_count]
        body = _body(kind, ns, f"{kind.lower()}-{i:04d}", i)
        out.append(RenderedObject(ref=ObjRef.of(body), body=body, policy=WritePolicy.APPLY,
                                  origin=Origin(file="bench"),
                                  stage=STAGE_CHILDREN + ORDER[KINDS[kind][2]], owner=None))
    return out


def render(objs: Sequence[RenderedObject], out_dir: Path) -> Path:
    """The rendered directory (`orksync apply DIR`); kubectl gets DIR/resources."""
    return write_rendered(RenderedSet(objects=tuple(objs)), out_dir)


# --- a repository of custom resources: Flux's benchmark shape ------------------------------

SITE_GROUP = "bench.orksync.io"
SITE_API = f"{SITE_GROUP}/v1"
SITE_KIND = "Site"
# the four children of every Site, (apiVersion, kind); Deployment scaled to 0
SITE_CHILDREN = (("v1", "ServiceAccount"), ("apps/v1", "Deployment"), ("v1", "Service"),
                 ("networking.k8s.io/v1", "Ingress"))

SITE_KATALOG = """apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {name: bench-sites}
spec:
  crds:
    site:
      crdFile: ./crd.yaml
      operatorBox:
        onCreate:
          serviceAccounts:
            - name: "{{ .metadata.name }}"
          deployments:
            - name: "{{ .metadata.name }}"
              image: "{{ .spec.image }}"
              replicas: "0"
              port: "8080"
              reconcile: true
          services:
            - name: "{{ .metadata.name }}"
              port: "80"
              targetPort: "8080"
              headless: true
              reconcile: true
          ingresses:
            - name: "{{ .metadata.name }}"
              host: "{{ .metadata.name }}.example.com"
              serviceName: "{{ .metadata.name }}"
              servicePort: "80"
              reconcile: true
"""

SITE_CRD = f"""apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: sites.{SITE_GROUP}}}
spec:
  group: {SITE_GROUP}
  scope: Namespaced
  names: {{kind: {SITE_KIND}, plural: sites, singular: site}}
  versions:
    - name: v1
      served: true
      storage: true
      schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}
"""


def write_sites(repo: Path, count: int, *, ns_count: int = 20) -> None:
    """The Katalog, its CRD and `count` Site custom resources over `ns_count` namespaces
    (one file each), in a repository directory."""
    (repo / "sites").mkdir(parents=True, exist_ok=True)
    (repo / "katalog.yaml").write_text(SITE_KATALOG)
    (repo / "crd.yaml").write_text(SITE_CRD)
    for i in range(count):
        (repo / "sites" / f"site-{i:05d}.yaml").write_text(
            f"apiVersion: {SITE_API}\nkind: {SITE_KIND}\nmetadata:\n  name: site-{i:05d}\n"
            f"  namespace: bench-ns{i % ns_count:02d}\nspec:\n  image: nginx:1.{i % 30}\n")


def set_site_image(repo: Path, i: int, image: str) -> None:
    """Site i's spec.image (its Deployment's container image) in the repository."""
    path = repo / "sites" / f"site-{i:05d}.yaml"
    text = path.read_text()
    start = text.index("  image: ")
    path.write_text(text[:start] + f"  image: {image}\n")


# the custom resources of 1 + N small ConfigMaps each, for sizes where Sites (four children
# of four kinds, a Deployment among them) would take too long to create
BUNDLE_KIND = "Bundle"


def write_bundles(repo: Path, count: int, configmaps: int, *, ns_count: int = 20) -> None:
    """A Katalog of one kind, Bundle, whose custom resources have `configmaps` ConfigMaps
    each (server-side applied, one key of 16 bytes), its CRD and `count` Bundles over
    `ns_count` namespaces, one file each."""
    entries = "".join(f'            - name: "{{{{ .metadata.name }}}}-{j:03d}"\n'
                      f'              data: {{key: "{{{{ .spec.value }}}}"}}\n'
                      f"              reconcile: true\n" for j in range(configmaps))
    (repo / "bundles").mkdir(parents=True, exist_ok=True)
    (repo / "katalog.yaml").write_text(
        "apiVersion: orkestra.orkspace.io/v1\nkind: Katalog\nmetadata: {name: bench-bundles}\n"
        "spec:\n  crds:\n    bundle:\n      crdFile: ./crd.yaml\n      operatorBox:\n"
        "        onCreate:\n          configMaps:\n" + entries)
    (repo / "crd.yaml").write_text(SITE_CRD.replace("sites", "bundles").replace(
        f"kind: {SITE_KIND}", f"kind: {BUNDLE_KIND}").replace("site}", "bundle}"))
    for i in range(count):
        (repo / "bundles" / f"bundle-{i:05d}.yaml").write_text(
            f"apiVersion: {SITE_API}\nkind: {BUNDLE_KIND}\nmetadata:\n  name: bundle-{i:05d}\n"
            f"  namespace: bench-ns{i % ns_count:02d}\nspec:\n  value: v{i:014d}\n")


# --- git served on 127.0.0.1 -----------------------------------------------------------------

GIT = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.com"]


def wait_until(what: str, check: Any, timeout: float, interval: float = 0.2) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


@contextlib.contextmanager
def git_daemon(base: Path) -> Iterator[tuple[Path, str]]:
    """An empty repository `base/bench` (branch main) served by `git daemon` on 127.0.0.1:
    (its working directory, its git:// URL)."""
    repo = base / "bench"
    repo.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True)
    with GitDaemon(base) as daemon:
        yield repo, daemon.url("bench")


def commit(repo: Path, message: str) -> None:
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run([*GIT, "commit", "-qm", message, "--allow-empty"], cwd=repo, check=True)


def head(repo: Path) -> str:
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, check=True,
                          capture_output=True, text=True).stdout.strip()


# --- the agent as a process ------------------------------------------------------------------


AGENT_IDENTITY = "bench-agent"


class Agent:
    """`orksync agent` in a process of its own (stderr to a log file), leader election off,
    identity AGENT_IDENTITY (its requests' User-Agent ends in `(agent bench-agent)`).
    `webhook_secret`: serve POST /hooks/git with this secret (written to a file); `extra`:
    more flags (`--resync-interval 10m`: an agent that has the flag)."""

    def __init__(self, env: Env, url: str, state: Path, *, name: str = "bench",
                 interval: float = 2.0, webhook_secret: bytes | None = None,
                 extra: Sequence[str] = ()) -> None:
        self.port = free_port()
        state.mkdir(parents=True, exist_ok=True)
        self.log = state / "agent.log"
        self.webhook_secret = webhook_secret
        argv = [sys.executable, "-m", "orksync", "agent", "--repo-url", url, "--interval",
                f"{interval:g}", "--state-dir", str(state), "--listen", f"127.0.0.1:{self.port}",
                "--kubeconfig", env.kubeconfig, "--name", name, "--no-leader-elect",
                "--identity", AGENT_IDENTITY]
        if webhook_secret is not None:
            secret_file = state.parent / f"{state.name}-webhook-secret"
            secret_file.write_bytes(webhook_secret)
            argv += ["--webhook-secret-file", str(secret_file)]
        argv += extra
        self.argv = argv
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                                     stderr=self.log.open("w"), start_new_session=True)

    @property
    def command(self) -> str:
        """The agent's command line as run, with the temporary paths and port as names."""
        words = ["orksync agent", *self.argv[4:]]
        text = " ".join(re.sub(r"^/tmp/\S+$", "PATH", w) for w in words)
        return re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:PORT", text)

    def metrics(self) -> str:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics",
                                        timeout=5) as resp:
                return str(resp.read().decode())
        except (urllib.error.URLError, OSError):
            return ""

    def metric(self, name: str) -> float:
        """One sample of /metrics by its full name with labels (0 when absent)."""
        m = re.search("^" + re.escape(name) + r" ([0-9.e+]+)$", self.metrics(), re.M)
        return float(m.group(1)) if m else 0.0

    def syncs(self, result: str = "success") -> int:
        return int(self.metric(f'orksync_syncs_total{{result="{result}"}}'))

    def cpu(self) -> float:
        """User + system CPU seconds of the agent process so far."""
        return cpu_seconds(self.proc.pid)

    def wait_synced(self, objects: int, timeout: float) -> None:
        """Until the first successful sync, then until the watched view holds `objects`
        managed objects and the work queue is empty (after a first sync of many objects,
        the view still catching up with the sync's writes can queue custom resources)."""
        wait_until("the agent's first sync", lambda: self.check_alive() or self.syncs() >= 1,
                   timeout, 0.5)
        wait_until(f"the agent's view of {objects:,} objects", lambda: self.check_alive() or
                   self.metric("orksync_view_objects") >= objects, timeout, 0.5)
        wait_until("the agent's work queue to drain", lambda: self.check_alive() or
                   self.metric("orksync_queue_depth") == 0, timeout, 0.5)

    def queue_reconciles(self) -> int:
        """Keys the agent's work queue reconciled so far, whatever their outcome."""
        return sum(int(float(v)) for v in re.findall(
            r'^orksync_queue_reconciles_total\{[^}]*\} ([0-9.e+]+)$', self.metrics(), re.M))

    def wait_idle(self, *, quiet: float = 0.03, window: float = 1.0,
                  timeout: float = 120.0) -> float:
        """Until the agent used less than `quiet` CPU seconds in `window` seconds; its CPU
        seconds then."""
        deadline = time.monotonic() + timeout
        last = self.cpu()
        while True:
            time.sleep(window)
            self.check_alive()
            now = self.cpu()
            if now - last < quiet or time.monotonic() > deadline:
                return now
            last = now

    def post_hook(self, body: bytes = b'{"ref": "refs/heads/main"}') -> int:
        """POST a push hook to /hooks/git signed as GitHub signs it; the HTTP status."""
        assert self.webhook_secret is not None
        signature = hmac.new(self.webhook_secret, body, hashlib.sha256).hexdigest()
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/hooks/git", data=body, method="POST",
            headers={"Content-Type": "application/json", "X-GitHub-Event": "push",
                     "X-Hub-Signature-256": f"sha256={signature}"})
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return int(resp.status)
        except urllib.error.HTTPError as err:
            return int(err.code)

    def memory(self) -> dict[str, float]:
        """VmRSS and VmHWM (the peak) of the agent process, in MiB."""
        return proc_memory(self.proc.pid)

    def summaries(self) -> list[str]:
        """The agent's summary lines, without the timestamp its plain log lines start with."""
        lines = (ln.split(" ", 1)[1] if ln[:4].isdigit() and " " in ln else ln
                 for ln in self.log.read_text().splitlines())
        return [ln for ln in lines if ln.startswith("sync ")]

    def diagnosis(self) -> str:
        """For an error: the agent's own metrics (no histogram buckets) and its log's tail."""
        metrics = [ln for ln in self.metrics().splitlines()
                   if ln.startswith("orksync_") and "_bucket{" not in ln]
        return "\n".join(metrics) + "\n--- agent log ---\n" + self.log.read_text()[-4000:]

    def check_alive(self) -> bool:
        """Raises when the agent exited; False otherwise, so that a wait's condition
        reads `agent.check_alive() or condition`."""
        if self.proc.poll() is not None:
            raise RuntimeError(f"the agent exited {self.proc.returncode}:\n"
                               f"{self.log.read_text()[-3000:]}")
        return False

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, 15)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait(10)


def proc_memory(pid: int) -> dict[str, float]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0]) / 1024
    return out


def count_objects(env: Env, api_version: str, kind: str, *, selector: str | None = None) -> int:
    """Objects of a kind in all namespaces (one paginated LIST)."""
    return sum(1 for _ in env.kube.list(env.kube.resource(api_version, kind),
                                        label_selector=selector))


# --- the cluster -------------------------------------------------------------------------


@dataclass
class Env:
    cp: ControlPlane
    kube: Kube
    work: Path
    audit: Audit | None = None

    @property
    def kubectl(self) -> str:
        return str(self.cp.bin_dir / "kubectl")

    @property
    def kubeconfig(self) -> str:
        return str(self.cp.kubeconfig)


def compile_bytecode() -> None:
    """Compile orksync's modules as an installed wheel has them. This machine sets
    PYTHONDONTWRITEBYTECODE=1, so otherwise every `orksync` process the benchmarks start
    would compile the package from source (about 0.1 s of start-up a user does not pay;
    the dependencies in site-packages are compiled already)."""
    import orksync

    compileall.compile_dir(str(Path(orksync.__file__).parent), quiet=1)


@contextlib.contextmanager
def environment(*, controller_manager: bool = False, audit: bool = False) -> Iterator[Env]:
    """A control plane of its own in a temporary directory; `audit`: with the API server's
    audit log of every request's metadata (Env.audit)."""
    compile_bytecode()
    work = Path(tempfile.mkdtemp(prefix="orksync-bench-"))
    try:
        print("starting control plane ...", file=sys.stderr, flush=True)
        audit_log = work / "audit.log" if audit else None
        with ControlPlane(controller_manager=controller_manager, audit_log=audit_log,
                          audit_policy=AUDIT_METADATA) as cp:
            kube = Kube.from_kubeconfig(cp.kubeconfig, pool_size=32)
            try:
                yield Env(cp=cp, kube=kube, work=work,
                          audit=Audit(audit_log) if audit_log is not None else None)
            finally:
                kube.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def create_namespaces(env: Env, names: Sequence[str]) -> None:
    res = env.kube.resource("v1", "Namespace")
    for name in names:
        env.kube.create(res, {"apiVersion": "v1", "kind": "Namespace",
                              "metadata": {"name": name}}, field_manager="bench")


def clear_namespaces(env: Env, names: Sequence[str]) -> None:
    """Delete every benchmark object in `names` (one deletecollection per kind and namespace;
    there is no namespace controller, so the namespaces themselves stay, empty)."""
    for ns in names:
        for kind, (api_version, _, _) in KINDS.items():
            res = env.kube.resource(api_version, kind)
            env.kube.request("DELETE", res.path(ns), body={
                "apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background"})


def delete_inventory(env: Env, name: str) -> None:
    res = env.kube.resource("v1", "ConfigMap")
    with contextlib.suppress(Exception):
        env.kube.delete(res, "orksync-system", f"orksync-inventory-{name}")


# --- the two clients ---------------------------------------------------------------------


@dataclass
class Timed:
    seconds: float
    output: str
    cpu: float = 0.0  # user + system CPU seconds of the client process


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(argv: Sequence[str], env: Env) -> Timed:
    environ = {**os.environ, "KUBECONFIG": env.kubeconfig}
    cpu = _children_cpu()
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=environ, check=False)
    seconds = time.perf_counter() - start
    cpu = _children_cpu() - cpu
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}:\n"
                           f"{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return Timed(seconds, proc.stdout + proc.stderr, cpu)


def orksync_argv(env: Env, rendered_dir: Path, name: str) -> list[str]:
    return [shutil.which("orksync") or "orksync", "apply", str(rendered_dir),
            "--kubeconfig", env.kubeconfig, "--name", name]


def kubectl_argv(env: Env, rendered_dir: Path) -> list[str]:
    return [env.kubectl, "--kubeconfig", env.kubeconfig, "apply", "--server-side",
            "--force-conflicts", f"--field-manager={KUBECTL_MANAGER}", "-R",
            "-f", str(rendered_dir / "resources")]


STARTUP_IMPORTS = ("import orksync.cli, orksync.sync, orksync.cluster.kube, "
                   "orksync.rendered.directory")


def startup_seconds() -> float:
    """Wall time of a Python process importing what `orksync apply` imports."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", STARTUP_IMPORTS], check=True)
    return time.perf_counter() - start


def run_orksync(env: Env, rendered_dir: Path, name: str) -> Timed:
    return _run(orksync_argv(env, rendered_dir, name), env)


def run_kubectl(env: Env, rendered_dir: Path) -> Timed:
    return _run(kubectl_argv(env, rendered_dir), env)


ORKSYNC_CMD = "orksync apply DIR --kubeconfig K --name NAME"
KUBECTL_CMD = (f"kubectl apply --server-side --force-conflicts "
               f"--field-manager={KUBECTL_MANAGER} -R -f DIR/resources")


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process (clock ticks of /proc/PID/stat, 100 per second)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100


def control_plane_cpu(env: Env) -> float:
    """CPU seconds used so far by etcd and kube-apiserver together."""
    return sum(cpu_seconds(c.popen.pid) for name, c in env.cp._components.items()
               if c.popen is not None and name in ("etcd", "kube-apiserver"))


def summary_line(output: str) -> str:
    lines = [ln for ln in output.splitlines() if " created=" in ln and " unchanged=" in ln]
    return lines[-1].strip() if lines else "<no summary line>"


# --- API server request counts -----------------------------------------------------------

_METRIC = re.compile(r'^apiserver_request_total\{([^}]*)\}\s+([0-9.e+]+)$')
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def server_requests(env: Env) -> dict[tuple[str, str], float]:
    """apiserver_request_total summed by (verb, resource), via `kubectl get --raw /metrics`."""
    text = _run([env.kubectl, "--kubeconfig", env.kubeconfig, "get", "--raw", "/metrics"],
                env).output
    out: dict[tuple[str, str], float] = {}
    for line in text.splitlines():
        m = _METRIC.match(line)
        if m:
            labels = dict(_LABEL.findall(m.group(1)))
            key = (labels.get("verb", ""), labels.get("resource", ""))
            out[key] = out.get(key, 0.0) + float(m.group(2))
    return out


def request_delta(before: dict[tuple[str, str], float],
                  after: dict[tuple[str, str], float]) -> tuple[int, dict[str, int]]:
    """Requests between two scrapes, leaving out the API server's own lease renewals and
    the scrapes themselves (non-resource GETs): (total, by 'VERB resource')."""
    by: dict[str, int] = {}
    for key, value in after.items():
        verb, resource = key
        if resource in ("leases", "") or verb == "WATCH":
            continue
        n = round(value - before.get(key, 0.0))
        if n:
            by[f"{verb} {resource}"] = n
    return sum(by.values()), by


# every request, reads and watches included, with its metadata only (no bodies)
AUDIT_METADATA = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
"""


@dataclass
class AuditCount:
    requests: dict[str, int]  # completed requests other than watches, by 'verb resource'
    watch_opens: dict[str, int]  # watches opened (stage ResponseStarted), by resource
    watch_ends: int  # watches that ended (stage ResponseComplete of a watch)

    @property
    def total(self) -> int:
        return sum(self.requests.values())


class Audit:
    """The API server's audit log (policy AUDIT_METADATA), read from a mark on: the
    requests of one client, told apart by its User-Agent."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def mark(self) -> int:
        """A position: the requests logged after it are counted by `count`."""
        return self.path.stat().st_size if self.path.exists() else 0

    def count(self, since: int, user_agent: str, until: int | None = None) -> AuditCount:
        """The requests logged between two marks whose User-Agent contains `user_agent`."""
        requests: dict[str, int] = {}
        opens: dict[str, int] = {}
        ends = 0
        with self.path.open("rb") as fh:
            fh.seek(since)
            data = fh.read() if until is None else fh.read(until - since)
        for line in data.decode("utf-8", "replace").splitlines():
            if user_agent not in line:
                continue
            event = json.loads(line)
            if user_agent not in event.get("userAgent", ""):
                continue
            ref = event.get("objectRef") or {}
            what = ref.get("resource", "") + (f"/{ref['subresource']}"
                                              if ref.get("subresource") else "")
            what = what or event.get("requestURI", "").split("?")[0]
            if event.get("verb") == "watch":
                if event.get("stage") == "ResponseStarted":
                    opens[what] = opens.get(what, 0) + 1
                elif event.get("stage") == "ResponseComplete":
                    ends += 1
            elif event.get("stage") == "ResponseComplete":
                key = f"{event.get('verb', '').upper()} {what}"
                requests[key] = requests.get(key, 0) + 1
        return AuditCount(requests, opens, ends)


# --- reporting ---------------------------------------------------------------------------


def ratio(a: float, b: float) -> float:
    return a / b if b else float("inf")


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def percentile(values: Sequence[float], p: float) -> float:
    """The nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered) + 0.5) - 1))]


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    def cell(v: Any) -> str:
        return f"{v:.3f}" if isinstance(v, float) else str(v)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def versions(env: Env) -> dict[str, str]:
    def out(argv: Sequence[str]) -> str:
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        return (proc.stdout or proc.stderr).strip().replace("\n", "; ")
    return {
        "orksync version": out([shutil.which("orksync") or "orksync", "version"]),
        "kubectl version": out([env.kubectl, "--kubeconfig", env.kubeconfig, "version"]),
        "nproc": out(["nproc"]),
        "python": sys.version.split()[0],
        "load average (1, 5, 15 min) at the end": " ".join(f"{x:.2f}"
                                                           for x in os.getloadavg()),
    }


def record_run(name: str, env: Env, figures: dict[str, Any],
               peer: dict[str, Any] | None = None, *, table: str = "") -> None:
    """Append this run to bench/results/<name>.jsonl (bench/record.py), with the versions
    of orksync and kubectl measured and, for reading, the table printed."""
    figures = {**figures, "versions": versions(env)}
    if table:
        figures["table"] = table
    record.run(name, figures, peer)
