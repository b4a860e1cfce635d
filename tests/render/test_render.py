"""Rendering repositories into RenderedSets and the rendered directory."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from orksync.errors import RenderError
from orksync.katalog.loader import load_repository
from orksync.model import ObjRef, Origin, RenderedObject, RenderedSet, WritePolicy
from orksync.render.engine import render_catalog
from orksync.render.kinds import BY_KEY, KINDS
from orksync.rendered import directory as output
from orksync.rendered.directory import read_rendered, write_rendered
from orksync.yamls.io import MAX_FILE_BYTES, dump_yaml, load_emitted
from tests.helpers import CRD, KATALOG, REPO_EXAMPLE, widget, write_repo
from tests.kind_cases import CASES, katalog


def render(root: Path) -> RenderedSet:
    return render_catalog(load_repository(root))


def by_name(rendered: RenderedSet) -> dict[str, dict]:
    return {str(o.ref): dict(o.body) for o in rendered.objects}


def test_rendering_the_example_twice_gives_identical_bytes(tmp_path: Path) -> None:
    first = write_rendered(render(REPO_EXAMPLE), tmp_path / "a")
    second = write_rendered(render(REPO_EXAMPLE), tmp_path / "b")
    files = sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
    assert len(files) == 17  # 16 objects + index
    for rel in files:
        assert (first / rel).read_bytes() == (second / rel).read_bytes(), rel


def test_the_rendered_directory_reads_back_to_the_same_objects(tmp_path: Path) -> None:
    rendered = render(REPO_EXAMPLE)
    back = read_rendered(write_rendered(rendered, tmp_path / "out"))
    assert [(o.ref, o.policy, o.stage, o.owner) for o in back.objects] == \
        [(o.ref, o.policy, o.stage, o.owner) for o in rendered.objects]
    assert [dict(o.body) for o in back.objects] == [dict(o.body) for o in rendered.objects]


def test_an_edited_rendered_file_is_refused_by_apply(tmp_path: Path) -> None:
    out = write_rendered(render(REPO_EXAMPLE), tmp_path / "out")
    victim = next(out.glob("children/*/team-a/shop/Deployment*"))
    victim.write_text(victim.read_text().replace("replicas: 2", "replicas: 9"))
    with pytest.raises(Exception, match="changed since it was rendered"):
        read_rendered(out)


def test_the_index_is_handed_over_before_the_files_are_read(tmp_path: Path) -> None:
    """`orksync apply` sends its LISTs once the index is read (`on_index`), while the files
    are read: every object's identity, stage and owner, in order, and before an edited
    file stops the read."""
    rendered = render(REPO_EXAMPLE)
    out = write_rendered(rendered, tmp_path / "out")
    seen: list[list[tuple[ObjRef, int, ObjRef | None]]] = []
    read_rendered(out, lambda entries: seen.append([(e.ref, e.stage, e.owner)
                                                    for e in entries]))
    assert seen == [[(o.ref, o.stage, o.owner) for o in rendered.objects]]
    victim = next(out.glob("children/*/team-a/shop/Deployment*"))
    victim.write_text(victim.read_text().replace("replicas: 2", "replicas: 9"))
    seen.clear()
    with pytest.raises(Exception, match="changed since it was rendered"):
        read_rendered(out, lambda entries: seen.append([e.ref for e in entries]))
    assert len(seen) == 1 and len(seen[0]) == len(rendered.objects)


@pytest.mark.parametrize("evil", ["../outside.yaml", "/etc/hostname", "resources/../../x"])
def test_an_index_entry_pointing_outside_the_directory_is_refused(tmp_path: Path,
                                                                   evil: str) -> None:
    out = write_rendered(render(REPO_EXAMPLE), tmp_path / "out")
    (tmp_path / "outside.yaml").write_text("apiVersion: v1\nkind: ConfigMap\n")
    index = out / "index.yaml"
    first = next(line for line in index.read_text().splitlines() if "file: " in line)
    index.write_text(index.read_text().replace(first, f"{first.split('file:')[0]}file: {evil}"))
    with pytest.raises(Exception, match="is outside the directory"):
        read_rendered(out)


def test_a_rendered_file_rewritten_by_hand_with_its_hash_is_read_by_the_safe_loader(
        tmp_path: Path) -> None:
    import hashlib
    rendered = render(REPO_EXAMPLE)
    out = write_rendered(rendered, tmp_path / "out")
    victim = next(out.glob("children/*/team-a/shop/Deployment*"))
    old = victim.read_bytes()
    victim.write_text("# edited, same content\n" + victim.read_text().replace(
        "replicas: 2", "replicas: 0x2"))
    index = out / "index.yaml"
    index.write_text(index.read_text().replace(
        hashlib.sha256(old).hexdigest(), hashlib.sha256(victim.read_bytes()).hexdigest()))
    back = {str(o.ref): dict(o.body) for o in read_rendered(out).objects}
    assert back == by_name(rendered)  # 0x2 is 2 to YAML 1.2, the comment is nothing


def test_an_index_above_the_yaml_file_size_bound_reads_back(tmp_path: Path) -> None:
    # 1,000 custom resources of 8 children: an index of 4.5 MB, above MAX_FILE_BYTES
    body = {"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "v"}}
    names = [f"configmap-with-a-long-name-{i:05d}-{'x' * 40}" for i in range(10000)]
    objects = tuple(RenderedObject(
        ref=ObjRef(api_version="v1", kind="ConfigMap", namespace="ns", name=name),
        body={**body, "metadata": {"name": name, "namespace": "ns"}},
        policy=WritePolicy.APPLY, origin=Origin(file=f"crs/{name}.yaml", katalog="k",
                                                crd="c", entry="configMaps[0]"),
        stage=5) for name in names)
    out = write_rendered(RenderedSet(objects=objects), tmp_path / "out")
    assert (out / "index.yaml").stat().st_size > MAX_FILE_BYTES
    assert [o.ref for o in read_rendered(out).objects] == [o.ref for o in objects]


def test_an_index_written_in_short_writes_is_the_same_file(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A write the system takes only part of is finished, never cut or repeated."""
    objects = tuple(RenderedObject(
        ref=ObjRef(api_version="v1", kind="ConfigMap", namespace="ns", name=f"m{i:04d}"),
        body={"apiVersion": "v1", "kind": "ConfigMap", "data": {"i": str(i)}},
        policy=WritePolicy.APPLY, origin=Origin(file="crs/a.yaml"), stage=5)
        for i in range(2100))
    whole = (write_rendered(RenderedSet(objects=objects), tmp_path / "whole") /
             "index.yaml").read_bytes()
    calls = []
    write = os.write

    def short_write(fd: int, data: bytes | memoryview) -> int:
        calls.append(len(data))
        return write(fd, bytes(data[:1000]))

    monkeypatch.setattr(output.os, "write", short_write)
    short = (write_rendered(RenderedSet(objects=objects), tmp_path / "short") /
             "index.yaml").read_bytes()
    assert len(calls) > len(whole) // 1000
    assert short == whole
    assert [o.ref for o in read_rendered(tmp_path / "short").objects] == \
        [o.ref for o in objects]


def test_the_index_is_exactly_what_dump_yaml_writes_for_its_content(tmp_path: Path) -> None:
    """index.yaml is written entry by entry, not through one dump_yaml call: it must still
    be the emitter's text of the mapping it holds (load_emitted accepts nothing else), with
    every field of every kind of entry: owners, directives, an empty origin, errors."""
    cr = ObjRef(api_version="x.io/v1", kind="App", namespace="ns", name="a")
    plain = RenderedObject(ref=ObjRef(api_version="v1", kind="Namespace", name="0ns"),
                           body={"apiVersion": "v1", "kind": "Namespace"},
                           policy=WritePolicy.CREATE, origin=Origin(file=""), stage=1)
    child = RenderedObject(
        ref=ObjRef(api_version="v1", kind="ConfigMap", namespace="ns", name="true"),
        body={"apiVersion": "v1", "kind": "ConfigMap"}, policy=WritePolicy.APPLY,
        origin=Origin(file="crs/a b.yaml", katalog="k", crd="c", entry="configMaps[0]"),
        stage=12, owner=cr, directives={"copyFrom": {"kind": "ConfigMap", "name": "s"},
                                        "forceConflict": False, "list": [1, "2"]})
    rendered = RenderedSet(objects=(plain, child, child), errors=(RenderError("bad"),),
                           skipped=((cr, "refused"),), absent=((plain.ref, cr),))
    out = write_rendered(rendered, tmp_path / "out", revision="abc123")
    text = (out / "index.yaml").read_text()
    index = load_emitted(text)
    assert dump_yaml(index) == text
    assert list(index) == ["apiVersion", "kind", "revision", "objects", "errors", "skipped",
                           "absent"]
    first, second, third = index["objects"]
    assert first["object"] == {"apiVersion": "v1", "kind": "Namespace", "name": "0ns"}
    assert first["origin"] == {} and "owner" not in first and "directives" not in first
    assert second == third
    assert second["owner"] == {"apiVersion": "x.io/v1", "kind": "App", "namespace": "ns",
                               "name": "a"}
    assert second["directives"] == dict(child.directives)
    assert list(second) == ["file", "object", "policy", "stage", "owner", "directives",
                            "origin", "sha256"]
    assert (second["policy"], second["stage"]) == ("apply", 12)
    assert second["sha256"] == hashlib.sha256((out / second["file"]).read_bytes()).hexdigest()
    empty = write_rendered(RenderedSet(objects=()), tmp_path / "empty")
    assert load_emitted((empty / "index.yaml").read_text())["objects"] == []
    # a digest starting with a digit is quoted, one starting with a letter is not
    many = tuple(RenderedObject(
        ref=ObjRef(api_version="v1", kind="ConfigMap", namespace="ns", name=f"m{i}"),
        body={"apiVersion": "v1", "kind": "ConfigMap", "data": {"i": str(i)}},
        policy=WritePolicy.APPLY, origin=Origin(file="crs/a.yaml"), stage=12)
        for i in range(32))
    text = (write_rendered(RenderedSet(objects=many), tmp_path / "many") /
            "index.yaml").read_text()
    assert dump_yaml(load_emitted(text)) == text
    firsts = {o["sha256"][0] for o in load_emitted(text)["objects"]}
    assert firsts & set("0123456789") and firsts & set("abcdef")


def test_a_directory_that_is_not_a_render_is_never_replaced(tmp_path: Path) -> None:
    (tmp_path / "precious").mkdir()
    (tmp_path / "precious" / "notes.txt").write_text("keep me")
    with pytest.raises(Exception, match="not an orksync output directory"):
        write_rendered(render(REPO_EXAMPLE), tmp_path / "precious")
    assert (tmp_path / "precious" / "notes.txt").read_text() == "keep me"


def test_hello_website_renders_with_orkestras_defaults(orkestra_examples: Path) -> None:
    objs = by_name(render(orkestra_examples / "hello-website"))
    deploy = objs["Deployment/default/hello"]
    assert deploy["spec"]["replicas"] == 1  # replicas renders empty -> 1
    (container,) = deploy["spec"]["template"]["spec"]["containers"]
    assert container == {"name": "hello", "image": "nginx:1.25"}  # empty port -> no port
    svc = objs["Service/default/hello-svc"]
    assert svc["spec"]["ports"] == [{"port": 80, "targetPort": 80, "protocol": "TCP"}]
    assert svc["spec"]["selector"] == {"orkestra-owner": "hello"}


def test_when_conditions_compare_booleans_as_text(orkestra_examples: Path) -> None:
    objs = by_name(render(orkestra_examples / "when-conditions"))
    # tier free: no LoadBalancer; monitoring false: no monitoring ConfigMap
    assert "Service/default/my-platform-lb" not in objs
    assert "Service/default/my-platform-internal" in objs


def test_children_carry_orkestras_labels_and_the_owner_annotation() -> None:
    shop = by_name(render(REPO_EXAMPLE))["Deployment/team-a/shop"]
    labels = shop["metadata"]["labels"]
    assert labels["orkestra-owner"] == "shop"
    assert labels["orkestra.orkspace.io/managed"] == "true"
    assert labels["app.kubernetes.io/managed-by"] == "orksync"
    assert shop["metadata"]["annotations"]["orksync.io/owner"] == \
        "WebApp.platform.example.com/team-a/shop"


def test_write_policies_follow_the_block_and_reconcile(tmp_path: Path) -> None:
    katalog = KATALOG + """
        onReconcile:
          services:
            - name: "{{ .metadata.name }}-live"
              port: "81"
"""
    write_repo(tmp_path, {"katalog.yaml": katalog, "crd.yaml": CRD,
                          "w.yaml": widget("w", image="nginx")})
    policies = {o.ref.name: o.policy for o in render(tmp_path).objects}
    assert policies["w"] is WritePolicy.APPLY  # deployment, reconcile: true (and the CR)
    assert policies["w-svc"] is WritePolicy.CREATE  # onCreate without reconcile
    assert policies["w-live"] is WritePolicy.APPLY  # onReconcile


@pytest.mark.parametrize("key", [k.key for k in KINDS])
def test_an_entry_without_a_name_takes_its_kinds_default_or_is_an_error_naming_the_field(
        tmp_path: Path, key: str) -> None:
    entry = {k: v for k, v in CASES[key][0].items() if k != "name"}
    if key == "custom":
        entry["metadata"] = {k: v for k, v in entry["metadata"].items() if k != "name"}
    write_repo(tmp_path, {"katalog.yaml": katalog({"onReconcile": {key: [entry]}}),
                          "crd.yaml": CRD, "w.yaml": widget("w", "shop")})
    rendered = render(tmp_path)
    suffix = BY_KEY[key].default_suffix
    if suffix is not None:
        assert rendered.ok, rendered.errors
        assert [o.ref.name for o in rendered.objects if o.owner] == [f"w{suffix}"]
        return
    (err,) = rendered.errors
    assert isinstance(err, RenderError)
    field = "metadata.name" if key == "custom" else "name"
    assert (err.file, err.obj) == ("katalog.yaml", "Widget.test.orksync.io/shop/w")
    assert err.path == f"spec.crds.widget.operatorBox.onReconcile.{key}[0].{field}"
    assert f"is required ({key} entries have no default name)" in str(err)


def test_to_namespaces_on_a_cluster_scoped_key_is_ignored_with_a_warning(
        tmp_path: Path) -> None:
    entry = {"name": "reader", "toNamespaces": ["a", "b"],
             "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}
    write_repo(tmp_path, {"katalog.yaml": katalog({"onReconcile": {"clusterRoles": [entry]}}),
                          "crd.yaml": CRD, "w.yaml": widget("w", "shop")})
    rendered = render(tmp_path)
    assert [str(o.ref) for o in rendered.objects if o.owner] == ["ClusterRole/reader"]
    assert any(w.startswith("katalog.yaml:") and "clusterRoles[0].toNamespaces is ignored: "
               "clusterRoles objects are cluster-scoped" in w
               for w in rendered.warnings), rendered.warnings


def test_an_unknown_function_is_an_error_when_the_katalog_loads(tmp_path: Path) -> None:
    write_repo(tmp_path, {"katalog.yaml": KATALOG.replace('"{{ .spec.image }}"',
                                                          '"{{ .spec.image | nosuchfunc }}"'),
                          "crd.yaml": CRD, "w.yaml": widget("w", image="nginx")})
    katalog_err, cr_err = render(tmp_path).errors
    assert isinstance(katalog_err, RenderError)
    assert katalog_err.file == "katalog.yaml" and katalog_err.line == 12
    assert katalog_err.path == "spec.crds.widget.operatorBox.onCreate.deployments[0].image"
    assert "Katalog/widgets" in str(katalog_err) and "nosuchfunc" in str(katalog_err)
    assert str(cr_err).startswith("w.yaml Widget.test.orksync.io/default/w: not rendered")


def test_an_execution_error_names_file_line_object_and_field(tmp_path: Path) -> None:
    write_repo(tmp_path, {"katalog.yaml": KATALOG.replace('"{{ .spec.image }}"',
                                                          '"{{ index .spec.tags 3 }}"'),
                          "crd.yaml": CRD, "w.yaml": widget("w", tags="[a]")})
    (err,) = render(tmp_path).errors
    assert isinstance(err, RenderError)
    assert err.file == "katalog.yaml" and err.line == 12
    assert err.path == "spec.crds.widget.operatorBox.onCreate.deployments[0].image"
    assert "Widget.test.orksync.io/default/w" in str(err) and "index" in str(err)


def test_an_unknown_condition_operator_is_refused_at_load(tmp_path: Path) -> None:
    katalog = KATALOG.replace('targetPort: "{{ .spec.port }}"',
                              'targetPort: "{{ .spec.port }}"\n'
                              '              when: [{field: spec.x, operator: sortOf}]')
    write_repo(tmp_path, {"katalog.yaml": katalog, "crd.yaml": CRD,
                          "w.yaml": widget("w", image="x")})
    errors = render(tmp_path).errors
    assert "sortOf" in str(errors[0]) and "services[0].when[0]" in str(errors[0])


def test_one_broken_custom_resource_does_not_stop_the_others(tmp_path: Path) -> None:
    write_repo(tmp_path, {"katalog.yaml": KATALOG, "crd.yaml": CRD,
                          "a.yaml": widget("a", image="nginx"), "b.yaml": widget("b"),
                          "c.yaml": widget("c", image="nginx")})
    rendered = render(tmp_path)
    (err,) = rendered.errors
    assert "Widget.test.orksync.io/default/b" in str(err) and "image" in str(err)
    names = {o.ref.name for o in rendered.objects if o.ref.kind == "Deployment"}
    assert names == {"a", "c"}
    assert not any(o.ref.name.startswith("b") for o in rendered.objects)


def test_two_custom_resources_rendering_the_same_object_is_an_error(tmp_path: Path) -> None:
    katalog = KATALOG.replace('- name: "{{ .metadata.name }}"\n              image',
                              '- name: shared\n              image')
    write_repo(tmp_path, {"katalog.yaml": katalog, "crd.yaml": CRD,
                          "a.yaml": widget("a", image="x"), "b.yaml": widget("b", image="y")})
    rendered = render(tmp_path)
    (err,) = rendered.errors
    assert "Deployment/default/shared" in str(err) and "one owner" in str(err)
    owners = [o.owner for o in rendered.objects if o.ref.name == "shared"]
    assert owners == [ObjRef(api_version="test.orksync.io/v1", kind="Widget",
                             namespace="default", name="a")]


def test_for_each_expands_an_entry_per_item_with_the_item_in_every_field(
        tmp_path: Path) -> None:
    katalog = """
        apiVersion: orkestra.orkspace.io/v1
        kind: Katalog
        metadata: {name: widgets}
        spec:
          crds:
            widget:
              crdFile: ./crd.yaml
              operatorBox:
                onReconcile:
                  services:
                    - name: "{{ .metadata.name }}-{{ .region.name }}"
                      port: "{{ .region.port }}"
                      forEach: {field: spec.regions, as: region}
                      when:
                        - field: "{{ .region.enabled }}"
                          equals: "true"
        """
    write_repo(tmp_path, {"katalog.yaml": katalog, "crd.yaml": CRD,
                          "w.yaml": widget("w", regions="[{name: eu, port: 81, enabled: true},"
                                           " {name: us, port: 82, enabled: false}]")})
    rendered = render(tmp_path)
    assert rendered.ok, rendered.errors
    svcs = {o.ref.name: o.body["spec"]["ports"][0]["port"] for o in rendered.objects
            if o.ref.kind == "Service"}
    assert svcs == {"w-eu": 81}


def test_list_form_labels_from_old_katalogs_become_a_map(tmp_path: Path) -> None:
    katalog = KATALOG.replace('reconcile: true\n          services',
                              'reconcile: true\n              labels:\n'
                              '                - {key: team, value: "{{ .spec.team }}"}\n'
                              '          services')
    write_repo(tmp_path, {"katalog.yaml": katalog, "crd.yaml": CRD,
                          "w.yaml": widget("w", image="nginx", team="blue")})
    deploy = by_name(render(tmp_path))["Deployment/default/w"]
    assert deploy["metadata"]["labels"]["team"] == "blue"


def test_an_invalid_rendered_name_is_an_error_not_a_silent_default(tmp_path: Path) -> None:
    write_repo(tmp_path, {"katalog.yaml": KATALOG.replace('"{{ .metadata.name }}-svc"',
                                                          '"{{ .spec.svc }}"'),
                          "crd.yaml": CRD, "w.yaml": widget("w", image="x", svc="Bad_Name")})
    (err,) = render(tmp_path).errors
    assert "services[0].name" in str(err) and "Bad_Name" in str(err)


def test_a_validation_deny_rule_stops_that_custom_resource_only(tmp_path: Path) -> None:
    katalog = KATALOG.replace("      crdFile: ./crd.yaml\n",
                              "      crdFile: ./crd.yaml\n      validation:\n        rules:\n"
                              "          - {field: spec.image, operator: exists, action: deny,"
                              " message: an image is required}\n")
    write_repo(tmp_path, {"katalog.yaml": katalog, "crd.yaml": CRD,
                          "a.yaml": widget("a", image="nginx"), "b.yaml": widget("b")})
    rendered = render(tmp_path)
    (err,) = rendered.errors
    assert "Widget.test.orksync.io/default/b" in str(err)
    assert "validation denied" in str(err) and "an image is required" in str(err)
    assert {o.ref.name for o in rendered.objects if o.ref.kind == "Deployment"} == {"a"}


def test_a_motif_import_adds_its_resources_with_inputs_rendered_per_resource(
        tmp_path: Path) -> None:
    katalog = KATALOG.replace("      crdFile: ./crd.yaml\n",
                              "      crdFile: ./crd.yaml\n      imports:\n"
                              "        - motif: ./motifs/team.yaml\n"
                              "          with: {team: \"{{ .spec.team }}\"}\n")
    motif = """
        apiVersion: orkestra.orkspace.io/v1
        kind: Motif
        metadata: {name: team}
        inputs:
          - {name: team, required: true}
        resources:
          serviceAccounts:
            - name: "{{ .metadata.name }}-{{ .inputs.team }}"
        """
    write_repo(tmp_path, {"katalog.yaml": katalog, "crd.yaml": CRD, "motifs/team.yaml": motif,
                          "w.yaml": widget("w", image="nginx", team="blue")})
    rendered = render(tmp_path)
    assert rendered.ok, rendered.errors
    assert "ServiceAccount/default/w-blue" in by_name(rendered)


def test_a_katalog_can_opt_into_native_jinja2_templates(tmp_path: Path) -> None:
    katalog = """
        apiVersion: orkestra.orkspace.io/v1
        kind: Katalog
        metadata:
          name: widgets
          annotations: {orksync.io/template-dialect: jinja2}
        spec:
          crds:
            widget:
              crdFile: ./crd.yaml
              operatorBox:
                onReconcile:
                  services:
                    - name: "{{ metadata.name ~ '-svc' }}"
                      port: "{{ spec.port | default(8080) }}"
        """
    write_repo(tmp_path, {"katalog.yaml": katalog, "crd.yaml": CRD, "w.yaml": widget("w")})
    rendered = render(tmp_path)
    assert rendered.ok, rendered.errors
    assert by_name(rendered)["Service/default/w-svc"]["spec"]["ports"][0]["port"] == 8080


@pytest.mark.parametrize("example", ["hello-website", "once-secret", "when-conditions",
                                     "secret-copy"])
def test_every_orkestra_example_renders_without_errors(example: str,
                                                        orkestra_examples: Path) -> None:
    rendered = render(orkestra_examples / example)
    assert rendered.ok, rendered.errors
    assert any(o.owner is not None for o in rendered.objects)  # children were rendered


def test_keys_orkestra_never_implemented_are_ignored_with_a_warning(tmp_path: Path) -> None:
    katalog = KATALOG.replace("        onCreate:\n", "        onCreate:\n          daemonSets:\n"
                              "            - name: x\n")
    write_repo(tmp_path, {"katalog.yaml": katalog, "crd.yaml": CRD,
                          "w.yaml": widget("w", image="nginx")})
    rendered = render(tmp_path)
    assert rendered.ok, rendered.errors
    assert any(w.startswith("katalog.yaml:10: ") and "onCreate.daemonSets" in w
               and "not implemented" in w for w in rendered.warnings), rendered.warnings


def test_an_unknown_entry_key_is_an_error_naming_file_line_field_and_the_nearest_key(
        tmp_path: Path) -> None:
    gadgets = KATALOG.replace("{name: widgets}", "{name: gadgets}").replace(
        "widget:", "gadget:").replace("./crd.yaml", "./gadget-crd.yaml")
    gadget_crd = CRD.replace("widgets.", "gadgets.").replace(
        "{kind: Widget, plural: widgets, singular: widget}",
        "{kind: Gadget, plural: gadgets, singular: gadget}")
    write_repo(tmp_path, {
        "katalog.yaml": KATALOG.replace('image: "{{ .spec.image }}"\n',
                                        'image: "{{ .spec.image }}"\n'
                                        '              replicass: "3"\n'),
        "crd.yaml": CRD, "w.yaml": widget("w", image="nginx"),
        "v.yaml": widget("v", image="nginx"),
        "gadgets.yaml": gadgets, "gadget-crd.yaml": gadget_crd,
        "g.yaml": widget("g", image="nginx").replace("Widget", "Gadget")})
    rendered = render(tmp_path)
    katalog_err, *cr_errs = rendered.errors
    assert isinstance(katalog_err, RenderError)
    assert (katalog_err.file, katalog_err.line) == ("katalog.yaml", 13)
    assert katalog_err.path == "spec.crds.widget.operatorBox.onCreate.deployments[0].replicass"
    assert "unknown field 'replicass'" in str(katalog_err)
    assert "did you mean 'replicas'?" in str(katalog_err)
    # every custom resource of the entry is left out, the other entry's still render
    assert sorted(e.obj for e in cr_errs) == ["Widget.test.orksync.io/default/v",
                                              "Widget.test.orksync.io/default/w"]
    assert all("not rendered" in str(e) for e in cr_errs)
    owners = {str(o.owner) for o in rendered.objects if o.owner}
    assert owners == {"Gadget.test.orksync.io/default/g"}
    assert not any("replicass" in w for w in rendered.warnings)


def test_cross_reads_another_custom_resource_of_the_repository(tmp_path: Path) -> None:
    katalog = """
        apiVersion: orkestra.orkspace.io/v1
        kind: Katalog
        metadata: {name: widgets}
        spec:
          crds:
            widget:
              crdFile: ./crd.yaml
              operatorBox:
                cross:
                  - crd: widget
                    as: db
                    selector: {name: "{{ .spec.database }}"}
                onReconcile:
                  configMaps:
                    - name: "{{ .metadata.name }}-link"
                      data:
                        found: "{{ .cross.db.found }}"
                        engine: "{{ .cross.db.spec.engine }}"
        """
    write_repo(tmp_path, {"katalog.yaml": katalog, "crd.yaml": CRD,
                          "db.yaml": widget("db", engine="postgres"),
                          "app.yaml": widget("app", database="db"),
                          "lost.yaml": widget("lost", database="nowhere")})
    objs = by_name(render(tmp_path))
    assert objs["ConfigMap/default/app-link"]["data"] == {"found": "true", "engine": "postgres"}
    assert objs["ConfigMap/default/lost-link"]["data"] == {"found": "false", "engine": ""}


def test_a_cross_crd_that_names_no_entry_warns_with_file_line_and_field(
        tmp_path: Path) -> None:
    katalog = KATALOG.replace("      operatorBox:\n", "      operatorBox:\n"
                              "        cross:\n          - {crd: widgte, as: peer}\n")
    write_repo(tmp_path, {"katalog.yaml": katalog, "crd.yaml": CRD,
                          "app.yaml": widget("app", image="nginx")})
    rendered = render(tmp_path)
    assert rendered.ok, rendered.errors
    assert [w for w in rendered.warnings if "cross" in w] == [
        "katalog.yaml:10 Katalog/widgets spec.crds.widget.operatorBox.cross[0].crd: names "
        "'widgte', which is not a CRD entry of this Katalog (did you mean 'widget'?): "
        ".cross.peer never finds a custom resource"]


@pytest.mark.parametrize("box_cross", [False, True], ids=["no-cross", "cross"])
def test_the_guard_work_of_a_render_grows_linearly_with_the_custom_resources(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, box_cross: bool) -> None:
    """Counted, not timed: each custom resource's guard checks must not grow with the number
    of custom resources (filtering every other custom resource for `cross` on each render
    made a 10,000-resource render 57 times slower than 1,000). With `cross`, the filter is
    per reading custom resource, as the `cross` match itself."""
    from orksync.render import guard

    calls = 0
    real = guard.NamespaceGuard.refusal

    def counting(self: guard.NamespaceGuard, namespace: str) -> str | None:
        nonlocal calls
        calls += 1
        return real(self, namespace)

    monkeypatch.setattr(guard.NamespaceGuard, "refusal", counting)
    cross = '        cross: [{crd: widget, as: peer, selector: {name: "w0"}}]\n' \
        if box_cross else ""
    katalog_text = KATALOG.replace("      operatorBox:\n", "      operatorBox:\n" + cross, 1)
    assert (katalog_text != KATALOG) is box_cross

    def guard_calls(n: int) -> int:
        nonlocal calls
        files = {"katalog.yaml": katalog_text, "crd.yaml": CRD}
        files.update({f"w{i}.yaml": widget(f"w{i}", "ns", image="nginx", replicas=1, port=80)
                      for i in range(n)})
        rendered = render_catalog(load_repository(write_repo(tmp_path / str(n), files)))
        assert rendered.ok, rendered.errors
        calls = 0
        render_catalog(load_repository(tmp_path / str(n)))
        return calls

    small, large = guard_calls(20), guard_calls(80)
    if box_cross:
        assert large > 8 * small  # quadratic with cross, as the match: the control case
    else:
        assert large <= 4 * small + 4, (small, large)


_SHARED_HEAD = """
        apiVersion: orkestra.orkspace.io/v1
        kind: Katalog
        metadata: {name: shared}
        spec:
          crds:
            widget:
              crdFile: ./crd.yaml
              operatorBox:
"""
# one entry under two CRD entries and blocks
_SHARED_ENTRY = _SHARED_HEAD + """
                onCreate:
                  configMaps:
                    - &shared
                      name: "{{ .metadata.name }}-config"
                      data: {kind: "{{ .kind }}"}
            gadget:
              crdFile: ./gadget-crd.yaml
              forceConflict: false
              operatorBox:
                onReconcile:
                  configMaps:
                    - *shared
        """
# one whole block under two CRD entries, as onCreate and as onReconcile
_SHARED_BLOCK = _SHARED_HEAD + """
                onCreate: &shared
                  configMaps:
                    - name: "{{ .metadata.name }}-config"
                      data: {kind: "{{ .kind }}"}
            gadget:
              crdFile: ./gadget-crd.yaml
              forceConflict: false
              operatorBox:
                onReconcile: *shared
        """


@pytest.mark.parametrize("katalog_text", [_SHARED_ENTRY, _SHARED_BLOCK],
                         ids=["entry", "block"])
def test_an_entry_shared_by_a_yaml_alias_is_planned_for_each_place_it_appears(
        tmp_path: Path, katalog_text: str) -> None:
    """What a render works out once per Katalog entry and block (its policy, stage,
    forceConflict, path) is kept per entry *and* place: one entry, or one whole block,
    written under two CRD entries and blocks through a YAML alias is planned for each."""
    gadget_crd = CRD.replace("widgets.test", "gadgets.test").replace(
        "{kind: Widget, plural: widgets, singular: widget}",
        "{kind: Gadget, plural: gadgets, singular: gadget}")
    gadget = widget("g", "ns").replace("Widget", "Gadget")
    repo = write_repo(tmp_path, {"katalog.yaml": katalog_text, "crd.yaml": CRD,
                                 "gadget-crd.yaml": gadget_crd, "w.yaml": widget("w", "ns"),
                                 "g.yaml": gadget})
    for _ in range(2):  # the second render answers from what the first worked out
        rendered = render_catalog(load_repository(repo))
        assert rendered.ok, rendered.errors
        maps = {o.ref.name: o for o in rendered.objects if o.ref.kind == "ConfigMap"}
        assert maps["w-config"].policy is WritePolicy.CREATE
        assert "forceConflict" not in maps["w-config"].directives
        assert maps["g-config"].policy is WritePolicy.APPLY
        assert maps["g-config"].directives.get("forceConflict") is False
        assert maps["g-config"].body["data"] == {"kind": "Gadget"}
        assert maps["w-config"].origin.entry == "onCreate.configMaps[0]"
        assert maps["g-config"].origin.entry == "onReconcile.configMaps[0]"


# -- an entry's templates rendered --------------------------------------------------------


def test_a_template_error_in_an_entry_names_its_field(tmp_path: Path) -> None:
    """The error names the failing leaf, below maps and lists; the other custom resource
    renders."""
    katalog = KATALOG.replace('port: "{{ .spec.port }}"\n              reconcile: true',
                              'port: "{{ .spec.port }}"\n              reconcile: true\n'
                              '              env: [{name: A, value: "{{ .spec.port }}"},'
                              ' {name: B, value: "{{ index .spec.tags 3 }}"}]')
    write_repo(tmp_path, {"katalog.yaml": katalog, "crd.yaml": CRD,
                          "w.yaml": widget("w", image="x", port=80, tags="[a]"),
                          "v.yaml": widget("v", image="x", port=80, tags="[a, b, c, d]")})
    rendered = render(tmp_path)
    (err,) = rendered.errors
    assert isinstance(err, RenderError) and "Widget.test.orksync.io/default/w" in str(err)
    assert err.path == "spec.crds.widget.operatorBox.onCreate.deployments[0].env[1].value"
    (deployment,) = [o for o in rendered.objects if o.ref.name == "v" and
                     o.ref.kind == "Deployment"]
    (container,) = deployment.body["spec"]["template"]["spec"]["containers"]
    assert container["env"] == [{"name": "A", "value": "80"}, {"name": "B", "value": "d"}]


def test_a_katalog_using_an_orksync_extension_renders_with_a_portability_warning(
        tmp_path: Path) -> None:
    katalog = KATALOG.replace('image: "{{ .spec.image }}"',
                              'image: "{{ concat .spec.image \\":1\\" }}"')
    write_repo(tmp_path, {"katalog.yaml": katalog, "crd.yaml": CRD,
                          "w.yaml": widget("w", image="nginx")})
    rendered = render(tmp_path)
    assert rendered.ok, rendered.errors
    assert by_name(rendered)["Deployment/default/w"]["spec"]["template"]["spec"][
        "containers"][0]["image"] == "nginx:1"
    warnings = [w for w in rendered.warnings if "not portable" in w]
    assert len(warnings) == 1
    assert "katalog.yaml:12 Katalog/widgets" in warnings[0]
    assert "operatorBox.onCreate.deployments[0].image" in warnings[0]
    assert "`concat`" in warnings[0]


def test_a_portable_katalog_has_no_portability_warning(tmp_path: Path) -> None:
    write_repo(tmp_path, {"katalog.yaml": KATALOG, "crd.yaml": CRD,
                          "w.yaml": widget("w", image="nginx")})
    assert not [w for w in render(tmp_path).warnings if "not portable" in w]


def test_a_typed_note_given_a_missing_value_fails_naming_file_line_and_field(
        tmp_path: Path) -> None:
    # Orkestra: `toUpper` takes a string, and text/template refuses the nil of a missing key
    katalog = KATALOG.replace('image: "{{ .spec.image }}"',
                              'image: "{{ .spec.imageName | toUpper }}"')
    write_repo(tmp_path, {"katalog.yaml": katalog, "crd.yaml": CRD,
                          "w.yaml": widget("w", image="nginx")})
    rendered = render(tmp_path)
    (err,) = rendered.errors
    message = str(err)
    assert message.startswith("katalog.yaml:12 Widget.test.orksync.io/default/w "), message
    assert "operatorBox.onCreate.deployments[0].image" in message
    assert "toUpper: argument 1 is missing" in message


def test_numbers_reach_templates_as_the_api_server_delivers_them(tmp_path: Path) -> None:
    # the API server hands Orkestra `1000000.0` as the int64 1000000 (printed without an
    # exponent) and an integer beyond int64 as a float64; the same for a cross resource
    katalog = """
        apiVersion: orkestra.orkspace.io/v1
        kind: Katalog
        metadata: {name: widgets}
        spec:
          crds:
            widget:
              crdFile: ./crd.yaml
              operatorBox:
                cross:
                  - crd: widget
                    as: db
                    selector: {name: "{{ .spec.database }}"}
                onReconcile:
                  configMaps:
                    - name: "{{ .metadata.name }}-numbers"
                      data:
                        own: "{{ .spec.size }}|{{ .spec.huge }}|{{ .spec.half }}"
                        cross: "{{ .cross.db.spec.size }}"
        """
    write_repo(tmp_path, {"katalog.yaml": katalog, "crd.yaml": CRD,
                          "db.yaml": widget("db", size="2000000.0"),
                          "app.yaml": widget("app", database="db", size="1000000.0",
                                             huge="123456789012345678901234567890",
                                             half="2.5")})
    objs = by_name(render(tmp_path))
    assert objs["ConfigMap/default/app-numbers"]["data"] == {
        "own": "1000000|1.2345678901234568e+29|2.5", "cross": "2000000"}


def test_custom_metadata_labels_as_a_key_value_list_render_with_a_portability_warning(
        tmp_path: Path) -> None:
    box = ("        onCreate:\n          custom:\n"
           "            - apiVersion: example.com/v1\n              kind: Thing\n"
           "              metadata:\n                name: \"{{ .metadata.name }}-thing\"\n"
           "                labels:\n                  - {key: tier, value: cache}\n")
    root = write_repo(tmp_path, {"crd.yaml": CRD, "apps/a.yaml": widget("a"),
                                 "katalog.yaml": KATALOG.split("        onCreate:\n")[0]
                                 + box})
    rendered = render_catalog(load_repository(root))
    assert not rendered.errors, rendered.errors
    thing = next(o for o in rendered.objects if o.ref.kind == "Thing")
    assert thing.body["metadata"]["labels"]["tier"] == "cache"
    assert [w for w in rendered.warnings if "custom[0].metadata.labels not portable to "
            "Orkestra" in w and "Orkestra reads a map: labels: {key: value}" in w]
