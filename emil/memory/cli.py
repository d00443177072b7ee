"""``run_emil.py memory show | recall WORDS | forget NAME | export``: the operator's view of Emil's memory.

- ``show``: the notes as the model reads them (the pinned block, at ``--tokens``, counted in
  tokens of the family the settings name, else qwen3.6, said so), then every note, one a line,
  and how many lines the archive holds. A data_dir Emil has not used yet: "no notes yet", exit 0
  (an empty memory is an answer).
- ``recall WORDS``: the archive's lines that match, best first, as the model's ``recall`` tool
  reads them.
- ``forget NAME``: delete every note about NAME (a player, place or goal; any case), every note
  that player told, and every archive line they said. Allowed while Emil runs (SQLite locks the
  write); the running Emil drops them from its prompt at its next trim.
- ``export``: every note as JSON on stdout (nothing else is written there; no notes: an empty list).

``data_dir`` comes from the settings as for ``live`` (emil.toml < EMIL_DATA_DIR < --data-dir).
A mistake (unknown name, a corrupt database, a bad flag) is one line on stderr and exit code 2;
these commands never take the running Emil's lock and never create a database.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from emil.cli_args import positive_int
from emil.config import Settings, load_settings
from emil.exceptions import ConfigurationError
from emil.memory.archive import ARCHIVE_FILE, Archive
from emil.memory.render import render_notes
from emil.memory.retrieval import format_line
from emil.memory.store import DB_FILE, SCHEMA_VERSION, MemoryStore
from emil.model.family import DEFAULT_FAMILY
from emil.model.resolve import get_token_counter, resolve_family
from emil.model.tokens import TokenCounter

__all__ = ["cli_main"]

EXIT_MISTAKE = 2
_FALLBACK = DEFAULT_FAMILY
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _UsageError(message)


def _parser() -> _Parser:
    p = _Parser(prog="run_emil.py memory", description="Emil's notes that survive a restart.", allow_abbrev=False)
    p.add_argument("--data-dir", type=Path, help="the notes' directory (default: the data_dir setting)")
    p.add_argument("--config", metavar="PATH", help="settings file (default ./emil.toml if present)")
    sub = p.add_subparsers(dest="action", required=True, parser_class=_Parser)
    show = sub.add_parser("show", help="the pinned block as the model reads it, then every note")
    show.add_argument("--tokens", type=positive_int, default=None, help="bound of the block (default: the memory_tokens setting)")
    show.add_argument("--tokenizer", default=None, help="counter for the bound: a model name or directory (default: the family the settings name, else qwen3.6)")
    recall = sub.add_parser("recall", help="the archive's lines matching WORDS, best first")
    recall.add_argument("words", nargs="+")
    recall.add_argument("--limit", type=positive_int, default=20, help="at most this many lines (20)")
    forget = sub.add_parser("forget", help="delete every note about NAME (player, place or goal) and the lines they said")
    forget.add_argument("name")
    sub.add_parser("export", help="every note as JSON on stdout")
    return p


def _out(text: str) -> None:
    sys.stdout.write(text + "\n")


def _fail(message: str) -> int:
    sys.stderr.write(f"emil memory: {' '.join(message.split())}\n")
    return EXIT_MISTAKE


def _printable(text: str) -> str:
    """Notes hold players' words: no terminal escape sequences reach the operator's screen."""
    return _CONTROL.sub("?", text)


def _when(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t))


def cli_main(argv: Sequence[str]) -> int:
    """Run one memory command; returns the exit code."""
    try:
        args = _parser().parse_args(list(argv))
    except _UsageError as e:
        return _fail(f"{e} (see run_emil.py memory --help)")
    try:
        settings = load_settings({"data_dir": args.data_dir}, config_file=args.config).settings
        return _run(args, settings)
    except ConfigurationError as e:
        return _fail(str(e))


def _run(args: argparse.Namespace, settings: Settings) -> int:
    counter, why = _counter(args.tokenizer, settings) if args.action == "show" else (None, "")
    if args.action == "recall":
        return _recall(settings.data_dir, args.words, args.limit)
    if not (settings.data_dir / DB_FILE).is_file():
        return _no_notes(args, settings.data_dir)
    store = MemoryStore.open_existing(settings.data_dir, readonly=args.action != "forget")
    try:
        if args.action == "export":
            _out(json.dumps(store.export(), ensure_ascii=False, indent=2))
            return 0
        if args.action == "forget":
            return _forget(store, args.name)
        assert counter is not None
        return _show(store, settings.memory_tokens if args.tokens is None else args.tokens, counter, why)
    finally:
        store.close()


def _counter(tokenizer: str | None, s: Settings) -> tuple[TokenCounter, str]:
    """The counter of the bound and where it came from: ``--tokenizer``, else the family the
    settings name, resolved as startup's check 0 does from the settings alone (model_family,
    tokenizer, model), else qwen3.6, said so: the served model is not asked."""
    if tokenizer is not None:
        return get_token_counter(tokenizer), f"--tokenizer {tokenizer}"
    try:
        resolved = resolve_family(
            setting=s.model_family, served=(None, None if s.model == "auto" else s.model),
            tokenizer=s.tokenizer, chat_template=str(s.chat_template) if s.chat_template else None,
        )
    except ConfigurationError as e:
        if s.model_family.strip().lower() != "server" and "no model family matches" not in str(e):
            raise  # a family named wrongly: the same error as at start
        return get_token_counter(_FALLBACK), (
            f"the settings name no model family (model_family, tokenizer or model): counted as {_FALLBACK}; "
            "set one of them or pass --tokenizer for the served model's count"
        )
    return resolved.family.tokenizer(), f"model family {resolved.family.name}, {resolved.source}"


def _no_notes(args: argparse.Namespace, data_dir: Path) -> int:
    """A data_dir without a notes database: an empty memory, said as such."""
    path = data_dir / DB_FILE
    if args.action == "export":
        _out(json.dumps({"schema_version": SCHEMA_VERSION, "database": str(path), "notes": []}, indent=2))
        return 0
    if args.action == "forget":
        return _fail(f"no notes about {_printable(args.name)!r}: there are no notes yet in {data_dir}")
    _out(f"# {path}: no notes yet (Emil has not run with data_dir {data_dir})")
    return 0


def _archive_readonly(data_dir: Path) -> Archive | None:
    path = data_dir / ARCHIVE_FILE
    return Archive.open_existing(path) if path.is_file() else None


def _recall(data_dir: Path, words: Sequence[str], limit: int) -> int:
    archive = _archive_readonly(data_dir)
    if archive is None:
        _out(f"# {data_dir / ARCHIVE_FILE}: nothing archived yet")
        return 0
    try:
        lines = archive.search(words, limit=limit)
        _out(f"# {archive.path}: {archive.count()} lines; {len(lines)} match {' '.join(_printable(w) for w in words)!r}")
        now = time.time()
        for line in lines:
            _out(_printable(format_line(line, now=now)))
    finally:
        archive.close()
    return 0


def _forget(store: MemoryStore, name: str) -> int:
    gone = store.forget(name)
    said = 0
    path = store.path.parent / ARCHIVE_FILE
    if path.is_file():
        archive = Archive.open_existing(path, readonly=False)
        try:
            said = archive.forget(name)
        finally:
            archive.close()
    if not gone and not said:
        known = store.subjects()
        listed = ", ".join(_printable(s) for s in known[:20]) + (", ..." if len(known) > 20 else "")
        return _fail(f"no notes about {_printable(name)!r} in {store.path}; known: {listed or 'none'}")
    _out(f"forgot {gone} note{'s' if gone != 1 else ''} about {_printable(name)} in {store.path}")
    if said:
        _out(f"forgot {said} archived line{'s' if said != 1 else ''} {_printable(name)} said, in {path}")
    _out("(a running Emil drops them from its prompt at its next trim)")
    return 0


def _show(store: MemoryStore, tokens: int, counter: TokenCounter, why: str) -> int:
    notes = store.notes()
    block = render_notes(notes, max_tokens=tokens, tokens_of=counter.count) if tokens > 0 else None
    _out(f"# {store.path}: {len(notes)} notes")
    _out(f"# counted by {counter.name} ({why})")
    if block is None:
        _out("# pinned block: none")
    else:
        _out(f"# pinned block ({counter.count(block)} of {tokens} tokens, {counter.name}), as the model reads it:")
        _out(_printable(block))
    _out("# every note (about | subject | topic | detail | count | note | told by | last learned UTC | source):")
    for n in notes:
        fields = (n.about, n.subject, n.topic, n.detail, str(n.count), n.note, n.told_by or "-", _when(n.last_t), n.source)
        _out(" | ".join(_printable(f) for f in fields))
    archive = _archive_readonly(store.path.parent)
    if archive is None:
        _out("# archive: nothing archived yet")
    else:
        try:
            _out(f"# archive: {archive.count()} lines in {archive.path} (search them: run_emil.py memory recall WORDS)")
        finally:
            archive.close()
    return 0
