"""The shell commands written in README.md and docs/*.md, as an operator would copy them.

A command is a line of a fenced block with no language (or sh/bash/console/shell) that starts
with a command Emil documents (``python3``, ``bash``, ``.venv/bin/...``; a ``$ `` prompt in a
transcript block), joined over trailing backslashes, and an inline code span that starts the
same way. Everything else in those blocks is example output.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ROOT", "DocCommand", "doc_commands", "doc_files"]

ROOT = Path(__file__).resolve().parents[2]
_SHELL_FENCES = {"", "sh", "bash", "console", "shell", "shell-session"}
_STARTS = re.compile(r"^(?:\$ )?(?:[A-Z_]+=\S+ )*(?:python3?|bash|\.venv/bin/\S+|PYTHONPATH=\S+ python3?) ")
_FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
_INLINE = re.compile(r"`([^`]+)`")


@dataclass(frozen=True)
class DocCommand:
    """One command as written, where it was written."""

    text: str
    """The command without a ``$ `` prompt or a trailing ``# comment``."""
    file: str
    line: int
    exit_code: int = 0
    """What the docs say it exits with: a ``(exit N`` line after it in a transcript, else 0."""

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _strip_comment(text: str) -> str:
    # "cmd   # what it does": a shell comment starts at a '#' after whitespace
    return re.split(r"\s+#\s", text, maxsplit=1)[0].rstrip()


def _commands_in(path: Path) -> list[DocCommand]:
    rel = str(path.relative_to(ROOT))
    out: list[DocCommand] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    fence: str | None = None
    block: list[tuple[int, str]] = []
    paragraph: list[tuple[int, str]] = []
    for no, raw in enumerate(lines, start=1):
        m = _FENCE.match(raw)
        if m:
            if fence is None:
                fence, block = m.group(2).lower(), []
            else:
                if fence in _SHELL_FENCES:
                    out.extend(_block_commands(block, rel))
                fence = None
            continue
        if fence is not None:
            block.append((no, raw.strip()))
            continue
        if raw.strip():
            paragraph.append((no, raw.strip()))
        if not raw.strip() or no == len(lines) or _FENCE.match(lines[no]):
            out.extend(_inline_commands(paragraph, rel))
            paragraph = []
    return out


def _inline_commands(paragraph: list[tuple[int, str]], rel: str) -> list[DocCommand]:
    """Commands written as inline code in prose (a span may wrap over lines)."""
    if not paragraph:
        return []
    text = " ".join(line for _, line in paragraph)
    return [
        DocCommand(_strip_comment(span.removeprefix("$ ")), rel, paragraph[0][0])
        for span in _INLINE.findall(text)
        if _STARTS.match(span)
    ]


def _block_commands(block: list[tuple[int, str]], rel: str) -> list[DocCommand]:
    """Commands of one shell block: its ``$ `` lines in a transcript, else its command lines."""
    transcript = any(line.startswith("$ ") for _, line in block)
    out: list[DocCommand] = []
    pending: tuple[str, int] | None = None
    for no, line in block:
        if pending is not None:
            text, start = pending
            text = f"{text} {line.removesuffix(chr(92)).strip()}"
            if line.endswith("\\"):
                pending = (text, start)
            else:
                out.append(DocCommand(_strip_comment(text), rel, start))
                pending = None
            continue
        if transcript and not line.startswith("$ "):
            continue
        if not _STARTS.match(line):
            continue
        body = line.removeprefix("$ ")
        if body.endswith("\\"):
            pending = (body.removesuffix("\\").strip(), no)
        else:
            out.append(DocCommand(_strip_comment(body), rel, no))
    return out


_EXIT = re.compile(r"^\(exit (\d+)")


def _with_exit_codes(path: Path, commands: list[DocCommand]) -> list[DocCommand]:
    """Give each transcript command the ``(exit N)`` written after it, before the next one."""
    lines = path.read_text(encoding="utf-8").splitlines()
    starts = [c.line for c in commands]
    out = []
    for i, c in enumerate(commands):
        end = starts[i + 1] - 1 if i + 1 < len(starts) else len(lines)
        code = 0
        for raw in lines[c.line : end]:
            if raw.strip().startswith("```"):
                break
            m = _EXIT.match(raw.strip())
            if m:
                code = int(m.group(1))
                break
        out.append(DocCommand(c.text, c.file, c.line, code))
    return out


def doc_commands() -> list[DocCommand]:
    """Every command in README.md and docs/*.md, in file order."""
    return [c for path in doc_files() for c in _with_exit_codes(path, _commands_in(path))]
