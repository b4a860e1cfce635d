"""`orksync render REPO --diff-against REV` on real git repositories (`python -m orksync`,
as a CI job runs it): the per-object change between a revision and the working tree,
Secrets masked, exit codes, the markdown of a pull request comment; and the pure
comparison (orksync.rendered.diff) it formats."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from orksync.model import ObjRef, Origin, RenderedObject, RenderedSet, WritePolicy
from orksync.rendered.diff import ObjectDiff, compare_rendered, markdown
from tests.helpers import CRD, ROOT, katalog, widget, write_repo

LITERAL = "literal-api-key-0f3e9a71"  # a Secret value written in the repository itself

APP_KATALOG = katalog("""\
        onReconcile:
          deployments:
            - name: "{{ .metadata.name }}"
              image: "{{ .spec.image }}"
              port: "8080"
          secrets:
            - name: "{{ .metadata.name }}-credentials"
              once: true
              data:
                apiKey: "{{ .spec.apiKey }}"
                password: "{{ randomAlphanumeric 24 }}"
""")


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "orksync", *args], capture_output=True,
                          text=True, timeout=120, cwd=cwd, env=env)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t",
                           "-c", "user.email=t@example.com", *args], check=True,
                          capture_output=True, text=True).stdout.strip()


def commit(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)
    return git(repo, "rev-parse", "HEAD")


def two_commits(tmp_path: Path, *, subdir: str = "") -> tuple[Path, Path, str]:
    """(git top, repository directory, the first commit's sha). The second commit changes
    the image of `web`, removes the custom resource `old`, adds `new`; every Secret holds
    a generated password and LITERAL (also in each custom resource's spec)."""
    top = tmp_path / "git"
    top.mkdir()
    git(top, "init", "-q")
    repo = top / subdir if subdir else top
    spec = {"image": "nginx:1.0", "apiKey": LITERAL}
    write_repo(repo, {"katalog.yaml": APP_KATALOG, "crd.yaml": CRD,
                      "web.yaml": widget("web", "shop", **spec),
                      "old.yaml": widget("old", "shop", **spec)})
    first = commit(top, "first")
    write_repo(repo, {"web.yaml": widget("web", "shop", **{**spec, "image": "nginx:1.1"}),
                      "new.yaml": widget("new", "shop", **spec)})
    (repo / "old.yaml").unlink()
    commit(top, "second")
    return top, repo, first


def leaks(*texts: str) -> list[str]:
    found = []
    for text in texts:
        found += [bad for bad in (LITERAL, "<generate:", "randomAlphanumeric") if bad in text]
    return found


def test_a_pull_request_s_change_per_object_with_secrets_masked(tmp_path: Path) -> None:
    top, repo, first = two_commits(tmp_path)
    status_before = git(top, "status", "--porcelain")
    head_before = git(top, "rev-parse", "HEAD")
    text = run("render", str(repo), "--diff-against", first)
    as_json = run("render", str(repo), "--diff-against", "HEAD~1", "--format", "json")
    as_md = run("render", str(repo), "--diff-against", first[:10], "--format", "markdown")
    for result in (text, as_json, as_md):
        assert result.returncode == 1, result.stderr
    assert leaks(text.stdout, text.stderr, as_json.stdout, as_json.stderr, as_md.stdout,
                 as_md.stderr) == []
    doc = json.loads(as_json.stdout)
    actions = {c["object"]: c["action"] for c in doc["changes"]}
    assert actions == {
        "Deployment/shop/web": "changed",
        "Deployment/shop/new": "created", "Secret/shop/new-credentials": "created",
        "Widget.test.orksync.io/shop/new": "created",
        "Deployment/shop/old": "deleted", "Secret/shop/old-credentials": "deleted",
        "Widget.test.orksync.io/shop/old": "deleted",
        "Widget.test.orksync.io/shop/web": "changed"}, actions
    assert doc["summary"] == {"created": 3, "changed": 2, "deleted": 3}
    assert doc["revision"] == first and doc["errors"] == []
    web = next(c["diff"] for c in doc["changes"] if c["object"] == "Deployment/shop/web")
    assert "-        image: nginx:1.0\n" in web and "+        image: nginx:1.1\n" in web
    # a created Secret shows its keys, never a value or the generator's placeholder
    created = next(c["diff"] for c in doc["changes"]
                   if c["object"] == "Secret/shop/new-credentials")
    assert '+  apiKey: "***"\n' in created and '+  password: "***"\n' in created
    assert "+++ worktree/Deployment/shop/web" in text.stdout
    assert f"--- {first[:7]}/Deployment/shop/old\n+++ /dev/null" in text.stdout
    # the repository is read from its objects: no checkout, HEAD and index untouched
    assert git(top, "status", "--porcelain") == status_before
    assert git(top, "rev-parse", "HEAD") == head_before


def test_no_difference_exits_0_and_prints_nothing(tmp_path: Path) -> None:
    _, repo, _ = two_commits(tmp_path, subdir="deploy/apps")
    same = run("render", str(repo), "--diff-against", "HEAD")
    assert (same.returncode, same.stdout) == (0, ""), same.stderr
    assert "created=0 changed=0 deleted=0 errors=0" in same.stderr
    md = run("render", str(repo), "--diff-against", "HEAD", "--format", "markdown")
    assert md.returncode == 0 and "No rendered object changes." in md.stdout


def test_a_secret_value_changed_in_git_is_named_by_key_only(tmp_path: Path) -> None:
    _, repo, _ = two_commits(tmp_path)
    write_repo(repo, {"web.yaml": widget("web", "shop", image="nginx:1.1",
                                         apiKey="another-literal-7c1d2e")})
    result = run("render", str(repo), "--diff-against", "HEAD", "--format", "json")
    assert result.returncode == 1, result.stderr
    changes = {c["object"]: c["diff"] for c in json.loads(result.stdout)["changes"]}
    assert "# data.apiKey changed\n" in changes["Secret/shop/web-credentials"]
    # the new value is a Secret value too: scrubbed from the custom resource's diff
    assert "another-literal-7c1d2e" not in result.stdout + result.stderr
    assert "+  apiKey: ***\n" in changes["Widget.test.orksync.io/shop/web"]
    assert leaks(result.stdout, result.stderr) == []


def test_the_subdirectory_at_the_revision_is_compared_and_export_ignore_does_not_hide_files(
        tmp_path: Path) -> None:
    """REPO inside a larger repository: the same directory at REV. A `.gitattributes`
    export-ignore (which `git archive` would honour) leaves nothing out."""
    top, repo, _ = two_commits(tmp_path, subdir="deploy/apps")
    write_repo(top, {".gitattributes": "deploy/** export-ignore\n",
                     "elsewhere/x.yaml": widget("elsewhere", "other")})
    commit(top, "attributes")
    same = run("render", str(repo), "--diff-against", "HEAD")
    assert (same.returncode, same.stdout) == (0, ""), same.stderr
    result = run("render", str(repo), "--diff-against", "HEAD~2", "--format", "json")
    assert result.returncode == 1, result.stderr
    assert json.loads(result.stdout)["summary"] == {"created": 3, "changed": 2, "deleted": 3}


def test_a_symbolic_link_reads_its_target_as_the_revision_holds_it(tmp_path: Path) -> None:
    """`apps/web.yaml` links to `../shared/web.yaml`, outside REPO but inside the
    repository: REV's render reads the target at REV (not the temporary directory's
    surroundings, not the working tree)."""
    top = tmp_path / "git"
    write_repo(top, {"apps/katalog.yaml": APP_KATALOG, "apps/crd.yaml": CRD,
                     "shared/web.yaml": widget("web", "shop", image="nginx:1.0",
                                               apiKey=LITERAL)})
    (top / "apps" / "web.yaml").symlink_to("../shared/web.yaml")
    (top / "apps" / "gone.yaml").symlink_to("../shared/gone.yaml")
    git(top, "init", "-q")
    first = commit(top, "first")
    write_repo(top, {"shared/web.yaml": widget("web", "shop", image="nginx:1.1",
                                               apiKey=LITERAL)})
    (top / "apps" / "gone.yaml").unlink()
    commit(top, "second")
    result = run("render", str(top / "apps"), "--diff-against", first, "--format", "json")
    # a link dangling at REV is left out, as the working tree's loader leaves one out
    assert result.returncode == 1, result.stderr
    doc = json.loads(result.stdout)
    assert doc["errors"] == [] and doc["summary"] == {"created": 0, "changed": 2,
                                                      "deleted": 0}
    web = next(c["diff"] for c in doc["changes"] if c["object"] == "Deployment/shop/web")
    assert "-        image: nginx:1.0\n" in web and "+        image: nginx:1.1\n" in web
    same = run("render", str(top / "apps"), "--diff-against", "HEAD")
    assert (same.returncode, same.stdout) == (0, ""), same.stderr


def test_a_directory_the_revision_does_not_hold_is_all_created(tmp_path: Path) -> None:
    top, _, first = two_commits(tmp_path)
    write_repo(top, {"later/web.yaml": widget("web", "shop", image="nginx:1.0"),
                     "later/katalog.yaml": APP_KATALOG, "later/crd.yaml": CRD})
    commit(top, "later")
    result = run("render", str(top / "later"), "--diff-against", first, "--format", "json")
    assert result.returncode == 1, result.stderr
    assert "does not exist at" in result.stderr
    assert {c["action"] for c in json.loads(result.stdout)["changes"]} == {"created"}


def test_errors_exit_2_and_a_broken_custom_resource_is_never_shown_as_deleted(
        tmp_path: Path) -> None:
    _, repo, _ = two_commits(tmp_path)
    unknown = run("render", str(repo), "--diff-against", "no-such-branch")
    assert unknown.returncode == 2 and "'no-such-branch': no such revision" in unknown.stderr
    # in the chosen format too, so a CI job can post it
    as_json = run("render", str(repo), "--diff-against", "no-such-branch", "--format", "json")
    assert as_json.returncode == 2
    assert "no such revision" in json.loads(as_json.stdout)["errors"][0]
    as_md = run("render", str(repo), "--diff-against", "no-such-branch", "--format",
                "markdown")
    assert as_md.returncode == 2 and "**Errors**" in as_md.stdout
    assert as_md.stdout.startswith("### orksync: rendered change from no-such-branch to ")
    outside = run("render", str(tmp_path / "git"), "--diff-against", "HEAD",
                  cwd=tmp_path)
    assert outside.returncode in (0, 1), outside.stderr  # the top itself is fine
    plain = tmp_path / "plain"
    write_repo(plain, {"katalog.yaml": APP_KATALOG, "crd.yaml": CRD})
    not_git = run("render", str(plain), "--diff-against", "HEAD")
    assert not_git.returncode == 2 and "not inside a git repository" in not_git.stderr
    # `web` no longer loads (its spec is a list): its objects are withheld, not deleted
    (repo / "web.yaml").write_text(widget("web", "shop").replace("spec:\n  {}", "spec: [1]"))
    broken = run("render", str(repo), "--diff-against", "HEAD", "--format", "json")
    assert broken.returncode == 2, broken.stderr
    doc = json.loads(broken.stdout)
    assert doc["errors"] and all(e.startswith("working tree: ") for e in doc["errors"])
    assert "web.yaml" in doc["errors"][0], doc["errors"]
    assert doc["summary"]["deleted"] == 0
    assert "Deployment/shop/web" in doc["withheld"]
    assert leaks(broken.stdout, broken.stderr) == []


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    _, repo, _ = two_commits(tmp_path)
    for args in (("render", str(repo)),
                 ("render", str(repo), "--diff-against", "HEAD", "-o", str(tmp_path / "o")),
                 ("render", str(repo), "-o", str(tmp_path / "o"), "--format", "markdown")):
        result = run(*args)
        assert result.returncode == 2 and "error:" in result.stderr, (args, result.stderr)


def test_markdown_is_a_summary_table_then_one_collapsed_section_per_object(
        tmp_path: Path) -> None:
    _, repo, first = two_commits(tmp_path)
    result = run("render", str(repo), "--diff-against", first, "--format", "markdown")
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"### orksync: rendered change from {first[:7]} to ")
    assert lines[2:5] == ["| created | changed | deleted | errors |",
                          "|---:|---:|---:|---:|", "| 3 | 2 | 3 | 0 |"]
    summaries = re.findall(r"<summary>(\w+) <code>([^<]+)</code></summary>", result.stdout)
    assert len(summaries) == 8 == result.stdout.count("<details>") \
        == result.stdout.count("</details>") == result.stdout.count("```diff")
    assert ("changed", "Deployment/shop/web") in summaries
    assert ("deleted", "Deployment/shop/old") in summaries


def test_a_diff_holding_backticks_cannot_close_its_code_fence() -> None:
    ref = ObjRef(api_version="v1", kind="ConfigMap", namespace="ns", name="c")
    change = ObjectDiff(ref, "changed", "--- a\n+++ b\n@@ -1 +1 @@\n-x: ```\n+x: ````\n")
    text = markdown([change], ["boom <b>"], title="t")
    assert "`````diff\n" in text and "\n`````\n" in text
    assert "<summary>changed <code>ConfigMap/ns/c</code></summary>" in text
    assert "**Errors**" in text and "boom <b>" in text


def rendered(body: dict[str, object], policy: WritePolicy = WritePolicy.APPLY,
             **directives: object) -> RenderedSet:
    return RenderedSet(objects=(RenderedObject(
        ref=ObjRef.of(body), body=body, policy=policy, origin=Origin(file="x.yaml"),
        stage=0, directives=directives),))


def test_the_write_policy_and_directives_are_part_of_an_object_s_change() -> None:
    secret = {"apiVersion": "v1", "kind": "Secret",
              "metadata": {"name": "s", "namespace": "ns"},
              "stringData": {"token": "<generate:randomHex:16>"}}
    base = rendered(secret, WritePolicy.CREATE, generated={"token": "<generate:randomHex:16>"})
    assert compare_rendered(base, base).changes == []
    policy = compare_rendered(base, rendered(secret, WritePolicy.APPLY,
                                             generated={"token": "<generate:randomHex:16>"}))
    assert [c.action for c in policy.changes] == ["changed"]
    assert "-# orksync policy: create-if-absent\n+# orksync policy: apply\n" in \
        policy.changes[0].text
    longer = {**secret, "stringData": {"token": "<generate:randomHex:32>"}}
    rotated = compare_rendered(base, rendered(longer, WritePolicy.CREATE, rotateAfter="720h",
                                              generated={"token": "<generate:randomHex:32>"}))
    text = rotated.changes[0].text
    assert "# data.token changed (its generator)\n" in text and "+# orksync   rotateAfter:" in text
    assert "randomHex" not in text and "<generate:" not in text
