"""Files the docs link or name exist (a link to docs/replay.md, which never existed, sent a new
operator nowhere)."""

from __future__ import annotations

import re

from tests.docs.commands import ROOT, doc_files

_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
_NAMED = re.compile(r"`((?:docs|emil|tools|tests|prompts)/[A-Za-z0-9_./-]+\.(?:md|py|js|json|toml|jsonl|jinja|png|j2))`")


def test_linked_and_named_files_exist() -> None:
    missing = []
    for path in doc_files():
        text = path.read_text(encoding="utf-8")
        for target in _LINK.findall(text):
            if "://" in target:
                continue
            if not (path.parent / target).exists() and not (ROOT / target).exists():
                missing.append(f"{path.relative_to(ROOT)}: link {target}")
        for named in _NAMED.findall(text):
            if not (ROOT / named).exists():
                missing.append(f"{path.relative_to(ROOT)}: names {named}")
    assert not missing, "\n".join(missing)
