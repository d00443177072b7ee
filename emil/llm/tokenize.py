"""The server's own count: ``POST {root}/tokenize`` of one served model (template included).

Two clients of vLLM's /tokenize, beside the chat client that talks to the same server:
:class:`ServerTokenizeCounter` (async; the overflow recovery's exact count and the startup check
of a model family) and :class:`ServerCounting` (synchronous; the token counter of a model of no
family, see :func:`emil.model.family.server_family`). Failures are classified once, as for every
exchange with the server (:mod:`emil.llm.classify`).
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Mapping
from typing import Any

import httpx

from emil.exceptions import EndpointConfigError, EndpointUnavailable
from emil.llm.classify import classify_failure
from emil.llm.types import root_url_of

__all__ = ["ServerCounting", "ServerTokenizeCounter"]


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
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.base_url = base_url
        self.model = model
        self._headers = _request_headers(api_key, headers)
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


def _request_headers(api_key: str | None, extra: Mapping[str, str] | None) -> dict[str, str]:
    """The API key as a bearer token, plus ``extra`` (the session key a router routes on)."""
    headers = dict(extra or {})
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers


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
        self, base_url: str, model: str, *, api_key: str | None = None, timeout: float = 10.0,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.model = model
        self.url = f"{root_url_of(base_url)}/tokenize"
        self._client = httpx.Client(timeout=timeout, headers=_request_headers(api_key, headers))
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
