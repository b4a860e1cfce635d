"""Coverage-guided fuzzing with atheris (libFuzzer), beside the hypothesis tests: not run
by pytest and not a dependency. atheris 3.0.0 installs from PyPI as a cp311 wheel; use a
throwaway environment:

    python -m venv --system-site-packages /tmp/fuzz && /tmp/fuzz/bin/pip install atheris
    PYTHONPATH=. /tmp/fuzz/bin/python -m tests.corpus.atheris_fuzz gotemplate \\
        -max_total_time=300 -timeout=10 -rss_limit_mb=2048 /tmp/fuzz-corpus-go
    PYTHONPATH=. /tmp/fuzz/bin/python -m tests.corpus.atheris_fuzz katalog \\
        -max_total_time=300 -timeout=30 -rss_limit_mb=2048 /tmp/fuzz-corpus-katalog

Targets: `gotemplate` (the Go-template lexer, parser, compiler and runtime with the
Katalog function library; the same checks as tests/templates/test_fuzz_gotemplate.py) and
`katalog` (one file of tests/corpus/good replaced by the input, then load, render and
write; the same checks as tests/katalog/test_fuzz_katalog.py). A finding is an exception other
than the engines' own errors, or an error showing Python internals; libFuzzer's -timeout
catches hangs. The corpus directory is seeded with the valid inputs of the hypothesis
tests.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path


def _seed(corpus: Path, texts: list[str]) -> None:
    corpus.mkdir(parents=True, exist_ok=True)
    for i, text in enumerate(texts):
        (corpus / f"seed-{i}").write_bytes(text.encode("utf-8", "surrogateescape"))


def _gotemplate() -> tuple[Callable[[bytes], None], list[str]]:
    from orksync.render.gotemplate import GoTemplateError
    from tests.corpus import python_internals
    from tests.templates.test_fuzz_gotemplate import DATA, ENGINE, SEEDS, UNEXPECTED

    def target(data: bytes) -> None:
        source = data.decode("utf-8", "surrogateescape")
        for call in (lambda: ENGINE.check(source), lambda: ENGINE.referenced_functions(source),
                     lambda: ENGINE.render(source, DATA, orkestra=False),
                     lambda: ENGINE.render_value(source, DATA)):
            try:
                call()
            except GoTemplateError as err:
                if UNEXPECTED in err.message or python_internals(err.message):
                    raise AssertionError(f"{err.message!r} for {source!r}") from err
    return target, SEEDS


def _katalog() -> tuple[Callable[[bytes], None], list[str]]:
    import shutil
    import tempfile

    from orksync.errors import InputError
    from orksync.katalog.loader import load_repository
    from orksync.render.engine import render_catalog
    from orksync.rendered.directory import write_rendered
    from tests.corpus import CORPUS, python_internals

    work = Path(tempfile.mkdtemp(prefix="atheris-katalog-"))
    repo = work / "repo"
    shutil.copytree(CORPUS / "good", repo)
    files = sorted(str(p.relative_to(repo)) for p in repo.rglob("*.yaml"))
    originals = {name: (repo / name).read_bytes() for name in files}

    def target(data: bytes) -> None:
        if not data:
            return
        name = files[data[0] % len(files)]
        (repo / name).write_bytes(data[1:])
        try:
            rendered = render_catalog(load_repository(repo))
            write_rendered(rendered, work / "out")
            for err in rendered.errors:
                message = str(err)
                if not isinstance(err, InputError) or python_internals(message) \
                        or not (repo / err.file).is_file():
                    raise AssertionError(message)
        finally:
            (repo / name).write_bytes(originals[name])

    seeds = [chr(i) + originals[name].decode() for i, name in enumerate(files)]
    return target, seeds


def main() -> None:
    import atheris

    which, args = sys.argv[1], [sys.argv[0], *sys.argv[2:]]
    with atheris.instrument_imports(include=["orksync"]):
        target, seeds = {"gotemplate": _gotemplate, "katalog": _katalog}[which]()
    corpus = [a for a in args[1:] if not a.startswith("-")]
    if corpus:
        _seed(Path(corpus[0]), seeds)
    atheris.Setup(args, target)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
