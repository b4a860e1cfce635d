"""Progress of a long command (render, apply, sync) on a terminal: one line on stderr,
redrawn in place (`\\r`, erase line), under the log lines.

Shown only when stderr is a terminal, the log format is plain, `TERM` is not `dumb` and
`ORKSYNC_PROGRESS` is not `false`; otherwise every method does nothing, so logs, JSON
lines and output to a file or a pipe stay exactly as they were. While it is shown, each
log record first erases the progress line, is written, and the line is drawn again
below it (the handlers of the root logger that write to stderr are wrapped for as long
as the progress runs). Redrawn at most every `MIN_INTERVAL` seconds, and always at the
start and the end of a phase, so the last count of each phase is always seen.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, Any, TypeVar

__all__ = ["Progress", "current", "progress_enabled", "progress_for"]

MIN_INTERVAL = 0.1
ERASE = "\r\x1b[K"
T = TypeVar("T")


def progress_enabled(log_format: str, stream: IO[str] | None = None) -> bool:
    stream = stream if stream is not None else sys.stderr
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        return False
    return (tty and log_format == "plain" and os.environ.get("TERM") != "dumb"
            and os.environ.get("ORKSYNC_PROGRESS", "").lower() != "false")


class Progress:
    """`phase(name, total, unit)` starts a counted phase (`total` 0: a phase without a
    count), `advance(n)` counts, `finish()` erases the line when the work is over,
    `close()` also unwraps the handlers."""

    def __init__(self, enabled: bool, stream: IO[str] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        self.clock = clock
        self._lock = threading.RLock()
        self._name = ""
        self._unit = ""
        self._total = 0
        self._done = 0
        self._started = 0.0
        self._drawn_at = -MIN_INTERVAL
        self._drawn: tuple[str, int] = ("", -1)  # the phase and count last drawn
        self._shown = False
        self._wrapped: list[tuple[logging.Handler, Any]] = []
        if enabled:
            self._wrap_handlers()

    # --- the line --------------------------------------------------------------------

    def phase(self, name: str, total: int = 0, unit: str = "") -> None:
        if not self.enabled:
            return
        with self._lock:
            if self._name and self._drawn != (self._name, self._done):
                self._draw(force=True)  # the last count of the phase before
            self._name, self._total, self._unit, self._done = name, total, unit, 0
            self._started = self.clock()
            self._draw(force=True)

    def advance(self, count: int = 1) -> None:
        if not self.enabled:
            return
        with self._lock:
            self._done += count
            self._draw(force=self._total > 0 and self._done == self._total)

    def counting(self, fn: Callable[[T], None]) -> Callable[[T], None]:
        """`fn`, counting one per call (an apply's `on_change`)."""
        if not self.enabled:
            return fn

        def counted(item: T) -> None:
            fn(item)
            self.advance()
        return counted

    def text(self) -> str:
        elapsed = self.clock() - self._started
        if self._total:
            done = min(self._done, self._total)
            return (f"{self._name} {done}/{self._total} {self._unit} "
                    f"({100 * done // self._total}%) {elapsed:.1f}s").replace("  ", " ")
        return f"{self._name}… {elapsed:.1f}s"

    def _draw(self, *, force: bool = False) -> None:
        now = self.clock()
        if not self._name or (not force and now - self._drawn_at < MIN_INTERVAL):
            return
        width = shutil.get_terminal_size((80, 24)).columns
        self._write(ERASE + self.text()[:max(width - 1, 10)])
        self._drawn_at = now
        self._drawn = (self._name, self._done)
        self._shown = True

    def _erase(self) -> None:
        if self._shown:
            self._write(ERASE)
            self._shown = False

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):
            self.enabled = False  # the terminal went away: stay silent

    def finish(self) -> None:
        """Erase the line: the work it counted is over (the summary line comes next; a
        later `phase` shows it again)."""
        if not self.enabled:
            return
        with self._lock:
            if self._name and self._drawn != (self._name, self._done):
                self._draw(force=True)  # the phase's last count
            self._erase()
            self._name = ""

    def close(self) -> None:
        if not self.enabled:
            return
        with self._lock:
            self._erase()
            for handler, emit in self._wrapped:
                handler.emit = emit  # type: ignore[method-assign]
            self._wrapped.clear()
            self._name = ""

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- log lines above the progress line -------------------------------------------

    def _wrap_handlers(self) -> None:
        for handler in logging.getLogger().handlers:
            if getattr(handler, "stream", None) is not self.stream:
                continue
            emit = handler.emit

            def wrapped(record: logging.LogRecord, emit: Any = emit) -> None:
                with self._lock:
                    self._erase()
                    emit(record)
                    self._draw(force=True)
            self._wrapped.append((handler, emit))
            handler.emit = wrapped  # type: ignore[method-assign]


_current = Progress(False)


def current() -> Progress:
    """The progress of this command (a disabled one outside `progress_for`): the stages
    of a command report to it without it being passed down."""
    return _current


@contextmanager
def progress_for(log_format: str, *, wanted: bool = True) -> Iterator[Progress]:
    """The progress of one command on this process's stderr (shown when `wanted` and
    `progress_enabled`), `current()` while it runs, closed at the end."""
    global _current
    progress = Progress(wanted and progress_enabled(log_format))
    _current = progress
    try:
        yield progress
    finally:
        progress.close()
        _current = Progress(False)
