"""No-change resync of N custom resources with a `tls:` Secret against the same N without
`tls:` (issue 30, item 5), side by side in one run.

Two Katalogs of the same shape, each with its own CRD and sync root: every custom resource
renders a Deployment (replicas 0), a headless Service (the test control plane's Service
range holds few cluster IPs) and a Secret; in the `tls` repository the
Secret is a `tls:` Secret (RSA, the default algorithm: the costly key to validate), which
also brings its CA Secret; in the `plain` repository it holds one static key. Both are
synced once (untimed), then `orksync sync REPO --once` is timed on each, alternating which
goes first, `--runs` times; every timed run must change nothing. The figure is the median
of the per-run ratios tls/plain, wall clock and client CPU.
Issue target: at most 2.

    python bench/tls_resync.py [--crs 200] [--runs 3] [--no-record]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common

TARGET_RATIO = 2.0
GROUP = "bench.orksync.io"

KATALOG = """apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {{name: bench-{key}}}
spec:
  crds:
    {key}:
      crdFile: ./crd.yaml
      operatorBox:
        onCreate:
          deployments:
            - name: "{{{{ .metadata.name }}}}"
              image: nginx
              replicas: "0"
              port: "8080"
              reconcile: true
          services:
            - name: "{{{{ .metadata.name }}}}"
              port: "80"
              targetPort: "8080"
              headless: true
              reconcile: true
          secrets:
            - name: "{{{{ .metadata.name }}}}-cert"
{secret}"""
TLS_SECRET = """              tls:
                commonName: "{{ .metadata.name }}.{{ .metadata.namespace }}.svc"
                dnsNames: ["{{ .metadata.name }}"]
"""
PLAIN_SECRET = """              reconcile: true
              data: {static: value}
"""
CRD = """apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: {plural}.{group}}}
spec:
  group: {group}
  scope: Namespaced
  names: {{kind: {kind}, plural: {plural}, singular: {key}}}
  versions:
    - name: v1
      served: true
      storage: true
      schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}
"""
KINDS = {"tls": "TlsSite", "plain": "PlainSite"}


def write_repo(repo: Path, variant: str, count: int, ns_count: int = 20) -> None:
    kind = KINDS[variant]
    key = kind.lower()
    (repo / "crs").mkdir(parents=True)
    (repo / "katalog.yaml").write_text(KATALOG.format(
        key=key, secret=TLS_SECRET if variant == "tls" else PLAIN_SECRET))
    (repo / "crd.yaml").write_text(CRD.format(plural=key + "s", group=GROUP, kind=kind,
                                              key=key))
    for i in range(count):
        (repo / "crs" / f"{i:05d}.yaml").write_text(
            f"apiVersion: {GROUP}/v1\nkind: {kind}\nmetadata:\n  name: {variant}-{i:05d}\n"
            f"  namespace: bench-ns{i % ns_count:02d}\nspec: {{}}\n")


def sync(env: common.Env, repo: Path, name: str) -> common.Timed:
    # `python -m orksync`: the orksync importable here (PYTHONPATH), not an entry point's
    return common._run([sys.executable, "-m", "orksync", "sync", str(repo), "--once",
                        "--kubeconfig", env.kubeconfig, "--name", name], env)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--crs", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-record", action="store_true",
                        help="do not append to bench/results/tls_resync.jsonl")
    args = parser.parse_args()

    with common.environment() as env:
        common.create_namespaces(env, [f"bench-ns{i:02d}" for i in range(20)])
        repos = {}
        for variant in ("tls", "plain"):
            repos[variant] = env.work / variant
            write_repo(repos[variant], variant, args.crs)
            first = sync(env, repos[variant], f"bench-{variant}")
            print(f"first sync {variant}: {first.seconds:.2f}s "
                  f"{common.summary_line(first.output)}", file=sys.stderr)

        rows, wall, cpu = [], [], []
        for run in range(1, args.runs + 1):
            order = ("tls", "plain") if run % 2 else ("plain", "tls")
            timed: dict[str, common.Timed] = {}
            for variant in order:
                timed[variant] = sync(env, repos[variant], f"bench-{variant}")
                line = common.summary_line(timed[variant].output)
                if " configured=0 " not in line or " created=0 " not in line \
                        or " deleted=0 " not in line:
                    raise RuntimeError(f"the {variant} resync was not a no-op: {line}")
                print(f"run {run} {variant} {timed[variant].seconds:.2f}s "
                      f"cpu={timed[variant].cpu:.2f}s {line}", file=sys.stderr)
            t, p = timed["tls"], timed["plain"]
            wall.append(common.ratio(t.seconds, p.seconds))
            cpu.append(common.ratio(t.cpu, p.cpu))
            rows.append((run, " then ".join(order), t.seconds, p.seconds, wall[-1],
                         t.cpu, p.cpu, cpu[-1]))

        med, med_cpu = common.median(wall), common.median(cpu)
        verdict = "met" if med <= TARGET_RATIO else f"MISSED ({med / TARGET_RATIO:.1f}x)"
        text = common.table(("run", "order", "tls s", "plain s", "tls/plain", "tls cpu s",
                             "plain cpu s", "cpu tls/plain"), rows)
        text += (f"\n\nmedian ratio tls/plain: **{med:.2f}** wall, {med_cpu:.2f} client CPU "
                 f"(target <= {TARGET_RATIO}: {verdict}). {args.crs} custom resources of "
                 f"each over 20 namespaces, each with a Deployment, a Service and a "
                 f"Secret (tls: a `tls:` Secret, its CA Secret beside it). "
                 f"Command: `orksync sync REPO --once --kubeconfig K --name NAME`.")
        print(text)
        if not args.no_record:
            common.record_run("tls_resync", env, {
                "crs": args.crs, "runs": args.runs, "tls_s": [r[2] for r in rows],
                "tls_cpu_s": [r[5] for r in rows], "median_ratio": med,
                "median_cpu_ratio": med_cpu, "target_ratio": TARGET_RATIO},
                {"plain_s": [r[3] for r in rows], "plain_cpu_s": [r[6] for r in rows]},
                table=text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
