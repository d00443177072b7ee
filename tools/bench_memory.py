#!/usr/bin/env python3
"""What memory costs on the live path: a fact written per game event, a line archived per event,
the pinned block rendered between turns when the notes changed (or only checked when they did
not), and the store opened at start.

    python3 tools/bench_memory.py [--events 2000] [--players 40]

Writes into a fresh temporary data_dir (real SQLite files, rollback journal, synchronous NORMAL:
one transaction per fact, archive lines committed in bursts, as live), then prints medians and
p95 in microseconds/milliseconds. Figures are for this machine's disk; they are printed, never
asserted. The retrieval per turn over a day's archive: tools/bench_recall.py.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's emil
from emil._bootstrap import use_project_python

use_project_python(__file__)  # re-runs this script in the checkout's .venv when needed

from emil.cli_args import OneLineParser, positive_int


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--events", type=positive_int, default=2000, help="chat events to learn from (2000)")
    parser.add_argument("--players", type=positive_int, default=40, help="distinct players (40)")
    parser.add_argument("--tokens", type=positive_int, default=2000, help="bound of the pinned block (2000, the setting's default)")
    args = parser.parse_args(argv)

    from emil.memory import Learner, MemoryStore, PinnedNotes
    from emil.memory.archive import Archive
    from emil.memory.archivist import Archivist
    from emil.model.family import DEFAULT_FAMILY
    from emil.model.resolve import get_token_counter
    from emil.world.events import Chat, ItemCollected

    counter = get_token_counter(DEFAULT_FAMILY)
    with tempfile.TemporaryDirectory(prefix="emil-bench-memory-") as d:
        store = MemoryStore.open(Path(d))
        archive = Archive.open(Path(d))
        archivist = Archivist(archive, bot_name="Emil", clock=time.time)
        learner = Learner(store, bot_name="Emil")
        writes: list[float] = []
        archived: list[float] = []
        for i in range(args.events):
            player = f"player{i % args.players}"
            event = (
                ItemCollected(item="bread", count=1, from_player=player, t=1e9 + i)
                if i % 7 == 0
                else Chat(sender=player, text=f"Emil, could you bring me {i} logs to my house at {i} 64 -{i}", t=1e9 + i)
            )
            started = time.perf_counter()
            learner.observe(event)
            writes.append((time.perf_counter() - started) * 1e6)
            started = time.perf_counter()
            archivist.observe(event)
            archived.append((time.perf_counter() - started) * 1e6)
        pinned = PinnedNotes(store, max_tokens=args.tokens, tokens_of=counter.count)
        renders: list[float] = []
        for _ in range(30):
            started = time.perf_counter()
            block = pinned.render()
            renders.append((time.perf_counter() - started) * 1e3)
        checks: list[float] = []
        for _ in range(200):  # between turns, nothing learned since: the version check alone
            started = time.perf_counter()
            pinned.prepare()
            checks.append((time.perf_counter() - started) * 1e6)
        notes = len(store.notes())
        lines = archive.count()
        store.close()
        archive.close()
        opens: list[float] = []
        for _ in range(10):
            started = time.perf_counter()
            MemoryStore.open(Path(d)).close()
            opens.append((time.perf_counter() - started) * 1e3)
    print(f"{args.events} events from {args.players} players -> {notes} notes")
    print(f"learn one event (a transaction): median {statistics.median(writes):.0f} us, p95 {_pct(writes, 0.95):.0f} us")
    print(f"archive one event ({lines} lines; a commit per burst): median {statistics.median(archived):.0f} us, "
          f"p95 {_pct(archived, 0.95):.0f} us, mean {statistics.mean(archived):.0f} us")
    print(f"render the pinned block ({counter.count(block or '')} of {args.tokens} tokens): median {statistics.median(renders):.1f} ms, p95 {_pct(renders, 0.95):.1f} ms")
    print(f"prepare between turns with nothing learned (a version check): median {statistics.median(checks):.0f} us")
    print(f"open the store at start (lock, integrity check): median {statistics.median(opens):.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
