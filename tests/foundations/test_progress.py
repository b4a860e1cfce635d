"""Progress on a terminal (orksync.runtime.progress): shown on a pseudo-terminal's stderr, never
in logs written to a pipe or a file, never with JSON logs."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from orksync.runtime.progress import ERASE, Progress, progress_enabled
from tests.foundations.ptyrun import run_on_terminal
from tests.helpers import REPO_EXAMPLE


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_shown_only_on_a_terminal_with_plain_logs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ORKSYNC_PROGRESS", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    assert progress_enabled("plain", FakeTerminal())
    assert not progress_enabled("json", FakeTerminal())
    assert not progress_enabled("plain", io.StringIO())
    monkeypatch.setenv("TERM", "dumb")
    assert not progress_enabled("plain", FakeTerminal())
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setenv("ORKSYNC_PROGRESS", "false")
    assert not progress_enabled("plain", FakeTerminal())


def test_log_lines_are_written_above_the_progress_line() -> None:
    terminal = FakeTerminal()
    handler = logging.StreamHandler(terminal)
    handler.setFormatter(logging.Formatter("%(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    ticks = iter(range(1000))
    try:
        progress = Progress(True, terminal, clock=lambda: next(ticks) / 1000)
        progress.phase("apply", 3, "objects")
        progress.advance()
        logging.getLogger("orksync.test").warning("created Deployment/ns/a")
        progress.advance(2)
        progress.finish()
        logging.getLogger("orksync.test").warning("summary")
        progress.close()
        logging.getLogger("orksync.test").warning("after")
    finally:
        root.removeHandler(handler)
    text = terminal.getvalue()
    # the line is erased before the log line and drawn again after it
    assert f"{ERASE}created Deployment/ns/a\n{ERASE}apply 1/3 objects (33%)" in text
    assert text.count("apply 3/3 objects (100%)") == 1  # the end of a phase, drawn once
    # finished: the summary line is not followed by the progress line any more; closed:
    # the handler writes plainly again
    assert text.endswith(f"(100%) 0.0s{ERASE}summary\nafter\n"), text


def test_a_disabled_progress_writes_nothing() -> None:
    stream = io.StringIO()
    progress = Progress(False, stream)
    progress.phase("render", 2)
    progress.advance(2)
    progress.close()
    assert stream.getvalue() == ""


def test_render_on_a_terminal_shows_its_progress_and_plain_output_elsewhere(
        tmp_path: Path) -> None:
    code, _, terminal = run_on_terminal("render", str(REPO_EXAMPLE), "-o", str(tmp_path / "a"))
    assert code == 0, terminal
    assert f"{ERASE}render 2/2 custom resources (100%)" in terminal
    # the summary line erased the progress line and ends the output: nothing is left over
    summary = terminal.rsplit(ERASE, 1)[1]
    assert summary.startswith("render ") and "objects=16 errors=0" in summary
    assert summary.endswith("s\n") and summary.count("\n") == 1

    piped = subprocess.run([sys.executable, "-m", "orksync", "render", str(REPO_EXAMPLE),
                            "-o", str(tmp_path / "b")], capture_output=True, text=True,
                           timeout=120)
    assert piped.returncode == 0, piped.stderr
    assert "\r" not in piped.stderr and "\x1b" not in piped.stderr
    assert "custom resources (" not in piped.stderr

    code, _, terminal = run_on_terminal("--log-format", "json", "render", str(REPO_EXAMPLE),
                                        "-o", str(tmp_path / "c"))
    assert code == 0, terminal
    assert "\r" not in terminal and "\x1b" not in terminal
    lines = [json.loads(line) for line in terminal.splitlines()]  # every line is JSON
    assert lines[-1]["msg"].startswith("render ")
