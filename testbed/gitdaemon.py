"""`git daemon` on 127.0.0.1: a real git:// remote for the tests and the benchmarks
(git behaviour is tested against real repositories served locally, never a fake)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

__all__ = ["GitDaemon", "free_port", "wait_for_port"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listened on a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, timeout: float = 5.0) -> None:
    """Until something accepts connections on 127.0.0.1:`port`; TimeoutError after
    `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.02)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port}")


class GitDaemon:
    """`git daemon` on 127.0.0.1 exporting every repository under `root`, in its own
    process group (stopped with everything it forked)."""

    def __init__(self, root: Path, *, env: Mapping[str, str] | None = None) -> None:
        self.root = root
        self.env = dict(env) if env is not None else None
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def url(self, name: str = "repo.git") -> str:
        return f"git://127.0.0.1:{self.port}/{name}"

    def start(self, timeout: float = 20.0) -> None:
        self.proc = subprocess.Popen(
            ["git", "daemon", f"--base-path={self.root}", "--export-all", "--reuseaddr",
             "--listen=127.0.0.1", f"--port={self.port}"],
            env=self.env, start_new_session=True,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_port(self.port, timeout)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=10)
        self.proc = None

    def __enter__(self) -> GitDaemon:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
