"""Every command in README.md and docs/*.md runs exactly as written.

The commands are extracted from the docs (tests/docs/commands.py) and run through bash, from a
scratch folder laid out like a fresh clone (links to this checkout's files; what the commands
write lands in the scratch folder), with ``python3`` being whatever python3 is on PATH: the
scripts put themselves into the checkout's ``.venv`` (emil/_bootstrap.py), as they do for an
operator once ``python3 run_emil.py demo`` has run. Each must exit as the docs say (0 unless a
transcript shows ``(exit N)``), without a traceback or bridge chatter, and a ``--json`` command
must print JSON alone on stdout.

What cannot run here is still checked to parse (``--help``), and says why in :func:`plan`:
synopses with placeholders (``FILE...``, ``[--window N]``), commands that need a real vLLM, a GPU
or a real Minecraft server, and developer commands that would run this suite inside itself.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shlex
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from emil.testing import processes
from tests.docs.commands import ROOT, DocCommand, doc_commands

_PLACEHOLDER = re.compile(r"\[|\.\.\.|(?:^|\s)[A-Z][A-Z0-9_]{1,}(?:\.[a-z]+)?(?=\s|$)")
_REAL_ENDPOINT = re.compile(r"http://127\.0\.0\.1:800[01]")

NOT_HERE: dict[str, str] = {
    # command prefix -> why it cannot run on this machine (no GPU, no vLLM, no real server)
    "python3 run_emil.py live": "plays on a real Minecraft server against a real vLLM until Ctrl-C",
    "python3 tools/launch_vllm.py docs/examples/serve-qwen36-mtp.toml": (
        "starts vLLM on a GPU (needs the vllm executable and 23 GiB of weights); --dry-run runs here"
    ),
    "python3 tools/check_tool_calls.py": "asks the configured real vLLM (127.0.0.1:8000); --demo-double runs here",
    "python3 tools/launch_vllm.py --cpu-test-model": (
        "serves a real vLLM on this CPU until Ctrl-C; the real-vLLM tier "
        "(tests/integration/real_vllm) starts the same server, and --install-only runs here"
    ),
    "python3 tools/launch_vllm.py --real-model": (
        "serves the real model on this CPU until Ctrl-C; the real-model tier "
        "(tests/integration/real_model) starts the same server, and --install-only runs here"
    ),
    "python3 tools/make_sample.py": "rewrites the committed sample recording (run by hand when the schema changes)",
    "python3 tools/chaos.py": (
        "runs every fault scenario against real services three times (about 15 minutes); the slow "
        "fault suite, tests/integration/agent/test_faults.py, runs the same scenarios once"
    ),
    "python3 tools/soak.py --sample": "rewrites the committed soak sample (run by hand when the schema changes)",
    "python3 tools/bench_router.py": (
        "starts two real vLLM replicas and plays every mode three times (about half an hour); "
        "tests/integration/real_vllm/test_scale_out.py runs its code (run_mode) in both modes on "
        "the test's replicas"
    ),
    "python3 tools/ci_under_load.py": (
        "runs this whole suite (bash .ci/run) several times with a core kept busy: an hour or more; "
        "tests/unit/test_ci_under_load.py runs it on a small test file"
    ),
    "python3 tools/test_lanes.py": (
        "runs this whole suite in three lanes at once: half an hour or more; "
        "tests/unit/test_test_lanes.py runs it with --collect-only and checks the split"
    ),
    "python3 tools/bench_npc.py": (
        "plays nine 30-second windows with up to four whole Emils on one server (about 8 minutes, "
        "past the docs tier's ceiling); tests/integration/world/test_npc_loop.py plays the "
        "defaults case with two Emils and bounds their requests"
    ),
    "python3 run_emil.py fleet run": (
        "runs a fleet's NPCs against a real vLLM and Minecraft server until Ctrl-C; "
        "tests/integration/fleet/test_fleet_run.py runs it on the documented fleet against the double"
    ),
    "python3 tools/bench_fleet.py": (
        "starts fleets of 1, 4 and 16 whole Emils (about 5 minutes a run and 5 GiB at 16, past the docs "
        "tier's ceiling); tests/integration/fleet/test_fleet_run.py runs the same supervisor on three"
    ),
    "python3 tools/sim_fleet.py": (
        "eight whole Emils behind the real vllm-router and three gated double replicas (about 4 minutes); "
        "its parts are tested in tests/unit/testing/test_double_replicas.py"
    ),
    "python3 tools/bench_play.py --oracle": (
        "plays all 17 bench tasks three times in the embedded world (about 25 minutes on this "
        "box); tests/integration/bench/test_oracle.py plays the same code on every task once"
    ),
    "python3 run_emil.py memory": (
        "reads the notes a session wrote to data_dir (a fresh clone has none); "
        "tests/unit/memory/test_cli.py runs every subcommand on a real notes database"
    ),
}
"""Commands (matched exactly, or as a prefix followed by a space) that do not run here."""

SLOW: tuple[str, ...] = (
    "python3 run_emil.py demo",  # embedded server, bots, double: ~40 s
    "python3 tools/bench_",  # benchmarks: tens of seconds each
    "python3 tools/soak.py",  # embedded server, five bots, double: ~60 s
    "python3 tools/llm_recovery_report.py",
    "--synthetic-hours 24",
    "--synthetic-hours 2",
    "--world embedded",
    "python3 tools/check_tool_calls.py --demo-double",
    "docs/examples/standin-",  # a stand-in server on a fixed port, seconds of backoff
    "--cpu-test-model --install-only",  # seconds when installed; minutes and 3.5 GB when not
    "--real-model --install-only",  # a second when installed; two minutes and 1.3 GB when not
)
"""Commands (by substring) that run in the slow suite."""

SCALED: dict[str, tuple[str, str]] = {
    "python3 tools/bench_recall.py --setups all": (
        "--hours 2 --seeds 1 --cut 1 --timing-lines 5000",
        "the documented run (24 h, three seeds, three budgets and their null runs, a restart after "
        "12 h, the retrieval time over 40,000 lines) takes about ten minutes of CPU; the same "
        "command runs here on a 2-hour day, one seed and a restart after 1 h (the later flags win)",
    ),
    "emil/data/samples/soak-session.jsonl --synthetic-hours 24": (
        "--synthetic-hours 1 --budgets 4500,6000",
        "the soak recording's 12288 window swept over ten budgets (the smallest overflow at every "
        "request) and a day of synthetic play: 84 s of CPU; here an hour and two budgets (with "
        "per-turn retrieval the day's cost grows faster than its hours at these small budgets: "
        "3 hours took 47 s of CPU, 1 hour 5 s)",
    ),
    "python3 tools/soak.py --real-vllm": (
        "--duration 60",
        "the documented soak plays 30 minutes against a real vLLM on this CPU; the same command "
        "runs here for one minute (the later flag wins; the server's start comes on top)",
    ),
    "--synthetic-hours 24": (
        "--synthetic-hours 1",
        "a day of synthetic play swept over 11 budgets takes minutes of CPU; the same command "
        "runs here on 1 hour (the later flag wins): 10 s of CPU on a quiet box, where 2 and 3 "
        "hours took 32-35 s and, with three lanes on two cores, 48 s (over 3 times 15)",
    ),
    "python3 tools/bench_loop.py": (
        "--turns 10 --emils 1,4",
        "30 turns each for 1, 4 and 8 Emils: 57 s of CPU; here 10 turns for 1 and 4",
    ),
    "python3 tools/bench_client.py": (
        "--requests 10 --warmup 1",
        "30 requests per path and mode with 0.2 s idle before each; here 10",
    ),
    "python3 tools/bench_world.py": (
        "--events 20 --actions 20 --reflex 5 --mob 5 --craft 3 --smelt 1",
        "the default counts (60 events, 60 actions, 15 hits, 3 smelts of 10 s) take a minute and a "
        "half of waiting; a third of each here",
    ),
    "python3 tools/bench_context.py": (
        "--steps 50 --accuracy-turns 50",
        "300 timed requests and 300 accuracy turns: 19 s of CPU; 50 of each here",
    ),
    "python3 tools/bench_throughput.py --demo-double": (
        "-n 3 --warmups 1 --max-tokens 64",
        "the double streams at its simulated 72-110 tok/s: 10 requests of the default length to two "
        "endpoints are a minute and a half of waiting; 3 short ones here",
    ),
}
"""Commands too long for CI as written, by a part of their text (the first part that matches):
run with the extra flags appended (argparse keeps the last value), so the documented command
line itself is what is exercised, at a smaller scale."""

BUDGET_S: dict[str, float] = {
    # a part of the command's text (the first that matches) -> CPU seconds it may use, itself and
    # all it starts, as run here (scaled): about twice what it used (docs/reliability.md)
    "python3 run_emil.py demo": 20,
    '.venv/bin/python -m pytest -m "not slow"': 20,
    ".venv/bin/python -m pytest": 15,
    "python3 tools/bench_context.py": 15,
    "python3 tools/chars_per_token.py emil/data/samples/soak-session.jsonl": 10,
    "python3 tools/llm_recovery_report.py": 10,
    "emil/data/samples/soak-session.jsonl --synthetic-hours 24": 10,
    "--synthetic-hours 24": 15,
    "--synthetic-hours 4 --window 32768": 15,
    "python3 tools/model_swap_drill.py": 12,
    "emil/data/samples/demo-session.jsonl --plot sweep.png": 8,
    "python3 tools/bench_recall.py --setups all": 10,
    "python3 tools/bench_loop.py": 30,
    "python3 tools/bench_client.py": 20,
    "python3 tools/bench_world.py": 20,
    "python3 tools/soak.py --duration": 25,
    "python3 tools/soak.py --real-vllm": 120,  # a real vLLM started on this CPU, then a minute of play
    "python3 tools/bench_memory.py": 10,
    "python3 tools/launch_vllm.py --cpu-test-model --install-only": 8,
    "python3 tools/launch_vllm.py --real-model --install-only": 8,
    "docs/examples/standin-": 8,
    "python3 tools/bench_throughput.py --demo-double": 8,
    "python3 tools/check_tool_calls.py --demo-double": 12,
    # the fleet (docs/fleet.md): a check loads the Qwen tokenizer and renders every NPC's prompt
    # (3.4-5 s of CPU here, the most under load); --help of run_emil.py 2-3 s, of the tools 0.2-0.6 s
    "python3 run_emil.py fleet check": 3,
    "python3 run_emil.py fleet units": 3,
    "python3 run_emil.py fleet run": 2,
    "python3 tools/bench_fleet.py": 0.5,
    "python3 tools/sim_fleet.py": 0.5,
}
"""The docs tier's time budget. Every slow command has one; any other command FAST_BUDGET_S. A
command that uses more than OVER times its budget fails (scale it down in SCALED, or raise its
budget and keep the sum under CEILING_S)."""

FAST_BUDGET_S = 5.0
OVER = 3.0
CEILING_S = 760.0  # 755 before tools/test_lanes.py (its --help, 5 s); 720 until this round: the fleet's six commands (12 s, docs/fleet.md), the real
# model's install check (8 s, docs/serving.md) and the play bench's (docs/play-bench.md)
"""The sum of every documented command's budget, in CPU seconds: the docs tier's ceiling (a
command that waits, e.g. 30 s of soak play, uses little CPU; docs/reliability.md has the wall
times)."""


def budget(c: DocCommand) -> float:
    """The CPU seconds a command may use (BUDGET_S, else FAST_BUDGET_S for a fast one)."""
    for part, seconds in BUDGET_S.items():
        if part in c.text:
            return seconds
    return FAST_BUDGET_S


@dataclass(frozen=True)
class Spent:
    """What one documented command cost when it ran here."""

    where: str
    argv: str
    wall_s: float
    cpu_s: float
    budget_s: float


SPENT: list[Spent] = []
"""Every command run in this session (tests/docs/conftest.py prints them at the end)."""

PRINTS_TRACEBACKS = ("docs/examples/standin-",)
"""Commands whose output shows tracebacks on purpose (the stand-in prints vLLM's error lines)."""


@dataclass(frozen=True)
class Plan:
    """What the test does with one documented command."""

    mode: str
    """run | help (only checked to parse) | collect (pytest --collect-only) | syntax (bash -n)"""
    argv: str
    """What is run, through bash."""
    reason: str = ""
    slow: bool = False


def _program(text: str) -> str:
    """The program part of a command: interpreter, script and (run_emil.py) subcommand."""
    words = shlex.split(text)
    keep = 2 if words[0].startswith("python") else 1
    if len(words) > 2 and words[1] == "run_emil.py" and words[2] in ("live", "demo", "replay", "setup", "memory", "fleet"):
        keep = 3
    return shlex.join(words[:keep])


def _not_here(text: str) -> str | None:
    for prefix, reason in NOT_HERE.items():
        if text == prefix or (text.startswith(prefix + " ") and "--dry-run" not in text and "--demo-double" not in text and "--install-only" not in text):
            return reason
    if text == "python3 run_emil.py":
        return NOT_HERE["python3 run_emil.py live"] + " (live is the default command)"
    if _REAL_ENDPOINT.search(text):
        return "talks to a real vLLM at 127.0.0.1:8000/8001"
    return None


def plan(c: DocCommand) -> Plan:
    text = c.text
    if text.startswith("bash .ci/run"):
        return Plan("syntax", "bash -n .ci/run", "runs this whole suite (setup, ruff, mypy, every test)")
    if text.startswith(".venv/bin/mutmut "):
        return Plan("help", ".venv/bin/mutmut --help", "a mutation run takes minutes to an hour (docs/reliability.md)")
    if text.startswith(".venv/bin/python -m pytest"):
        return Plan("collect", f"{text} --collect-only -q", "runs tests; this suite only checks that they are found", slow=True)
    if _PLACEHOLDER.search(text):
        return Plan("help", f"{_program(text)} --help", "a synopsis with placeholders")
    reason = _not_here(text)
    if reason is not None:
        return Plan("help", f"{_program(text)} --help", reason)
    for part, (extra, why) in SCALED.items():
        if part in text:
            return Plan("run", f"{text} {extra}", why, slow=True)
    return Plan("run", text, slow=any(s in text for s in SLOW))


COMMANDS = doc_commands()


def _unique(commands: list[DocCommand], *, slow: bool) -> list[DocCommand]:
    seen: set[str] = set()
    out = []
    for c in commands:
        p = plan(c)
        if p.slow == slow and p.argv not in seen:
            seen.add(p.argv)
            out.append(c)
    return out


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder that looks like a fresh clone from the commands' point of view."""
    folder = tmp_path_factory.mktemp("clone")
    for entry in ROOT.iterdir():
        if entry.name in (".git", "recordings") or (entry.name.endswith((".png", ".json")) and entry.is_file()):
            continue
        (folder / entry.name).symlink_to(entry)
    return folder


def _run(c: DocCommand, clone: Path, timeout: float) -> None:
    p = plan(c)
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMIL_")}
    # A metrics port of its own, in case a command plays a session.
    env["EMIL_METRICS_ADDRESS"] = "127.0.0.1:0"
    started, before = time.monotonic(), _children_cpu()
    # its own process group: a timeout or an interrupt stops the shell and all it started
    proc = processes.run(
        p.argv, shell=True, executable="/bin/bash", cwd=clone, env=env,
        capture_output=True, text=True, timeout=timeout,
    )
    spent = Spent(c.where, p.argv, time.monotonic() - started, _children_cpu() - before, budget(c))
    SPENT.append(spent)
    shown = f"{c.where}: {p.argv}\n--- stdout\n{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-3000:]}"
    expected = c.exit_code if p.mode == "run" else 0
    assert proc.returncode == expected, f"exit {proc.returncode}, the docs say {expected}\n{shown}"
    both = proc.stdout + proc.stderr
    if not any(s in c.text for s in PRINTS_TRACEBACKS):
        assert "Traceback (most recent call last)" not in both, shown
    assert "[JSE]" not in both and "Timed out get" not in both, shown
    if p.mode == "run" and re.search(r"\s--json(\s|$)", c.text) and ">" not in c.text:
        json.loads(proc.stdout)  # JSON alone on stdout
    assert spent.cpu_s <= OVER * spent.budget_s, (
        f"{c.where}: {p.argv} used {spent.cpu_s:.1f} s of CPU, over {OVER:g} times its budget of "
        f"{spent.budget_s:g} s: scale it down (SCALED) or raise its budget (BUDGET_S) within CEILING_S"
    )


def _children_cpu() -> float:
    """CPU seconds of this process's finished children (and theirs, as each waited for them)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def test_docs_use_one_interpreter_name() -> None:
    """python3 everywhere (the README's first command); the .venv's python only for the dev tools."""
    wrong = [
        c for c in COMMANDS
        if not (c.text.startswith(("python3 ", "bash ")) or c.text.startswith((".venv/bin/python -m pytest", ".venv/bin/mutmut ")))
    ]
    assert not wrong, "\n".join(f"{c.where}: {c.text}" for c in wrong)


def test_not_here_commands_are_still_in_the_docs() -> None:
    """The exceptions list names commands that exist; a stale entry would hide nothing."""
    texts = [c.text for c in COMMANDS]
    for prefix in NOT_HERE:
        assert any(t == prefix or t.startswith(prefix + " ") for t in texts), prefix
    for part in SCALED:
        assert any(part in t for t in texts), part
    for part in BUDGET_S:
        assert any(part in t for t in texts), part


def test_the_budgets_add_up_to_at_most_the_ceiling() -> None:
    """Every slow command has a budget of its own, no budget is stale, and the tier fits."""
    slow = _unique(COMMANDS, slow=True)
    unbudgeted = [c for c in slow if not any(part in c.text for part in BUDGET_S)]
    assert not unbudgeted, "slow commands without a budget in BUDGET_S: " + ", ".join(f"{c.where}: {c.text}" for c in unbudgeted)
    for part in BUDGET_S:
        assert any(part in c.text for c in COMMANDS), f"stale budget: {part}"
    total = sum(budget(c) for c in [*_unique(COMMANDS, slow=False), *slow])
    assert total <= CEILING_S, f"the docs' commands are budgeted {total:g} s of CPU, over the ceiling of {CEILING_S:g} s"


@pytest.mark.slow  # each starts a Python (and some a Node) process: ~50 s in all
@pytest.mark.parametrize("c", _unique(COMMANDS, slow=False), ids=lambda c: c.where)
def test_doc_command(c: DocCommand, clone: Path) -> None:
    _run(c, clone, timeout=110)


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("c", _unique(COMMANDS, slow=True), ids=lambda c: c.where)
def test_doc_command_slow(c: DocCommand, clone: Path) -> None:
    _run(c, clone, timeout=550)
