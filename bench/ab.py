"""A/B of orksync's performance machinery against the plain alternative, in one run.

Each variant replaces one piece of machinery by the plain code it stands for, in the
measured process only (a patch applied before the work starts; the tree is unchanged).
The variants marked (*) patch machinery that the A/B removed: they run only on a checkout
from before its removal (bench/results/ab.jsonl names the commit measured).

render (1,000 custom resources, load + render + write as `orksync render` does it):
  machinery          the code as it is
  serial             jobs=1: no forked workers at all
  processpool        orksync.runtime.forked.fork_chunks_into ->
                     concurrent.futures.ProcessPoolExecutor (fork context) `map` over the
                     same chunks
  no-gcpause         orksync.runtime.gcpause.paused_gc -> contextlib.nullcontext
  plain-index-write (*) rendered.directory._write_parts (writev) -> write_bytes(b"".join(parts))
  plain-file-write   rendered.directory._write_file  (os.open/os.write) -> Path.write_bytes
  no-plain-text (*)  gotemplate's plain-text shortcut off: every template runs compiled
  no-compile-leaves (*) render.resource._compile_leaves (exec-generated) -> the recursive walk
  dataclass-init (*) model.quick_init (exec-generated __init__) -> dataclasses' own
apply (`orksync apply DIR` of 1,000 objects, fresh and no-change resync; kubectl beside):
  machinery, no-gcpause, dataclass-init as above, and
  threadpool-map (*) apply.engine._in_threads (own threads) -> ThreadPoolExecutor.map
  own-transport      cluster.transport (urllib3) -> orksync's own HTTP/1.1 client (socket,
                     ssl, llhttp through httptools, which must be installed), and
                     cluster.proxy, read from commit OWN_TRANSPORT by `git show`

The variants of one benchmark run interleaved, the order rotating each repetition, so a
change in the machine's load falls on all of them. Each render runs in a fresh process
with its output removed afterwards. One line per (benchmark, variant) is appended to
bench/results/ab.jsonl: median, all samples, and the ratio to `machinery`.

    TMPDIR=/dev/shm python bench/ab.py [--only render,fresh,resync] [--runs 5]
        [--sizes 1000] [--variants a,b]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import record  # noqa: E402

RENDER_VARIANTS = ("machinery", "serial", "processpool", "no-gcpause", "plain-index-write",
                   "plain-file-write")
APPLY_VARIANTS = ("machinery", "no-gcpause", "own-transport")
OWN_TRANSPORT = "81432ac"  # the last commit with orksync's own HTTP/1.1 client
REMOVED = ("no-plain-text", "no-compile-leaves", "dataclass-init", "threadpool-map")


# --- the patches (in the measured process) -------------------------------------------------


def _identity_quick_init() -> None:
    """Load orksync.model with quick_init returning the class unchanged, before anything
    imports it: the dataclasses keep the __init__ that dataclasses wrote."""
    spec = importlib.util.find_spec("orksync.model")
    assert spec is not None and spec.loader is not None and spec.origin is not None
    source = Path(spec.origin).read_text(encoding="utf-8")
    head = "def quick_init(cls: type[T]) -> type[T]:\n"
    assert head in source
    source = source.replace(head, head + "    return cls\n", 1)
    module = importlib.util.module_from_spec(spec)
    sys.modules["orksync.model"] = module
    exec(compile(source, spec.origin, "exec"), module.__dict__)


_POOL_FN: Any = None
_POOL_CHUNKS: Any = None


def _pool_call(i: int) -> Any:
    return _POOL_FN(_POOL_CHUNKS[i])


def _pool_chunks_into(fn: Any, items: Any, jobs: int, *, chunk: int, take: Any) -> None:
    """fork_chunks_into's contract with a ProcessPoolExecutor: the workers are forked
    after fn and the chunks are set here, so neither is pickled; results come in order."""
    global _POOL_FN, _POOL_CHUNKS
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    chunks = [items[i:i + chunk] for i in range(0, len(items), chunk)]
    if jobs <= 1 or len(chunks) <= 1:
        for c in chunks:
            take(fn(c))
        return
    _POOL_FN, _POOL_CHUNKS = fn, chunks
    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("fork")) as pool:
        for result in pool.map(_pool_call, range(len(chunks))):
            take(result)


def _own_transport() -> None:
    """Register the own HTTP client of OWN_TRANSPORT as orksync.cluster.transport and
    .proxy, before anything imports them (so urllib3 is never imported)."""
    import types

    import orksync.cluster

    for name in ("proxy", "transport"):
        path = f"orksync/cluster/{name}.py"
        source = subprocess.run(["git", "-C", str(BENCH.parent), "show",
                                 f"{OWN_TRANSPORT}:{path}"], capture_output=True, text=True,
                                check=True).stdout
        module = types.ModuleType(f"orksync.cluster.{name}")
        module.__file__ = path
        sys.modules[module.__name__] = module
        exec(compile(source, f"{OWN_TRANSPORT}:{path}", "exec"), module.__dict__)
        setattr(orksync.cluster, name, module)


def patch(variant: str) -> None:
    if variant == "own-transport":
        _own_transport()
        return
    if variant == "dataclass-init":
        _identity_quick_init()
        return
    if variant == "processpool":
        import orksync.katalog.loader
        import orksync.render.parallel
        orksync.katalog.loader.fork_chunks_into = _pool_chunks_into  # type: ignore[assignment]
        orksync.render.parallel.fork_chunks_into = _pool_chunks_into  # type: ignore
    elif variant == "no-gcpause":
        import orksync.cli.sync
        import orksync.runtime.gcpause
        orksync.runtime.gcpause.paused_gc = contextlib.nullcontext  # type: ignore[assignment]
        orksync.cli.sync.paused_gc = contextlib.nullcontext  # type: ignore[assignment]
    elif variant == "plain-index-write":
        import orksync.rendered.directory as output
        output._write_parts = lambda path, parts: Path(path).write_bytes(b"".join(parts))
    elif variant == "plain-file-write":
        import orksync.rendered.directory as output
        output._write_file = lambda path, data: Path(path).write_bytes(data)
    elif variant == "no-plain-text":
        import orksync.render.gotemplate.engine as gengine
        gengine._plain_parts = lambda root: None  # type: ignore[assignment]
    elif variant == "no-compile-leaves":
        import orksync.render.resource as resource
        resource._compile_leaves = lambda entry, skip: None  # type: ignore[assignment]
    elif variant == "threadpool-map":
        from concurrent.futures import ThreadPoolExecutor

        import orksync.apply.engine as engine

        def in_pool(fn: Any, items: Any, workers: int) -> list[Any]:
            with ThreadPoolExecutor(min(workers, len(items)),
                                    thread_name_prefix="orksync-apply") as pool:
                return list(pool.map(fn, items))
        engine._in_threads = in_pool  # type: ignore[assignment]
    elif variant not in ("machinery", "serial"):
        raise SystemExit(f"unknown variant {variant!r}")


# --- the measured processes ----------------------------------------------------------------


def render_child(variant: str, repo: Path, out: Path) -> dict[str, float]:
    patch(variant)
    from orksync.katalog.loader import load_repository
    from orksync.render.parallel import render_to_directory
    from orksync.runtime.forked import default_jobs

    jobs = 1 if variant == "serial" else default_jobs()
    cpu = os.times()
    start = time.perf_counter()
    catalog = load_repository(repo, jobs=jobs)
    written = render_to_directory(catalog, out, jobs=jobs)
    seconds = time.perf_counter() - start
    end = os.times()
    assert written.facts.ok, written.facts.errors[:3]
    # user + system of this process and of its workers (forked or pooled, all reaped)
    used = sum(end[i] - cpu[i] for i in range(4))
    return {"seconds": seconds, "cpu_seconds": used, "objects": written.count, "jobs": jobs}


def cli_child(variant: str, argv: list[str]) -> None:
    patch(variant)
    from orksync.cli import main

    sys.argv = ["orksync", *argv]
    raise SystemExit(main())


def measure_render(variant: str, repo: Path, work: Path) -> tuple[float, float]:
    out = work / f"out-{variant}-{time.monotonic_ns()}"
    proc = subprocess.run([sys.executable, __file__, "--render-child", variant, str(repo),
                           str(out)], capture_output=True, text=True, check=True)
    shutil.rmtree(out)
    answer = json.loads(proc.stdout.strip().splitlines()[-1])
    return float(answer["seconds"]), float(answer["cpu_seconds"])


def orksync_variant_argv(variant: str, argv: list[str]) -> list[str]:
    return [sys.executable, __file__, "--cli-child", variant, "--", *argv]


# --- the runs -------------------------------------------------------------------------------


def rotated(variants: tuple[str, ...], run: int) -> tuple[str, ...]:
    k = run % len(variants)
    return variants[k:] + variants[:k]


def report(what: str, metric: str, samples: dict[str, list[float]], cmd: str) -> None:
    base = statistics.median(samples["machinery"]) if "machinery" in samples else None
    print(f"\n{what} ({metric}, median of {len(next(iter(samples.values())))}):")
    for variant, values in samples.items():
        med = statistics.median(values)
        rel = med / base if base else None
        print(f"  {variant:18} {med:8.3f}  [{min(values):.3f} .. {max(values):.3f}]"
              + (f"  x{rel:.3f} of machinery" if rel else ""))
        record.append("ab", {"date": record.now(), "commit": record.commit(), "what": what,
                             "variant": variant, "metric": metric, "median": round(med, 4),
                             "samples": [round(v, 4) for v in values],
                             "vs_machinery": round(rel, 4) if rel else None,
                             "machine": record.machine(), "command": cmd})


def run_render(sizes: list[int], runs: int, variants: tuple[str, ...]) -> None:
    from render import make_repo

    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            repo = Path(tmp) / f"repo-{n}"
            make_repo(repo, n)
            samples: dict[str, list[float]] = {v: [] for v in variants}
            cpu: dict[str, list[float]] = {v: [] for v in variants}
            for run in range(runs):
                for variant in rotated(variants, run):
                    seconds, used = measure_render(variant, repo, Path(tmp))
                    samples[variant].append(seconds)
                    cpu[variant].append(used)
                print(f"render {n} run {run + 1}: " + " ".join(
                    f"{v} {samples[v][-1]:.2f}" for v in variants), file=sys.stderr, flush=True)
            what = f"render {n} custom resources (TMPDIR={tempfile.gettempdir()})"
            report(what, "seconds", samples, record.command())
            report(what, "cpu_seconds", cpu, record.command())


def run_apply(kinds: list[str], runs: int, variants: tuple[str, ...], objects: int) -> None:
    import common

    clients = (*variants, "kubectl")
    with common.environment() as env:
        if "fresh" in kinds:
            samples: dict[str, list[float]] = {c: [] for c in clients}
            cpu: dict[str, list[float]] = {c: [] for c in clients}
            for run in range(runs):
                for i, client in enumerate(rotated(clients, run)):
                    prefix = f"ab{run}x{i}"
                    names = common.namespaces(prefix)
                    rendered = common.render(common.make_objects(prefix, objects),
                                             env.work / prefix)
                    common.create_namespaces(env, names)
                    if client == "kubectl":
                        timed = common.run_kubectl(env, rendered)
                    else:
                        timed = common._run(orksync_variant_argv(client, [
                            "apply", str(rendered), "--kubeconfig", env.kubeconfig,
                            "--name", f"bench-{prefix}"]), env)
                    samples[client].append(timed.seconds)
                    cpu[client].append(timed.cpu)
                    common.clear_namespaces(env, names)
                    common.delete_inventory(env, f"bench-{prefix}")
                    shutil.rmtree(rendered, ignore_errors=True)
                print(f"fresh run {run + 1}: " + " ".join(
                    f"{c} {samples[c][-1]:.2f}" for c in clients), file=sys.stderr, flush=True)
            report(f"fresh apply {objects} objects", "seconds", samples, record.command())
            report(f"fresh apply {objects} objects", "client_cpu_seconds", cpu,
                   record.command())
        if "resync" in kinds:
            dirs = {}
            for client, prefix in (("orksync", "abro"), ("kubectl", "abrk")):
                common.create_namespaces(env, common.namespaces(prefix))
                dirs[client] = common.render(common.make_objects(prefix, objects),
                                             env.work / prefix)
            common.run_orksync(env, dirs["orksync"], "bench-abro")
            common.run_kubectl(env, dirs["kubectl"])
            samples = {c: [] for c in clients}
            cpu = {c: [] for c in clients}
            for run in range(runs):
                for client in rotated(clients, run):
                    if client == "kubectl":
                        timed = common.run_kubectl(env, dirs["kubectl"])
                    else:
                        timed = common._run(orksync_variant_argv(client, [
                            "apply", str(dirs["orksync"]), "--kubeconfig", env.kubeconfig,
                            "--name", "bench-abro"]), env)
                        if "unchanged=" not in common.summary_line(timed.output):
                            raise RuntimeError(timed.output[-2000:])
                    samples[client].append(timed.seconds)
                    cpu[client].append(timed.cpu)
                print(f"resync run {run + 1}: " + " ".join(
                    f"{c} {samples[c][-1]:.2f}" for c in clients), file=sys.stderr, flush=True)
            report(f"no-change resync {objects} objects", "seconds", samples,
                   record.command())
            report(f"no-change resync {objects} objects", "client_cpu_seconds", cpu,
                   record.command())


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "--cli-child":
        cli_child(sys.argv[2], sys.argv[4:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="render,fresh,resync")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--sizes", default="1000")
    parser.add_argument("--objects", type=int, default=1000)
    parser.add_argument("--variants", default="")
    parser.add_argument("--render-child", nargs=3, metavar=("VARIANT", "REPO", "OUT"))
    args = parser.parse_args()
    if args.render_child:
        variant, repo, out = args.render_child
        print(json.dumps(render_child(variant, Path(repo), Path(out))))
        return 0
    only = args.only.split(",")
    chosen = tuple(v for v in args.variants.split(",") if v)
    if "render" in only:
        variants = chosen or RENDER_VARIANTS
        run_render([int(s) for s in args.sizes.split(",")], args.runs,
                   tuple(v for v in variants if v in (*RENDER_VARIANTS, *REMOVED[:3])))
    if "fresh" in only or "resync" in only:
        variants = chosen or APPLY_VARIANTS
        run_apply(only, args.runs,
                  tuple(v for v in variants if v in (*APPLY_VARIANTS, *REMOVED[2:])),
                  args.objects)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
