"""The bad-input corpus (files beside this module) and what the bad-input, fuzz and
sandbox tests share: the example budget of a fuzz run and a hang guard per call.

`ORKSYNC_FUZZ_EXAMPLES=N` sets the examples of every fuzz test (a long campaign); the
defaults keep the fuzz tests of a CI run under about 40 seconds in total.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

from hypothesis import HealthCheck, settings

CORPUS = Path(__file__).resolve().parent
FUZZ_ENV = "ORKSYNC_FUZZ_EXAMPLES"
# A call still running after this long is taken as hung (`bounded`). Not a speed bound:
# the work of a render is bounded in steps and bytes, which the tests check; this only
# stops a test that would otherwise never end.
HANG = 120.0


def fuzz_settings(default_examples: int) -> settings:
    """Hypothesis settings of a fuzz test: `default_examples` unless ORKSYNC_FUZZ_EXAMPLES
    says otherwise. No deadline (a slow shared machine must not flake); `bounded` catches
    hangs instead."""
    examples = int(os.environ.get(FUZZ_ENV) or default_examples)
    return settings(max_examples=examples, deadline=None, derandomize=FUZZ_ENV not in os.environ,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much],
                    database=None)


class Hang(BaseException):
    """Raised in the test's thread when a bounded call runs past its time. Not an
    Exception, so that the code under test cannot catch and convert it."""


@contextlib.contextmanager
def bounded(seconds: float) -> Iterator[None]:
    """Fail with Hang when the block runs longer than `seconds` (wall clock), even when it
    would never return. Main thread only (SIGALRM); elsewhere the block is timed after."""
    if threading.current_thread() is not threading.main_thread():
        start = time.monotonic()
        yield
        if time.monotonic() - start > seconds:
            raise Hang(f"took {time.monotonic() - start:.1f}s, bound {seconds}s")
        return

    def alarm(signum: int, frame: FrameType | None) -> None:
        raise Hang(f"still running after {seconds}s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# What a message shows when Python internals leak: class and function reprs, signatures,
# tracebacks, interpreter limits. None of these belongs in an orksync error.
_INTERNALS = re.compile(
    r"<class '|<lambda>|<locals>|<function |<built-in |<bound method| object at 0x|Traceback"
    r"|\(\) takes |\(\) missing |\(\) got |positional argument|site-packages|NoneType"
    r"|Exceeds the limit|sys\.set_int_max_str_digits")


def python_internals(message: str) -> list[str]:
    """The pieces of `message` that are Python internals (empty when there are none)."""
    return _INTERNALS.findall(message)
