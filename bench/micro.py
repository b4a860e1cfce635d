"""In-process timings of the pieces the benchmarks are made of, no cluster: 2,000
requests through the HTTP client to a local server, loading a repository, rendering it,
emitting YAML, writing and reading the rendered directory, and 5,000 renders of one
cached short Go template.
Best of N runs each (wall, and user CPU apart), so a busy machine disturbs them less
than the end-to-end benches.

    python bench/micro.py [--crs 1000] [--repeat 5] [--code DIR] [--no-record]

`--code DIR` imports orksync from another checkout (e.g. the commit before a change), so
one command gives the before and after of a change on the same machine:

    mkdir /tmp/before && git archive COMMIT | tar -x -C /tmp/before
    python bench/micro.py --code /tmp/before
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
# answers every request on a kept connection with the same small JSON object; prints its port
_HTTP_SERVER = """
import socket, threading
body = b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}' * 10
answer = (b"HTTP/1.1 200 OK\\r\\nContent-Type: application/json\\r\\n"
          b"Content-Length: %d\\r\\n\\r\\n%s" % (len(body), body))
listener = socket.create_server(("127.0.0.1", 0))
print(listener.getsockname()[1], flush=True)
def serve(conn):
    buf = b""
    while True:
        while b"\\r\\n\\r\\n" not in buf:
            data = conn.recv(65536)
            if not data:
                return
            buf += data
        head, _, buf = buf.partition(b"\\r\\n\\r\\n")
        length = 0
        for line in head.split(b"\\r\\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        while len(buf) < length:
            buf += conn.recv(65536)
        buf = buf[length:]
        conn.sendall(answer)
while True:
    conn, _ = listener.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
"""


def best(repeat: int, fn: Callable[[], Any]) -> tuple[str, str]:
    """(best wall seconds, best user-CPU seconds) over `repeat` runs. User CPU leaves out
    the kernel's file-system work and time lost to other processes, both of which vary a
    lot on a shared machine."""
    walls, users = [], []
    for _ in range(repeat):
        before = os.times()
        start = time.perf_counter()
        try:
            fn()
        except Exception as err:  # an older checkout may fail where this one does not
            return f"fails: {str(err)[:120]}", ""
        walls.append(time.perf_counter() - start)
        users.append(os.times().user - before.user)
    return f"{min(walls):.3f}", f"{min(users):.3f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--crs", type=int, default=1000,
                        help="custom resources of bench/render.py's repository (8 objects each)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--code", type=Path, default=BENCH.parent,
                        help="the orksync checkout to measure (default: this one)")
    parser.add_argument("--no-record", action="store_true",
                        help="do not append to bench/results/micro.jsonl")
    args = parser.parse_args()
    sys.path.insert(0, str(args.code.resolve()))
    # orksync first, from --code; bench/render.py would put this checkout first on the path
    from orksync.katalog.loader import load_repository
    from orksync.render.engine import render_catalog
    from orksync.render.gotemplate import GoTemplateEngine
    from orksync.rendered.directory import read_rendered, write_rendered
    from orksync.yamls.io import dump_yaml

    sys.path.insert(1, str(BENCH))
    from render import make_repo

    import orksync

    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        make_repo(repo, args.crs)
        catalog = load_repository(repo)
        rendered = render_catalog(catalog)
        bodies = [o.body for o in rendered.objects]
        out = write_rendered(rendered, Path(tmp) / "out")  # the directory read back below
        written = iter(range(10**6))

        def write() -> None:  # a new directory each time: no old one to remove
            write_rendered(rendered, Path(tmp) / f"out-{next(written)}")

        from orksync.rendered.directory import object_path

        files = [(object_path(o), dump_yaml(o.body).encode()) for o in rendered.objects]

        def files_only(layout: bool) -> None:  # the bytes ready, only the file system left
            base = Path(tempfile.mkdtemp(dir=tmp))
            made: set[Path] = set()
            for i, (rel, data) in enumerate(files):
                path = base / rel if layout else base / f"{i:06d}.yaml"
                if path.parent not in made:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    made.add(path.parent)
                path.write_bytes(data)

        engine = GoTemplateEngine({})
        short = {"metadata": {"name": "web", "namespace": "prod"}}

        def short_template() -> None:  # the cache warm after the first run
            for _ in range(5000):
                engine.render("{{ .metadata.name }}-svc", short)

        checked = GoTemplateEngine({})
        schema = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
            f"f{i}": {"type": "object", "properties": {"a": {"type": "string"}}}
            for i in range(50)}}}}
        sources = [f"{{{{ .spec.f{i % 50}.a }}}}-{{{{ range .spec.f{i % 50} }}}}{{{{ .x }}}}"
                   f"{{{{ end }}}}{{{{ .metadata.name }}}}-{i}" for i in range(1000)]

        def field_check() -> None:  # orksync.render.fieldcheck, new parse trees each time
            from orksync.render.fieldcheck import template_misses

            for source in sources:
                template_misses(checked, source, schema)

        server = subprocess.Popen([sys.executable, "-c", _HTTP_SERVER],
                                  stdout=subprocess.PIPE, text=True)
        assert server.stdout is not None
        from orksync.cluster.transport import Pool

        pool = Pool(f"http://127.0.0.1:{int(server.stdout.readline())}")
        patch = b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}'
        headers = {"Accept": "application/json", "Authorization": "Bearer t",
                   "Content-Type": "application/apply-patch+yaml"}

        def requests() -> None:  # the client's cost of a request, kept connection
            for _ in range(2000):
                pool.request("PATCH", "/api/v1/namespaces/a/configmaps/x?fieldManager=m",
                             patch, headers, 30)

        rows = [
            ("transport: 2,000 PATCHes to a local HTTP/1.1 server (cluster/transport)",
             best(args.repeat, requests)),
            ("files only: every object's bytes, one directory (the floor's layout)",
             best(args.repeat, lambda: files_only(False))),
            ("files only: every object's bytes, the rendered directory's layout",
             best(args.repeat, lambda: files_only(True))),
            ("load_repository (parse the repository)", best(args.repeat,
                                                           lambda: load_repository(repo))),
            ("render_catalog (templates, builders)", best(args.repeat,
                                                         lambda: render_catalog(catalog))),
            ("dump_yaml of every object", best(args.repeat,
                                               lambda: [dump_yaml(b) for b in bodies])),
            ("write_rendered (files, index, sha256)", best(args.repeat, write)),
            ("read_rendered (verify and parse it back)", best(args.repeat,
                                                             lambda: read_rendered(out))),
            ("a cached short Go template (`{{ .metadata.name }}-svc`), 5,000 renders",
             best(args.repeat, short_template)),
            ("field check: 1,000 templates against a CRD schema (render/fieldcheck)",
             best(args.repeat, field_check)),
        ]
        pool.close()
        server.kill()
        server.wait()
    print(f"orksync from {Path(orksync.__file__).parent.parent}, {args.crs:,} custom resources "
          f"= {len(bodies):,} objects, best of {args.repeat}\n")
    print("| step | wall s | user CPU s |\n|---|---|---|")
    for name, (wall, user) in rows:
        print(f"| {name} | {wall} | {user} |")
    if not args.no_record:
        import record
        record.run("micro", {"code": str(Path(orksync.__file__).parent.parent),
                             "custom_resources": args.crs, "objects": len(bodies),
                             "repeat": args.repeat,
                             "steps": {name: {"best_wall_s": wall, "best_user_cpu_s": user}
                                       for name, (wall, user) in rows}})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
