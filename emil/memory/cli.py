"""``run_emil.py memory show | forget NAME | export``: the operator's view of Emil's notes.

- ``show``: the notes as the model reads them (the pinned block, at ``--tokens``, counted in
  tokens of the family the settings name, else qwen3.6, said so), then every note, one a line.
- ``forget NAME``: delete every note about NAME (a player, place or goal; any case) and every
  note that player told. Allowed while Emil runs (SQLite locks the write); the running Emil
  drops them from its prompt at its next trim.
- ``export``: every note as JSON on stdout (nothing else is written there).

``data_dir`` comes from the settings as for ``live`` (emil.toml < EMIL_DATA_DIR < --data-dir).
A mistake (unknown name, no database, a corrupt one, a bad flag) is one line on stderr and
exit code 2; these commands never take the running Emil's lock and never create a database.
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
from emil.memory.render import render_notes
from emil.memory.store import MemoryStore
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
    forget = sub.add_parser("forget", help="delete every note about NAME (player, place or goal)")
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


def _forget(store: MemoryStore, name: str) -> int:
    gone = store.forget(name)
    if not gone:
        known = store.subjects()
        listed = ", ".join(_printable(s) for s in known[:20]) + (", ..." if len(known) > 20 else "")
        return _fail(f"no notes about {_printable(name)!r} in {store.path}; known: {listed or 'none'}")
    _out(f"forgot {gone} note{'s' if gone != 1 else ''} about {_printable(name)} in {store.path}")
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
    return 0
