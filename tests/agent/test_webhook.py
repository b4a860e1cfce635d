"""The Git webhook's verification (orksync.agent.webhook); the agent's endpoint on a real
process is tested in tests/agent/test_webhook_cluster.py."""

from __future__ import annotations

from email.message import Message
from pathlib import Path

import pytest

from orksync.agent.webhook import read_secret, verify
from orksync.errors import UsageError

# GitHub's documented example of a delivery's signature ("Validating webhook deliveries")
SECRET, BODY = b"It's a Secret to Everybody", b"Hello, World!"
SIGNATURE = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"


def headers(**fields: str) -> Message:
    """Headers as http.server hands them over: looked up without regard to case."""
    msg = Message()
    for name, value in fields.items():
        msg[name.replace("_", "-")] = value
    return msg


def test_githubs_documented_signature_is_accepted() -> None:
    verdict = verify(SECRET, headers(x_hub_signature_256=SIGNATURE), BODY)
    assert verdict.accepted and verdict.provider == "github"


@pytest.mark.parametrize("signature", [
    SIGNATURE[:-1] + "f",  # one digit off
    SIGNATURE.replace("sha256=", "sha1="),  # another scheme
    SIGNATURE.removeprefix("sha256="),  # no scheme
    "sha256=",
    "",
])
def test_a_signature_that_does_not_prove_the_secret_is_refused(signature: str) -> None:
    verdict = verify(SECRET, headers(x_hub_signature_256=signature), BODY)
    assert verdict.status == 401 and not verdict.accepted


def test_the_signature_covers_the_body() -> None:
    assert verify(SECRET, headers(x_hub_signature_256=SIGNATURE), BODY + b" ").status == 401


def test_upper_case_hex_and_header_names_in_any_case_are_accepted() -> None:
    upper = "sha256=" + SIGNATURE.removeprefix("sha256=").upper()
    assert verify(SECRET, headers(X_HUB_SIGNATURE_256=upper), BODY).accepted


def test_gitlabs_token_is_compared_whole() -> None:
    assert verify(SECRET, headers(x_gitlab_token=SECRET.decode()), b"{}").provider == "gitlab"
    assert verify(SECRET, headers(x_gitlab_token=SECRET.decode()[:-1]), b"{}").status == 401
    assert verify(SECRET, headers(x_gitlab_token=""), b"{}").status == 401


def test_a_hook_without_proof_is_refused() -> None:
    assert verify(SECRET, headers(x_github_event="push"), BODY).status == 401


def test_a_ping_is_answered_without_a_fetch() -> None:
    verdict = verify(SECRET, headers(x_hub_signature_256=SIGNATURE, x_github_event="ping"),
                     BODY)
    assert verdict.status == 200 and not verdict.accepted


def test_the_secret_file_is_read_without_its_line_break_and_an_empty_one_is_refused(
        tmp_path: Path) -> None:
    path = tmp_path / "secret"
    path.write_bytes(SECRET + b"\n")
    assert read_secret(path) == SECRET
    path.write_bytes(b" \n")
    with pytest.raises(UsageError, match="empty"):
        read_secret(path)
    with pytest.raises(UsageError, match="cannot read"):
        read_secret(tmp_path / "missing")
