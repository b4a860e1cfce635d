"""The offline render straight into a rendered directory (`orksync render` without
`--live`), its custom resources rendered and written in parallel processes.

The same directory, byte for byte, as `write_rendered(render_catalog(catalog), out)`; only
the work is laid out differently. After the repository is loaded and its templates
compiled (orksync.render.engine.RenderPlan), the custom resources are shared out in small
consecutive chunks among the jobs, each taking the next chunk when done with the last
(orksync.runtime.forked.fork_chunks_into). A job renders a chunk one custom resource after
another, writes each one's files into the temporary directory at once and keeps only their
index entries, so no job holds more than one custom resource's objects. In this process,
between its own chunks and at the end, a Merger takes the outcomes in the repository's
order, exactly as the serial render does: a custom resource that renders an object an
earlier one owns is an error, and its files, all under its own directory
(`children/<its kind>/<namespace>/<name>/`) and its own `resources/` file, are removed
again once every job is done. Then the index, and the rename into place.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeAlias, cast

from orksync.katalog.model import Catalog, CustomResource
from orksync.model import RenderedObject, RenderedSet, Source
from orksync.render.engine import (
    CrResult,
    CrSummary,
    Extras,
    Outcome,
    RenderPlan,
    crd_object,
    plain_object,
    ref_key,
)
from orksync.render.templates import Clock, utc_now
from orksync.rendered.directory import ObjectWriter, finish_rendered, owned_files, start_rendered
from orksync.runtime.forked import fork_chunks_into
from orksync.runtime.gcpause import gc_paused

__all__ = ["MIN_PER_JOB", "DirectoryRender", "render_to_directory"]

# Fewer custom resources than this per job are rendered in one process: a fork and the
# answer's trip back cost about as much as rendering this many.
MIN_PER_JOB = 64
# Custom resources a process takes at a time (orksync.runtime.forked.fork_chunks)
CHUNK = 16

# (stage, apiVersion, kind, namespace, name): the order of the objects in the index, as
# (stage, ObjRef) orders them; the index entry (UTF-8)
Entry: TypeAlias = tuple[tuple[int, str, str, str, str], bytes]


@dataclass(frozen=True, slots=True)
class DirectoryRender:
    """What was written: the directory, its number of objects, and the render's errors,
    warnings and prune facts (`facts.objects` is empty: they are on disk)."""

    out_dir: Path
    count: int
    facts: RenderedSet


@gc_paused
def render_to_directory(catalog: Catalog, out_dir: Path, *, revision: str = "",
                        strict_cluster_scope: bool = False, strict_fields: bool = False,
                        jobs: int = 1,
                        clock: Clock = utc_now, source: Source | None = None,
                        progress: Callable[[int], None] | None = None
                        ) -> DirectoryRender:
    """Render `catalog` into `out_dir` (replaced atomically) in up to `jobs` processes;
    `source` is recorded in the index (orksync.rendered.directory). `progress`: called, in
    this process, with the number of custom resources merged; `strict_fields`:
    orksync.render.engine.render_catalog."""
    plan = RenderPlan(catalog, clock=clock, strict_cluster_scope=strict_cluster_scope,
                      strict_fields=strict_fields)
    out_dir, tmp = start_rendered(out_dir)
    try:
        jobs = min(jobs, len(catalog.crs) // MIN_PER_JOB) or 1
        writers: dict[int, ObjectWriter] = {}  # one per process: its caches span its chunks

        def render(crs: Sequence[CustomResource]) -> list[Answer]:
            writer = writers.get(os.getpid())
            if writer is None:
                writer = writers[os.getpid()] = ObjectWriter(tmp)
            return _render_slice(plan, writer, crs)

        merged = plan.merger()
        entries = _write(ObjectWriter(tmp), [*(crd_object(m) for m in catalog.crds),
                                             *(plain_object(m) for m in catalog.plain)])
        crs = iter(catalog.crs)
        rejected: list[CustomResource] = []

        def merge(answers: list[Answer]) -> None:
            """The next custom resources' answers, in the repository's order (run between
            this process's own chunks, while the other processes render theirs)."""
            for sent, written in answers:
                cr = next(crs)
                outcome: Outcome | CrSummary
                if isinstance(sent, tuple) and sent[0] == "ok":
                    # the custom resource's own file comes first, then its children's
                    extras = cast("Extras | None", sent[1])
                    outcome = CrSummary.of([key[1:] for key, _ in written[1:]], extras)
                else:
                    outcome = cast(Outcome, sent)
                if merged.accept(cr, outcome):
                    entries.extend(written)
                elif written:  # a conflict: rendered and written, not kept
                    rejected.append(cr)
            if progress is not None:
                progress(len(answers))

        fork_chunks_into(render, catalog.crs, jobs, chunk=CHUNK, take=merge)
        if next(crs, None) is not None:
            raise AssertionError("the render lost custom resources")  # pragma: no cover
        for cr in rejected:  # once no process writes: a directory it empties may be one
            _remove(tmp, *owned_files(cr.ref))  # that a process's writer knows as made
        entries.sort(key=lambda e: e[0])
        facts = merged.rendered_set(())
        finish_rendered(tmp, out_dir, facts, [e[1] for e in entries], revision, source)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return DirectoryRender(out_dir=out_dir, count=len(entries), facts=facts)


# One custom resource's outcome as sent back by a job: rendered (("ok", its CrResult's
# extras)), or not (the Outcome itself); its index entries, its own first.
Answer: TypeAlias = "tuple[tuple[str, Extras | None] | Outcome, list[Entry]]"


def _render_slice(plan: RenderPlan, writer: ObjectWriter, crs: Sequence[CustomResource]
                  ) -> list[Answer]:
    """Render and write each custom resource of the slice. Only plain data goes back (no
    object, no ObjRef of a child: the entries' keys name them)."""
    out: list[Answer] = []
    for cr in crs:
        outcome = plan.outcome(cr)
        if isinstance(outcome, CrResult):
            out.append((("ok", outcome.extras()),
                        _write(writer, [outcome.resource, *outcome.children])))
        else:
            out.append((outcome, []))
    return out


def _write(writer: ObjectWriter, objects: list[RenderedObject]) -> list[Entry]:
    return [((o.stage, *ref_key(o.ref)), writer.write_one(o)) for o in objects]


def _remove(root: Path, own_file: str, children: str) -> None:
    """Remove a custom resource's files (relative to `root`): its own, and the directory
    of its children, which holds nothing else (no other custom resource writes there);
    then the directories they leave empty, up to `root` (exclusive). Only the index
    entries come back from the processes, not the files' names: the custom resource's
    identity names them."""
    os.unlink(root / own_file)
    if os.path.isdir(root / children):  # none when it has no children
        shutil.rmtree(root / children)
    for rel in sorted({own_file.rpartition("/")[0], children.rpartition("/")[0]},
                      key=len, reverse=True):
        parts = rel.split("/")
        while parts:
            try:
                os.rmdir(root.joinpath(*parts))
            except OSError:  # not empty: the directories above it are not either
                break
            parts.pop()
