"""The command line's habits that need no cluster: --version, global flags on either side of
the command, `sync` without `--once`, shell completion (bash sourcing the script and
completing), colour only on a terminal. What reads the cluster is in
tests/cli/test_cli_habits_cluster.py."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from orksync import __version__
from orksync.cli import build_parser
from orksync.cli.colour import colour_column, colour_diff
from tests.helpers import ROOT, unavailable

COMMANDS = ("render", "validate", "apply", "sync", "diff", "rotate", "agent", "status",
            "tree", "install", "reconcile", "suspend", "resume", "history", "version",
            "completion")


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orksync", *args], capture_output=True,
                          text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})


def test_version_flag_and_command() -> None:
    for args in (("--version",), ("version",)):
        result = run(*args)
        assert (result.returncode, result.stdout) == (0, f"orksync {__version__}\n"), args


@pytest.mark.parametrize("argv", [
    ["--kubeconfig", "K", "--context", "C", "--log-format", "json", "status"],
    ["status", "--kubeconfig", "K", "--context", "C", "--log-format", "json"],
    ["--kubeconfig", "K", "status", "--context", "C", "--log-format", "json"],
])
def test_global_flags_before_or_after_the_command(argv: list[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORKSYNC_KUBECONFIG", "from-the-environment")
    args = build_parser().parse_args(argv)
    assert (args.kubeconfig, args.context, args.log_format) == ("K", "C", "json")


@pytest.mark.parametrize("command", [["sync", "repo"], ["diff", "repo"], ["apply", "dir"],
                                     ["rotate"], ["agent", "--repo-url", "u"],
                                     ["tree", "Widget/ns/w"],
                                     ["render", "repo", "--live", "-o", "out"]])
def test_every_command_that_reads_the_cluster_takes_the_global_flags_first(
        command: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ORKSYNC_KUBECONFIG", raising=False)
    args = build_parser().parse_args(["--kubeconfig", "K", "--context", "C", *command])
    assert (args.kubeconfig, args.context) == ("K", "C")
    default = build_parser().parse_args(command)
    assert (default.kubeconfig, default.context) == (None, None)


def test_sync_needs_no_once_and_still_takes_it() -> None:
    assert build_parser().parse_args(["sync", "repo"]).command == "sync"
    assert build_parser().parse_args(["sync", "repo", "--once"]).once is True


def test_namespace_and_all_namespaces_exclude_each_other() -> None:
    parser = build_parser()
    assert parser.parse_args(["status", "-n", "a"]).namespace == "a"
    assert parser.parse_args(["status", "-A"]).namespace is None
    assert parser.parse_args(["diff", "repo", "--namespace", "b"]).namespace == "b"
    both = run("status", "-n", "a", "-A")
    assert both.returncode == 2 and "not allowed with argument" in both.stderr


def bash_complete(script: str, *words: str) -> list[str]:
    """What bash offers after `words` (the last one being completed), from `script`."""
    quoted = " ".join(f"'{w}'" for w in words)
    program = (f"source {script} && COMP_WORDS=({quoted}) && "
               f"COMP_CWORD={len(words) - 1} && _shtab_orksync && "
               "printf '%s\\n' \"${COMPREPLY[@]}\"")
    result = subprocess.run(["bash", "--norc", "--noprofile", "-c", program],
                            capture_output=True, text=True, timeout=60, check=True)
    assert result.stderr == ""
    return result.stdout.split()


def test_bash_sources_the_completion_and_completes_commands_flags_and_choices(
        tmp_path: Path) -> None:
    result = run("completion", "bash")
    assert result.returncode == 0, result.stderr
    script = tmp_path / "orksync.bash"
    script.write_text(result.stdout)
    sourced = subprocess.run(["bash", "--norc", "--noprofile", "-c",
                              f"set -e; source {script}; complete -p orksync"],
                             capture_output=True, text=True, timeout=60)
    assert sourced.returncode == 0 and sourced.stderr == "", sourced.stderr
    assert "_shtab_orksync orksync" in sourced.stdout
    assert bash_complete(str(script), "orksync", "") == list(COMMANDS)
    assert bash_complete(str(script), "orksync", "--kubeconfig", "k", "st") == ["status"]
    assert {"--namespace", "--all-namespaces", "--kubeconfig"} <= set(
        bash_complete(str(script), "orksync", "status", "--"))
    assert bash_complete(str(script), "orksync", "render", "r", "--format", "") == [
        "text", "markdown", "json"]


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_completions_name_every_command(shell: str, tmp_path: Path) -> None:
    result = run("completion", shell)
    assert result.returncode == 0, result.stderr
    for command in COMMANDS:
        assert command in result.stdout
    binary = shutil.which(shell)
    if binary is None:
        unavailable(f"{shell} is not installed (Debian: {shell}): its syntax check is not run")
    script = tmp_path / f"orksync.{shell}"
    script.write_text(result.stdout)
    check = subprocess.run([binary, "-n", str(script)], capture_output=True, text=True,
                           timeout=60)
    assert check.returncode == 0, check.stderr


def test_colour_marks_diff_lines_and_table_words_without_moving_columns() -> None:
    text = "--- a/x\n+++ b/x\n# note\n@@ -1 +1 @@\n-old\n+new\n same\n"
    painted = colour_diff(text)
    assert "\x1b[31m-old\x1b[0m\n" in painted and "\x1b[32m+new\x1b[0m\n" in painted
    assert "\n same\n" in painted
    assert re.sub(r"\x1b\[[0-9]+m", "", painted) == text  # only escapes were added
    table = "KIND   HEALTH    AGE\nWidget Current   1s\nWidget Failed    2s\n"
    coloured = colour_column(table, "HEALTH", {"Current": "32", "Failed": "31"})
    assert coloured.splitlines()[1] == "Widget \x1b[32mCurrent\x1b[0m   1s"
    assert coloured.splitlines()[2] == "Widget \x1b[31mFailed\x1b[0m    2s"
