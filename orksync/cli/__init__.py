"""The command line: render (and the rendered change against a git revision), validate,
apply, sync, diff, rotate, agent, status, tree, completion, version.

Imperative shell: parses flags, calls the pipeline, prints ChangeSets and errors, maps
results to exit codes (0 success, 1 errors or failed objects, 2 usage). The global flags
(`orksync.cli.flags.add_global_flags`) are accepted before and after every command. This
module assembles the parser and dispatches; each command's flags and code live in a module
of this package (`render`, `sync`, `diff`, `rotate`, `overview`, `install`) or of the agent
(`orksync.agent.command`, `orksync.agent.verbs`).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

from orksync import __version__
from orksync.agent.command import add_agent_parser, cmd_agent
from orksync.agent.verbs import (
    add_sync_parsers,
    cmd_history,
    cmd_reconcile,
    cmd_status_with_syncs,
    cmd_suspend,
    sync_overview,
)
from orksync.cli.common import connect
from orksync.cli.diff import add_diff_parser, cmd_diff
from orksync.cli.flags import (
    add_adopt_flag,
    add_cluster_flags,
    add_global_flags,
    add_render_flags,
    add_sync_flags,
    seconds,
)
from orksync.cli.install import add_install_parser, cmd_install
from orksync.cli.overview import add_overview_parsers, cmd_status, cmd_tree
from orksync.cli.render import add_render_parsers, cmd_render, cmd_validate
from orksync.cli.rotate import add_rotate_parser, cmd_rotate
from orksync.cli.sync import add_apply_parsers, cmd_apply, cmd_sync
from orksync.errors import OrksyncError
from orksync.runtime.logs import setup_logging
from orksync.runtime.progress import progress_for

__all__ = ["build_parser", "main"]

log = logging.getLogger("orksync")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="orksync",
        description="Render Orkestra Katalogs from a Git repository into Kubernetes "
                    "manifests and sync them to a cluster.")
    parser.add_argument("--version", action="version", version=f"orksync {__version__}")
    add_global_flags(parser, suppress=False)
    common = argparse.ArgumentParser(add_help=False)
    add_global_flags(common, suppress=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    original = sub.add_parser

    def add_parser(name: str, **kwargs: object) -> argparse.ArgumentParser:
        return original(name, parents=[common], **kwargs)  # type: ignore[arg-type]

    sub.add_parser = add_parser  # type: ignore[method-assign]

    add_render_parsers(sub)
    add_apply_parsers(sub)
    add_diff_parser(sub)
    add_rotate_parser(sub)

    add_agent_parser(sub, common_flags=(add_cluster_flags, add_sync_flags, add_render_flags,
                                        add_adopt_flag),
                     seconds=seconds)

    add_overview_parsers(sub)

    add_install_parser(sub)
    add_sync_parsers(sub, common_flags=(add_cluster_flags,), seconds=seconds)

    sub.add_parser("version", help="print the version")

    p = sub.add_parser("completion", help="print a shell completion script",
                       description="Print the completion script of SHELL for orksync's "
                       "commands and flags. bash: `source <(orksync completion bash)`; zsh: "
                       "`orksync completion zsh > \"${fpath[1]}/_orksync\"`; fish: `orksync "
                       "completion fish > ~/.config/fish/completions/orksync.fish`.")
    p.add_argument("shell", choices=("bash", "zsh", "fish"))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The program. Called without `argv` (the console script, `python -m orksync`), a
    command other than `agent` ends the process when it is done (`_exit_now`); called with
    `argv` (tests, embedding), it returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    # the agent's plain lines carry a timestamp (a long-running log, read later); a one-shot
    # command's do not (its summary line says how long it took; `--log-format json` has them)
    setup_logging(level=args.log_level, fmt=args.log_format,
                  timestamps=args.command == "agent")
    if args.command is None:
        parser.print_help()
        return 2
    try:
        with progress_for(args.log_format, wanted=args.command in ("render", "apply", "sync")):
            code = int(COMMANDS[args.command](args))
    except OrksyncError as err:
        log.error("error: %s", err)
        code = err.exit_code
    except KeyboardInterrupt:
        code = 130
    if argv is None and args.command != "agent":
        _exit_now(code)
    return code


def _exit_now(code: int) -> None:
    """End a one-shot command without the interpreter's teardown: the process is over,
    and clearing every module and running a last collection is work nobody sees the
    result of, at the end of every command. Logs and output are flushed first;
    a stream that cannot be flushed (a closed pipe) is left to the interpreter's own exit,
    which reports it. Nothing orksync runs registers exit handlers; the threads still
    alive here are the prefetch's daemon threads, idle."""
    logging.shutdown()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        return
    os._exit(code)


def cmd_version(args: argparse.Namespace) -> int:
    print(f"orksync {__version__}")
    return 0


def cmd_completion(args: argparse.Namespace) -> int:
    """The completion script of `args.shell`, made by shtab from this parser: every
    command, every flag and the choices of each."""
    import shtab

    sys.stdout.write(shtab.complete(build_parser(), shell=args.shell))
    return 0


COMMANDS = {
    "render": cmd_render,
    "validate": cmd_validate,
    "agent": lambda args: cmd_agent(args, connect(args, reach=False)),
    "apply": cmd_apply,
    "diff": cmd_diff,
    "sync": cmd_sync,
    "rotate": cmd_rotate,
    "status": lambda args: cmd_status_with_syncs(args, connect, cmd_status),
    "reconcile": lambda args: cmd_reconcile(args, connect),
    "suspend": lambda args: cmd_suspend(args, connect, suspend=True),
    "resume": lambda args: cmd_suspend(args, connect, suspend=False),
    "history": lambda args: cmd_history(args, connect),
    "tree": lambda args: cmd_tree(args, connect, syncs_view=sync_overview),
    "install": lambda args: cmd_install(args, connect),
    "version": cmd_version,
    "completion": cmd_completion,
}
