"""No generated value leaked anywhere in the whole test run (tests/leakscan.py says where it
looks). Runs last: tests/conftest.py moves it to the end of the session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from testbed.controlplane import ControlPlane
from tests import leakscan

pytestmark = pytest.mark.cluster


def test_no_generated_value_written_in_this_run_appears_anywhere_else(
        control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> None:
    audit = control_plane.audit_log
    assert audit is not None and audit.is_file(), "the session control plane has no audit log"
    secrets, short = leakscan.generated_values(audit)
    if not secrets:
        # Run alone (or with no test that generates a Secret): nothing to scan. A whole
        # suite in CI always generates some, so there an empty set is a failure.
        if os.environ.get("CI") == "true":
            pytest.fail("CI: no generated Secret value was written during the run")
        pytest.skip("no generated Secret value was written in this run")
    base = tmp_path_factory.getbasetemp()
    haystack: dict[str, str] = {
        "other API writes (objects, status, Events)": "\n".join(leakscan.other_writes(audit)),
        "captured test output and subprocess output": "\n".join(leakscan.COLLECTED.outputs),
    }
    haystack.update(leakscan.files(base, skip=audit))
    leaks = [f"{secret.where} key {secret.key!r} in {where}"
             for secret in secrets for needle in leakscan.needles(secret)
             for where, text in haystack.items() if needle in text]
    leakscan.COLLECTED.summary = (
        f"leak scan: {len(secrets)} generated values (+{short} shorter than "
        f"{leakscan.MIN_LENGTH} not scanned) against {len(haystack)} sources, "
        f"{sum(map(len, haystack.values())) >> 20} MiB, "
        f"{leakscan.COLLECTED.subprocess_runs} subprocess runs: {len(set(leaks))} leaks")
    assert not leaks, "generated secret values leaked:\n" + "\n".join(sorted(set(leaks)))


def test_the_scan_finds_a_value_planted_in_a_file(tmp_path: Path) -> None:
    """The scan's own check: a value written where it must not be is found."""
    secret = leakscan.Secret("ns/s", "password", "Zq8vY2kP0wLm4TnR")
    (tmp_path / "rendered.yaml").write_text(f"data:\n  password: {secret.value}\n")
    (tmp_path / "b64.yaml").write_text("data: " + leakscan.needles(secret)[1] + "\n")
    texts = dict(leakscan.files(tmp_path, skip=tmp_path / "none"))
    hits = {where for needle in leakscan.needles(secret) for where, text in texts.items()
            if needle in text}
    assert hits == {str(tmp_path / "rendered.yaml"), str(tmp_path / "b64.yaml")}
