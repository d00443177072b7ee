"""The recall benchmark is honest only if memory cannot know the benchmark's wording: nothing in
emil/memory imports the fact generator, the synthetic day or any double, and the double's text
reducer imports neither the generator nor the day."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names}
    return found


def test_memory_never_imports_the_benchmark_or_a_double() -> None:
    for path in sorted((ROOT / "emil" / "memory").rglob("*.py")):
        bad = {m for m in _imports(path) if m.startswith(("emil.offline", "emil.testing"))}
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


def test_the_reducer_does_not_know_the_days_wording() -> None:
    bad = {m for m in _imports(ROOT / "emil" / "testing" / "reducer.py") if m.startswith("emil.offline")}
    assert not bad
    text = (ROOT / "emil" / "testing" / "reducer.py").read_text(encoding="utf-8")
    from emil.offline import facts

    for word in (*facts._PLACE_NOUNS, *facts._RARE_ITEMS, *facts._OPINION_THINGS):  # none of the generator's words
        assert f'"{word}"' not in text and f"'{word}'" not in text


def test_the_memory_code_names_none_of_the_generators_words() -> None:
    """What memory keeps is chosen by generic features (word rarity, repeats, who is present),
    never by the benchmark's words, in either set of wordings."""
    from emil.offline import facts

    vocabulary = {w for w in (*facts._PLACE_NOUNS, *facts._RARE_ITEMS, *facts._OPINION_THINGS, *facts._H_PLACE_NOUNS,
                              *facts._H_ITEMS, *facts._H_MOBS, *facts._RELATIVES, "nickname", "gazebo", "vault")}
    for path in sorted((ROOT / "emil" / "memory").rglob("*.py")):
        text = path.read_text(encoding="utf-8").lower()
        named = {w for w in vocabulary if f'"{w}"' in text or f"'{w}'" in text}
        assert not named, f"{path.relative_to(ROOT)} names {sorted(named)}"
