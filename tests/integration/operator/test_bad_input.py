"""Every operator mistake is one line on stderr and exit code 2, never a traceback.

Each row runs a real command line (``run_emil.py`` or a ``tools/`` script) as a subprocess in a
scratch folder, with the mistake made the way an operator makes it: a flag, an environment
variable, an ``emil.toml``, a file that is not a recording, a missing executable. None of them
needs a server: settings are checked before Emil connects to anything (the LLM endpoint and the
Minecraft port below point at nothing, so a check that came after connecting would hang or fail
differently).
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from emil.recording import RECORD_ADAPTER, HeaderRecord
from emil.testing import processes

ROOT = Path(__file__).resolve().parents[3]
NOWHERE = {
    "EMIL_ENDPOINT": "http://127.0.0.1:9/v1", "EMIL_MC_PORT": "9", "EMIL_ENDPOINT_WAIT_S": "2",
    "EMIL_METRICS_ADDRESS": "127.0.0.1:0",
}


@dataclass(frozen=True)
class Case:
    """One mistake: the command, what the scratch folder holds, and words the line must have."""

    name: str
    argv: list[str]
    expect: str
    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, bytes] = field(default_factory=dict)


def _header_line() -> bytes:
    return RECORD_ADAPTER.dump_json(HeaderRecord(session_id="x")) + b"\n"


BINARY = bytes(range(256)) * 8
README = (ROOT / "README.md").read_bytes()
RUN = [str(ROOT / "run_emil.py")]


def _tool(name: str) -> list[str]:
    return [str(ROOT / "tools" / name)]


CASES = [
    Case("negative demo duration", [*RUN, "demo", "--duration", "-3"], "must be a positive number of seconds"),
    Case("zero demo duration", [*RUN, "demo", "--duration", "0"], "must be a positive number of seconds"),
    Case("misspelt env var", [*RUN, "--print-config"], "did you mean 'EMIL_OUTPUT_RESERVE'?", env={"EMIL_OUTPUT_RESERV": "4096"}),
    Case("misspelt env var, live", [*RUN, "live"], "unknown environment variable EMIL_MC_PROT", env={"EMIL_MC_PROT": "25570"}),
    Case(
        "key set twice in emil.toml", [*RUN, "--print-config"], "'window' is set twice",
        files={"emil.toml": b"window = 32768\n[llm]\nwindow = 65536\n"},
    ),
    Case(
        "key set in two sections", [*RUN, "live"], "'mc_port' is set twice",
        files={"emil.toml": b"[minecraft]\nmc_port = 25565\n[server]\nmc_port = 25566\n"},
    ),
    Case("misspelt key in a section", [*RUN, "live"], "did you mean 'output_reserve'?", files={"emil.toml": b"[llm]\noutput_reserv = 1\n"}),
    Case("output reserve >= window", [*RUN, "live", "--window", "32768", "--output-reserve", "40000"], "leaves no room for a prompt"),
    Case(
        "prompt budget + reserve > window", [*RUN, "live", "--window", "32768", "--prompt-budget", "30000"],
        "prompt_budget 30000 + output_reserve 6144 > window 32768",
    ),
    Case("bad log level", [*RUN, "live", "--log-level", "LOUD"], "bad setting log_level='LOUD'"),
    Case("chat template missing", [*RUN, "live", "--chat-template", "nope.jinja"], "cannot read chat_template nope.jinja"),
    Case("prompts dir missing", [*RUN, "demo", "--prompts-dir", "nope"], "prompts_dir nope is not a folder"),
    Case("unknown tokenizer", [*RUN, "live", "--tokenizer", "gpt-17"], "unknown tokenizer 'gpt-17'"),
    Case("replay: README", [*RUN, "replay", "README.md"], "README.md is not an Emil recording", files={"README.md": README}),
    Case("replay: binary", [*RUN, "replay", "blob.jsonl"], "not an Emil recording (binary data)", files={"blob.jsonl": BINARY}),
    Case("replay: empty", [*RUN, "replay", "empty.jsonl"], "not an Emil recording (the file is empty)", files={"empty.jsonl": b""}),
    Case("replay: missing", [*RUN, "replay", "gone.jsonl"], "no such recording: gone.jsonl"),
    Case(
        "replay: other JSONL", [*RUN, "replay", "other.jsonl"], "not an Emil header record",
        files={"other.jsonl": b'{"level": "info", "msg": "hi"}\n'},
    ),
    Case("tune_budget: README", [*_tool("tune_budget.py"), "README.md"], "README.md is not an Emil recording", files={"README.md": README}),
    Case("tune_budget: binary", [*_tool("tune_budget.py"), "blob.jsonl"], "(binary data)", files={"blob.jsonl": BINARY}),
    Case("tune_budget: empty", [*_tool("tune_budget.py"), "empty.jsonl"], "(the file is empty)", files={"empty.jsonl": b""}),
    Case("chars_per_token: README", [*_tool("chars_per_token.py"), "README.md"], "README.md is not an Emil recording", files={"README.md": README}),
    Case("chars_per_token: binary", [*_tool("chars_per_token.py"), "blob.jsonl"], "(binary data)", files={"blob.jsonl": BINARY}),
    Case("chars_per_token: empty", [*_tool("chars_per_token.py"), "empty.jsonl"], "(the file is empty)", files={"empty.jsonl": b""}),
    # Counts, durations and sizes: one shared argparse type (emil/cli_args.py), refused while
    # the flags are parsed, so no server or double has started when the line is printed.
    Case("soak: negative duration", [*_tool("soak.py"), "--duration", "-3"], "must be a positive number of seconds"),
    Case("soak: zero duration", [*_tool("soak.py"), "--duration", "0"], "must be a positive number of seconds"),
    Case("soak: zero window", [*_tool("soak.py"), "--window", "0"], "must be a positive integer"),
    Case("make_sample: infinite duration", [*_tool("make_sample.py"), "--duration", "inf"], "must be a finite number"),
    Case("bench_loop: zero turns", [*_tool("bench_loop.py"), "--turns", "0"], "must be a positive integer"),
    Case("bench_loop: one turn", [*_tool("bench_loop.py"), "--turns", "1"], "--turns must be at least 2"),
    Case("bench_loop: zero Emils", [*_tool("bench_loop.py"), "--emils", "1,0"], "must be a positive integer"),
    Case("bench_client: zero requests", [*_tool("bench_client.py"), "--requests", "0"], "must be a positive integer"),
    Case("bench_client: negative warmup", [*_tool("bench_client.py"), "--warmup", "-1"], "must be zero or a positive integer"),
    Case("bench_context: zero steps", [*_tool("bench_context.py"), "--steps", "0"], "must be a positive integer"),
    Case("bench_memory: negative events", [*_tool("bench_memory.py"), "--events", "-1"], "must be a positive integer"),
    Case("bench_recall: zero hours", [*_tool("bench_recall.py"), "--hours", "0"], "must be a positive number"),
    Case("bench_throughput: zero requests", [*_tool("bench_throughput.py"), "-n", "0"], "must be a positive integer"),
    Case("bench_world: zero events", [*_tool("bench_world.py"), "--events", "0"], "must be a positive integer"),
    Case("chaos: zero runs", [*_tool("chaos.py"), "--runs", "0"], "must be a positive integer"),
    Case("chaos: negative runs", [*_tool("chaos.py"), "--runs", "-1"], "must be a positive integer"),
    Case("kv_capacity: zero concurrency", [*_tool("kv_capacity.py"), "x", "--cache", "8G", "--concurrency", "0"], "must be a positive integer"),
    Case("check_tool_calls: zero repeats", [*_tool("check_tool_calls.py"), "-n", "0"], "must be a positive integer"),
    Case("tune_budget: zero hours", [*_tool("tune_budget.py"), "--synthetic-hours", "0"], "must be a positive number"),
    Case("tune_budget: low water above 1", [*_tool("tune_budget.py"), "--synthetic-hours", "1", "--low-water", "2"], "must be a fraction in (0, 1]"),
    Case("tune_budget: zero jobs", [*_tool("tune_budget.py"), "--synthetic-hours", "1", "-j", "0"], "must be a positive integer"),
    Case("chars_per_token: zero hours", [*_tool("chars_per_token.py"), "--synthetic-hours", "-1"], "must be a positive number"),
    Case("replay: zero window", [*RUN, "replay", "x.jsonl", "--window", "0"], "must be a positive integer", files={"x.jsonl": _header_line()}),
    Case("replay: negative hold", [*RUN, "replay", "x.jsonl", "--hold", "-1"], "must be zero or a positive number", files={"x.jsonl": _header_line()}),
    Case("memory show: zero tokens", [*RUN, "memory", "show", "--tokens", "0"], "must be a positive integer"),
    # Recordings: the same check as replay's, before any double starts.
    Case("model_swap_drill: README", [*_tool("model_swap_drill.py"), "README.md"], "README.md is not an Emil recording", files={"README.md": README}),
    Case("model_swap_drill: empty", [*_tool("model_swap_drill.py"), "empty.jsonl"], "(the file is empty)", files={"empty.jsonl": b""}),
    Case(
        "model_swap_drill: unknown family", [*_tool("model_swap_drill.py"), "x.jsonl", "--family", "gpt-17"], "unknown family 'gpt-17'",
        files={"x.jsonl": _header_line()},
    ),
    Case("check_tool_calls: binary recording", [*_tool("check_tool_calls.py"), "--recording", "blob.jsonl"], "(binary data)", files={"blob.jsonl": BINARY}),
    Case(
        "launch_vllm: no vllm executable", [*_tool("launch_vllm.py"), "serve.toml"], "cannot start 'vllm': no such executable",
        files={"serve.toml": b'model = "m"\nmax_model_len = 4096\n[runner]\ncommand = ["vllm", "serve"]\n'},
    ),
]


def _run(case: Case, folder: Path) -> subprocess.CompletedProcess[str]:
    folder.mkdir()
    for name, data in case.files.items():
        (folder / name).write_bytes(data)
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMIL_")}
    # A PATH without vLLM on it; the interpreter is named absolutely.
    env.update(NOWHERE | case.env, PATH="/usr/bin:/bin", EMIL_NO_BOOTSTRAP="1", PYTHONPATH=str(ROOT))
    return processes.run(
        [sys.executable, *case.argv], cwd=folder, env=env, capture_output=True, text=True, timeout=60,
    )


def test_header_line_is_a_recording(tmp_path: Path) -> None:
    """The cases' opposite: a file that starts with a header passes the recording check."""
    from emil.recording import check_recording_file

    good = tmp_path / "ok.jsonl"
    good.write_bytes(_header_line())
    check_recording_file(good)


def test_every_mistake_is_one_line_and_exit_2(tmp_path: Path) -> None:
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda ic: _run(ic[1], tmp_path / f"case{ic[0]}"), enumerate(CASES)))
    failures = []
    for case, proc in zip(CASES, results, strict=True):
        lines = proc.stderr.splitlines()
        problems = []
        if proc.returncode != 2:
            problems.append(f"exit {proc.returncode}")
        if len(lines) != 1:
            problems.append(f"{len(lines)} stderr lines")
        if "Traceback" in proc.stderr:
            problems.append("traceback")
        if case.expect not in proc.stderr:
            problems.append(f"missing {case.expect!r}")
        if problems:
            failures.append(f"{case.name}: {', '.join(problems)}\n    stderr: {proc.stderr.strip()[:600]}\n    stdout: {proc.stdout.strip()[:300]}")
    assert not failures, "\n".join(failures)


def test_a_metrics_port_in_use_is_one_line_and_exit_2(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        case = Case("metrics port taken", [*RUN, "live", "--metrics-address", f"127.0.0.1:{port}"], f"cannot serve metrics on 127.0.0.1:{port}")
        proc = _run(case, tmp_path / "taken")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert case.expect in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow
async def test_output_reserve_beyond_the_served_window_stops_before_minecraft(tmp_path: Path) -> None:
    """The window comes from the server here, so this is checked once vLLM answers: still one
    line and exit 2, and before the (unreachable) Minecraft port is tried."""
    import anyio

    from emil.testing.brains import NpcBrain
    from emil.testing.vllm_double import VLLMDouble

    async with VLLMDouble(NpcBrain(), window=32768) as double:
        case = Case(
            "reserve > served window", [*RUN, "live", "--output-reserve", "40000"], "output reserve 40000",
            env={"EMIL_ENDPOINT": double.base_url, "EMIL_ENDPOINT_WAIT_S": "30"},
        )
        proc = await anyio.to_thread.run_sync(lambda: _run(case, tmp_path / "reserve"))
    assert proc.returncode == 2, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("emil:")]
    assert len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "32768" in errors[0] and "40000" in errors[0], errors[0]
    assert "emil.world" not in proc.stderr and "Minecraft" not in proc.stderr  # never tried to join
