"""Custom resources checked offline against their CRDs' openAPIV3Schema
(orksync.katalog.schema) and `orksync validate` naming file:line and field."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from orksync.katalog.loader import load_repository
from orksync.katalog.schema import catalog_schema_errors, schema_problems, version_schema
from orksync.render.engine import render_catalog
from tests.helpers import KATALOG, REPO_EXAMPLE, ROOT, crd, widget, write_repo

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "required": ["image"],
            "properties": {
                "image": {"type": "string"},
                "replicas": {"type": "integer"},
                "ratio": {"type": "number"},
                "enabled": {"type": "boolean"},
                "port": {"x-kubernetes-int-or-string": True},
                "tier": {"type": "string", "enum": ["web", "db"]},
                "tags": {"type": "array", "items": {"type": "string"}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                         "properties": {"size": {"type": "integer"}}},
                "anything": {"type": "object", "additionalProperties": True},
                "closed": {"type": "object"},
                "ports": {"type": "array", "items": {
                    "type": "object", "properties": {"name": {"type": "string"},
                                                     "port": {"type": "integer"}}}},
            },
        },
    },
}


def problems(spec: dict[str, Any], schema: dict[str, Any] = SCHEMA) -> list[tuple[str, str]]:
    body = {"apiVersion": "x.io/v1", "kind": "W", "metadata": {"name": "w", "any": 1},
            "spec": spec}
    return [(".".join(str(p) for p in path), message)
            for path, message in schema_problems(body, schema)]


def test_a_value_that_fits_the_schema_has_no_problem() -> None:
    assert problems({"image": "nginx", "replicas": 2, "ratio": 0.5, "enabled": False,
                     "port": "http", "tier": "web", "tags": ["a"], "labels": {"a": "b"},
                     "free": {"size": 1, "whatever": {"x": 1}}, "anything": {"k": [1]},
                     "ports": [{"name": "http", "port": 80}]}) == []
    assert problems({"image": "x", "ratio": 2, "port": 8080, "replicas": None}) == []


def test_unknown_fields_are_named_with_their_path_and_the_nearest_field() -> None:
    assert problems({"image": "x", "replicass": 3, "ports": [{"name": "a", "prot": 1}],
                     "closed": {"x": 1}}) == [
        ("spec.replicass", "unknown field 'replicass': not in the CRD's schema "
                           "(did you mean 'replicas'?)"),
        ("spec.ports.0.prot", "unknown field 'prot': not in the CRD's schema "
                              "(did you mean 'port'?)"),
        ("spec.closed.x", "unknown field 'x': not in the CRD's schema"),
    ]


def test_types_required_and_enum_are_checked() -> None:
    assert problems({"replicas": "3", "enabled": "yes", "ratio": True, "port": 1.5,
                     "tier": "cache", "tags": ["a", 1], "labels": {"a": 2},
                     "free": {"size": "big"}}) == [
        ("spec.image", "is required by the CRD's schema and missing"),
        ("spec.replicas", "must be an integer, not a string"),
        ("spec.enabled", "must be a boolean, not a string"),
        ("spec.ratio", "must be a number, not a boolean"),
        ("spec.port", "must be an integer or a string, not a number"),
        ("spec.tier", "'cache' is not one of 'web', 'db'"),
        ("spec.tags.1", "must be a string, not an integer"),
        ("spec.labels.a", "must be a string, not an integer"),
        ("spec.free.size", "must be an integer, not a string"),
    ]


def test_preserve_unknown_fields_at_the_root_accepts_anything() -> None:
    assert problems({"whatever": [1]}, {"type": "object",
                                        "x-kubernetes-preserve-unknown-fields": True}) == []


def test_the_schema_of_the_version_and_its_status_subresource() -> None:
    crd = {"spec": {"versions": [
        {"name": "v1", "schema": {"openAPIV3Schema": SCHEMA}, "subresources": {"status": {}}},
        {"name": "v2"}]}}
    assert version_schema(crd, "v1") == (SCHEMA, True)
    assert version_schema(crd, "v2") == (None, False)
    assert version_schema(crd, "v3") == (None, False)


STRICT_CRD = crd("Widget", properties="""
    spec:
      type: object
      properties:
        image: {type: string}
        replicas: {type: integer}
        port: {type: integer}
""")


def strict_repo(root: Path) -> Path:
    return write_repo(root, {"katalog.yaml": KATALOG, "crd.yaml": STRICT_CRD,
                             "ok.yaml": widget("ok", image="nginx", replicas=1, port=80),
                             "w.yaml": widget("w", image="nginx", replicas=1, port=80,
                                              replicass=2)})


def test_a_custom_resource_outside_its_crds_schema_is_named_by_file_line_and_field(
        tmp_path: Path) -> None:
    catalog = load_repository(strict_repo(tmp_path))
    (err,) = catalog_schema_errors(catalog, render_catalog(catalog).objects)
    assert (err.file, err.line, err.obj, err.path) == (
        "w.yaml", 10, "Widget.test.orksync.io/default/w", "spec.replicass")
    assert str(err) == ("w.yaml:10 Widget.test.orksync.io/default/w spec.replicass: unknown "
                        "field 'replicass': not in the CRD's schema (did you mean "
                        "'replicas'?)")


def test_a_rendered_child_of_a_repository_kind_is_checked_at_its_katalog_entry(
        tmp_path: Path) -> None:
    # a Gadget: a kind of the repository that no entry of this Katalog reconciles (a
    # Widget creating a Widget would be rendered through its own entry, without end)
    katalog = KATALOG.replace("          services:\n", """\
          custom:
            - apiVersion: test.orksync.io/v1
              kind: Gadget
              metadata: {name: "{{ .metadata.name }}-child"}
              spec: {image: nginx, colour: red}
          services:
""")
    repo = strict_repo(tmp_path)
    gadget_crd = STRICT_CRD.replace("widgets", "gadgets").replace("Widget", "Gadget") \
        .replace("widget", "gadget")
    write_repo(repo, {"katalog.yaml": katalog, "gadget-crd.yaml": gadget_crd})
    catalog = load_repository(repo)
    errors = catalog_schema_errors(catalog, render_catalog(catalog).objects)
    children = [e for e in errors if e.obj.endswith("-child")]
    assert [(e.file, e.line, e.path) for e in children] == [
        ("katalog.yaml", 20, "spec.colour"), ("katalog.yaml", 20, "spec.colour")]
    assert "rendered by spec.crds.widget.operatorBox.onCreate.custom[0] for " \
        "Widget.test.orksync.io/default/ok: unknown field 'colour'" in str(children[0])
    assert "Gadget" in str(children[0])


def validate(repo: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "orksync", "validate", str(repo)],
                          capture_output=True, text=True, timeout=120, env=env, check=False)


def test_orksync_validate_exits_1_naming_file_line_and_field(tmp_path: Path) -> None:
    proc = validate(strict_repo(tmp_path))
    assert proc.returncode == 1, proc.stderr
    assert "w.yaml:10 Widget.test.orksync.io/default/w spec.replicass: unknown field " \
        "'replicass'" in proc.stderr, proc.stderr
    assert "errors=1" in proc.stderr
    assert validate(REPO_EXAMPLE).returncode == 0
