"""The docs point at tests that exist: every `tests/<file>.py::<name>` reference in README.md
and docs/ names a test function defined in that file, so a renamed or deleted test cannot
leave a table cell claiming a proof that is gone."""

from __future__ import annotations

import re

from tests.helpers import ROOT

REFERENCE = re.compile(r"tests/([A-Za-z0-9_/]+\.py)::([A-Za-z_][A-Za-z0-9_]*)")


def references() -> list[tuple[str, str, str]]:
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return [(doc.name, match[1], match[2]) for doc in docs
            for match in REFERENCE.finditer(doc.read_text())]


def test_every_test_named_in_the_docs_exists() -> None:
    refs = references()
    assert len(refs) > 40  # the semantics matrix and the differences table name many
    missing = []
    for doc, path, name in refs:
        source = ROOT / "tests" / path
        defined = source.is_file() and re.search(rf"^(async )?def {name}\(", source.read_text(),
                                                 re.MULTILINE)
        if not defined:
            missing.append(f"{doc}: tests/{path}::{name}")
    assert not missing, "docs name tests that do not exist:\n" + "\n".join(sorted(set(missing)))
