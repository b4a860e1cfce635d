"""`external:` calls, the pure part (orksync.render.external): which URLs the egress
allow-list lets through, how call specs are read, the result shape. The calls against a
real HTTP server and the control plane are in tests/render/test_external_cluster.py."""

from __future__ import annotations

import pytest

from orksync.render.external import (
    Call,
    Response,
    call_result,
    host_refusal,
    literal_authority,
    read_calls,
)


@pytest.mark.parametrize(("template", "authority"), [
    ("http://health.example.com/x/{{ .metadata.name }}", ("http", "health.example.com")),
    ("https://API.example.com:8443?x={{ .spec.q }}", ("https", "api.example.com:8443")),
    ("http://127.0.0.1:8080", ("http", "127.0.0.1:8080")),
    ("http://{{ .spec.host }}/health", None),
    ("http://health.example.com{{ .spec.suffix }}", None),  # could become .evil.com
    ("{{ .spec.url }}", None),
    ("ftp://files.example.com/x", None),
])
def test_only_an_authority_the_katalog_writes_out_is_literal(
        template: str, authority: tuple[str, str] | None) -> None:
    assert literal_authority(template) == authority


def test_a_host_chosen_by_a_template_needs_the_allow_list() -> None:
    literal = "http://health.example.com/{{ .metadata.name }}"
    assert host_refusal(literal, "http://health.example.com/shop", []) == ""
    chosen = "http://{{ .spec.host }}/health"
    refused = host_refusal(chosen, "http://10.0.0.1/health", [])
    assert refused.startswith("host '10.0.0.1' is chosen by a template and is not in the "
                              "entry's allowedExternalHosts")
    assert host_refusal(chosen, "http://db.svc.example.com/health", ["*.example.com"]) == ""
    assert host_refusal(chosen, "http://example.com.evil.net/", ["*.example.com"])
    assert host_refusal(chosen, "http://api.example.com:8080/", ["api.example.com:8080"]) == ""
    assert host_refusal(chosen, "http://api.example.com:9090/", ["api.example.com:8080"])
    assert host_refusal(chosen, "http://api.example.com/", ["api.example.com"]) == ""
    assert "user name or password" in host_refusal(
        chosen, "http://api.example.com@10.0.0.1/", ["api.example.com"])
    assert "only http and https" in host_refusal("{{ .spec.u }}", "file:///etc/passwd", [])
    # the written-out prefix does not let a template change the host behind a user name
    assert host_refusal("http://health.example.com", "http://health.example.com", []) == ""


def test_call_specs_are_read_with_orkestras_keys_and_bounds() -> None:
    block = {"external": [{"name": "health", "url": "http://h/health", "timeout": "5s",
                           "expectedStatus": 200, "continueOnError": True,
                           "when": [{"field": "spec.on", "equals": "true"}]}]}
    (call,) = read_calls(block, "onReconcile")  # type: ignore[misc]
    assert (call.name, call.method, call.timeout, call.expected, call.continue_on_error,
            call.path) == ("health", "GET", 5.0, 200, True, "onReconcile.external[0]")
    for item, problem in [
        ({"name": "a", "url": "http://h", "token": "$T"},
         ("onReconcile.external[0].token", "not supported: a credential from the agent's "
          "environment is never sent")),
        ({"name": "a", "url": "http://h", "retries": 3},
         ("onReconcile.external[0].retries", "unknown key (known: name, url, method, body, "
          "headers, timeout, expectedStatus, continueOnError, when, or, anyOf)")),
        ({"name": "a", "url": "http://h", "timeout": "5m"},
         ("onReconcile.external[0].timeout", "must be more than 0s and at most 30s")),
        ({"name": "a b", "url": "http://h"},
         ("onReconcile.external[0].name", "must be a name (letters, digits, '_', '-')")),
    ]:
        assert read_calls({"external": [item]}, "onReconcile") == problem


def test_the_result_has_orkestras_shape_and_says_what_failed() -> None:
    call = Call(name="health", url="http://h", path="onReconcile.external[0]", expected=200)
    ok = call_result(call, Response(status=200, body=b"fine", seconds=0.01))
    assert ok == {"status": "200", "statusCode": 200, "body": "fine", "error": "",
                  "called": "true", "durationSeconds": 0.01}
    assert call_result(call, Response(status=503))["error"] == "status 503, expected 200"
    down = call_result(call, Response(error="ConnectionRefusedError: refused"))
    assert (down["status"], down["error"]) == ("", "ConnectionRefusedError: refused")
    any_2xx = Call(name="h", url="http://h", path="p")
    assert call_result(any_2xx, Response(status=204))["error"] == ""
    assert call_result(any_2xx, Response(status=301))["error"] == "status 301, expected 2xx"
