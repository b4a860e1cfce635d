"""Running independent parts of a batch stage in forked processes (the offline render).

`fork_map(fn, parts)` returns `[fn(part) for part in parts]`: the first part runs in this
process, each other part in a child forked for it, whose result (or exception) comes back
pickled through a pipe. The children start from this process's memory (copy on write), so
`fn` may use anything already built here (the loaded repository, compiled templates)
without sending it, and only small results should travel back. `fork_chunks` builds on it:
the items in small chunks that this process and the children take one after another as
each finishes its last, the results put back in the items' order. A child of fork_chunks
writes each chunk's results to its own unlinked temporary file as it goes (a pipe would
hold them until this process, done with its own chunks, read them).

Forking is used only where it is safe and can pay: on a system with `fork`, in a process
with one thread (a fork copies no other thread, and a lock another thread held stays held
in the child: the agent, with its scheduler and connection pools, never forks), and with
more than one part. Otherwise, and for any part whose child died without an answer, the
parts run here, one after another: the same results, only slower. A child leaves with
`os._exit`: it flushes no buffer of its parent, runs no `atexit` handler and frees nothing.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import signal
import struct
import sys
import tempfile
import threading
from collections.abc import Callable, Sequence
from typing import IO, TypeVar, cast

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")

MAX_JOBS = 8


def default_jobs(cpu_max: str = "/sys/fs/cgroup/cpu.max") -> int:
    """The CPUs this process may run on, at most MAX_JOBS, and at most its cgroup's CPU
    quota rounded up (a container limited to 1.5 CPUs on a 16-core node: 2)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    try:
        with open(cpu_max, encoding="ascii") as fh:
            quota, period = fh.read().split()[:2]
        if quota != "max":
            cpus = min(cpus, -(-int(quota) // int(period)))
    except (OSError, ValueError):  # no cgroup v2 limit to read
        pass
    return max(1, min(cpus, MAX_JOBS))


def can_fork() -> bool:
    return hasattr(os, "fork") and threading.active_count() == 1


def fork_chunks(fn: Callable[[Sequence[T]], list[R]], items: Sequence[T], jobs: int, *,
                chunk: int) -> list[R]:
    """`fn(items)`, computed as `fn` of consecutive chunks of about `chunk` items, with the
    results concatenated in the items' order (`fork_chunks_into`)."""
    out: list[R] = []
    fork_chunks_into(fn, items, jobs, chunk=chunk, take=out.extend)
    return out


def fork_chunks_into(fn: Callable[[Sequence[T]], list[R]], items: Sequence[T], jobs: int, *,
                     chunk: int, take: Callable[[list[R]], object]) -> None:
    """`take(fn(c))` for consecutive chunks `c` of about `chunk` items, in the items'
    order, always in this process. With `jobs` > 1 the chunks are shared out as the work
    goes: this process and `jobs - 1` forked children each take the next chunk when done
    with the last (a pipe holds the chunk numbers; a read of one record is atomic), so a
    process that meets heavier items, or runs slower, or spends time in `take`, takes
    fewer. `take` runs as soon as a chunk and all before it are done: between this
    process's own chunks, on the children's results found so far in their spools, and at
    the end; so what it does runs while the children work (they take the chunks this
    process does not). A chunk a child took but did not answer for is done here."""
    chunk = max(chunk, -(-len(items) // MAX_CHUNKS))
    chunks = [items[i:i + chunk] for i in range(0, len(items), chunk)]
    if jobs <= 1 or len(chunks) <= 1 or not can_fork():
        for c in chunks:
            take(fn(c))
        return
    workers = min(jobs, len(chunks))
    spools = [_Spool(f) for f in _spools(workers - 1)]
    read_fd, write_fd = os.pipe()
    try:
        os.write(write_fd, b"".join(_RECORD.pack(i) for i in range(len(chunks))))
    finally:
        os.close(write_fd)
    ready: dict[int, list[R]] = {}
    taken = 0  # the chunks handed to `take`

    def take_ready() -> None:
        nonlocal taken
        while taken in ready:
            take(ready.pop(taken))
            taken += 1

    def work(worker: int) -> dict[int, list[R]]:
        done: dict[int, list[R]] = {}
        spool = spools[worker - 1] if worker and spools else None
        while record := os.read(read_fd, _RECORD.size):
            (i,) = _RECORD.unpack(record)
            if spool is not None:  # written as it goes, not pickled and piped at the end
                spool.write(i, fn(chunks[i]))
            elif worker:
                done[i] = fn(chunks[i])
            else:  # this process: its chunk, and what the children have written so far
                ready[i] = fn(chunks[i])
                for own in spools:
                    ready.update(own.read())
                take_ready()
        return done

    try:
        for answer in fork_map(work, range(workers)):
            ready.update(answer)
        for spool in spools:
            ready.update(spool.read())
    finally:
        os.close(read_fd)
        for spool in spools:
            spool.close()
    missing = [i for i in range(taken, len(chunks)) if i not in ready]
    if missing:
        log.warning("%d chunk(s) taken by a forked worker that ended without a result were "
                    "redone in the main process", len(missing))
        ready.update((i, fn(chunks[i])) for i in missing)
    take_ready()


def _spools(count: int) -> list[IO[bytes]]:
    """An unlinked temporary file per child, for its chunks' results: a child that sent
    them through its pipe would pickle them all at its end and then wait for this process
    to read, both after this process had finished its own chunks, so the whole transfer
    would add to the render's time instead of overlapping it. None (the pipe, then)
    where no temporary file can be made."""
    try:
        return [tempfile.TemporaryFile() for _ in range(count)]
    except OSError:
        return []


class _Spool:
    """A child's results, as records (length, pickled (chunk, results)) that the child
    appends and this process reads from where it stopped, while the child still writes:
    a record whose bytes are not all there yet is read the next time. A record cut short
    because the child died while writing it is never whole, and its chunk is redone, as
    is a record that does not unpickle here. Positioned reads and writes only: the file
    offset the two processes share is never used."""

    def __init__(self, file: IO[bytes]) -> None:
        self.file = file
        self.fd = file.fileno()
        self.end = 0  # the child's: where its next record goes
        self.offset = 0  # this process's: where the next record starts

    def write(self, i: int, result: object) -> None:
        data = pickle.dumps((i, result), protocol=pickle.HIGHEST_PROTOCOL)
        view = memoryview(_LENGTH.pack(len(data)) + data)
        while view:
            written = os.pwrite(self.fd, view, self.end)
            self.end += written
            view = view[written:]

    def read(self) -> dict[int, list[R]]:
        """The whole records written since the last read."""
        out: dict[int, list[R]] = {}
        while True:
            head = os.pread(self.fd, _LENGTH.size, self.offset)
            if len(head) < _LENGTH.size:
                return out
            (size,) = _LENGTH.unpack(head)
            data = os.pread(self.fd, size, self.offset + _LENGTH.size)
            if len(data) < size:
                return out
            self.offset += _LENGTH.size + size
            try:
                i, result = pickle.loads(data)
            except Exception:  # whatever it raised: the record's chunk is redone here
                continue
            out[i] = result

    def close(self) -> None:
        self.file.close()


_LENGTH = struct.Struct("=Q")


_RECORD = struct.Struct("=I")
MAX_CHUNKS = 8192  # the chunk numbers fit in a pipe's buffer (64 KiB) before any is read


def fork_map(fn: Callable[[T], R], parts: Sequence[T]) -> list[R]:
    """`[fn(part) for part in parts]`, the parts after the first in forked children when
    `can_fork()`. An exception of `fn` in a child is raised here, as it would have been
    raised had the part run here."""
    if len(parts) <= 1 or not can_fork():
        return [fn(part) for part in parts]
    children: list[tuple[int, int]] = []
    try:
        for part in parts[1:]:
            children.append(_start(fn, part))
        first = fn(parts[0])
    except BaseException:
        _stop(children)  # none is left running, or waiting to be reaped
        raise
    answers = [_collect(pid, fd) for pid, fd in children]
    error = next((a[1] for a in answers if a is not None and a[0] == "error"), None)
    if error is not None:
        raise cast(Exception, error)
    results = [first]
    for answer, part in zip(answers, parts[1:], strict=True):
        # a child that died without answering: its part is done here
        results.append(fn(part) if answer is None else cast(R, answer[1]))
    lost = answers.count(None)
    if lost:
        log.warning("%d of %d forked workers ended without a result; their parts were "
                    "redone in the main process", lost, len(parts) - 1)
    return results


def _stop(children: list[tuple[int, int]]) -> None:
    for pid, fd in children:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
        os.close(fd)
        os.waitpid(pid, 0)


def _start(fn: Callable[[T], R], part: T) -> tuple[int, int]:
    read_fd, write_fd = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: never returns into the caller's code
        status = 1
        try:
            os.close(read_fd)
            try:
                answer: tuple[str, object] = ("ok", fn(part))
            except Exception as err:  # sent to the parent, raised there
                answer = ("error", err)
            try:
                data = pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception as err:  # an exception that does not pickle
                data = pickle.dumps(("error", RuntimeError(
                    f"a forked worker failed: {type(err).__name__}: {err}")))
            with os.fdopen(write_fd, "wb") as pipe:
                pipe.write(data)
            status = 0
        finally:
            os._exit(status)
    os.close(write_fd)
    return pid, read_fd


def _collect(pid: int, fd: int) -> tuple[str, object] | None:
    with os.fdopen(fd, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    if status != 0 or not data:
        return None
    answer = pickle.loads(data)
    return answer if isinstance(answer, tuple) else None
