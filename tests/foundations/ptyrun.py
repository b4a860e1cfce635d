"""Run `python -m orksync ...` with its stderr on a pseudo-terminal, as on a user's
terminal (the progress display of orksync.runtime.progress is shown only there)."""

from __future__ import annotations

import os
import pty
import subprocess
import sys


def run_on_terminal(*args: str, timeout: float = 120) -> tuple[int, str, str]:
    """(exit code, stdout, what the terminal received on stderr)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "orksync", *args],
                            stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    chunks: list[bytes] = []
    try:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the process closed its end
                break
            if not data:
                break
            chunks.append(data)
        out = proc.stdout.read().decode() if proc.stdout else ""
        code = proc.wait(timeout=timeout)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return code, out, b"".join(chunks).decode().replace("\r\n", "\n")
