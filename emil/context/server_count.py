"""Counting by the server's ``/tokenize`` for a model that matches no family.

With no local tokenizer and template, the only exact count is the server's: ``POST /tokenize``
applies the served model's own chat template. :class:`ServerCounting` is a synchronous client
(the context manager is synchronous; a loopback or LAN round trip costs about a millisecond)
that counts texts and whole prompts, caching both by content:

- a prompt's count is exact whatever the template does, so identical prompts (the ladder asks
  for the same candidate more than once) are counted once;
- per-message block counts are measured by probe prompts as for any template and summed to
  size the ladder's candidates; every assembled prompt is also counted whole (one call, see
  :meth:`emil.context.incremental.IncrementalCounter.measure_layout`), and at the first
  disagreement whole counts become the rule, since summing is only exact for additive
  templates. What Emil predicts for a request is therefore always the server's own count.

``stats["calls"]`` counts the HTTP calls made.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Callable
from typing import Any

import httpx

from emil.context.family import ModelFamily, generic_family
from emil.exceptions import EndpointConfigError, EndpointUnavailable

__all__ = ["ServerCounting", "server_family"]

_CACHE_LIMIT = 20_000


def root_url(base_url: str) -> str:
    """``http://h:p/v1`` -> ``http://h:p``: vLLM serves /tokenize at the root, not under /v1."""
    root = base_url.rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


class ServerCounting:
    """Exact counts from ``POST {root}/tokenize`` of one served model (synchronous)."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float = 10.0,
        client: httpx.Client | None = None,
    ) -> None:
        self.model = model
        self.url = f"{root_url(base_url)}/tokenize"
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = client or httpx.Client(timeout=timeout, headers=headers)
        if client is None:  # ours: closed with us (the family lives as long as the session)
            self._finalizer = weakref.finalize(self, self._client.close)
        self._texts: dict[str, int] = {}
        self._prompts: dict[str, int] = {}
        self.stats = {"calls": 0}

    def close(self) -> None:
        """Close the HTTP client (only one this object created)."""
        if hasattr(self, "_finalizer"):
            self._finalizer()

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
        if response.status_code in (429, 502, 503, 504):
            raise EndpointUnavailable(
                f"POST {self.url} -> {response.status_code}", status=response.status_code
            )
        if response.status_code != 200:
            raise EndpointConfigError(
                f"POST {self.url} -> {response.status_code}: {response.text[:300]}",
                status=response.status_code,
                server_message=response.text,
            )
        data: dict[str, Any] = response.json()
        if not isinstance(data.get("count"), int):
            raise EndpointConfigError(f"POST {self.url}: response has no 'count': {data!r:.300}")
        return data

    def encode(self, text: str) -> list[int]:
        data = self._post({"model": self.model, "prompt": text, "add_special_tokens": False})
        tokens = data.get("tokens")
        if not isinstance(tokens, list):
            raise EndpointConfigError(f"POST {self.url}: response has no 'tokens'")
        return [int(t) for t in tokens]

    def count(self, text: str) -> int:
        """Tokens of plain text, no template and no BOS (cached)."""
        n = self._texts.get(text)
        if n is None:
            payload = {"model": self.model, "prompt": text, "add_special_tokens": False}
            n = int(self._post(payload)["count"])
            if len(self._texts) > _CACHE_LIMIT:
                self._texts.clear()
            self._texts[text] = n
        return n

    def count_prompt(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        add_generation_prompt: bool,
        template_kwargs: dict[str, Any],
    ) -> int:
        """Tokens of a whole chat prompt as the server renders it (cached by content)."""
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "add_generation_prompt": add_generation_prompt,
            "chat_template_kwargs": template_kwargs,
        }
        if tools:
            payload["tools"] = tools
        key = json.dumps(payload, sort_keys=True, ensure_ascii=False)
        n = self._prompts.get(key)
        if n is None:
            n = int(self._post(payload)["count"])
            if len(self._prompts) > _CACHE_LIMIT:
                self._prompts.clear()
            self._prompts[key] = n
        return n


def server_family(counting: ServerCounting) -> ModelFamily:
    """The family of a model only the server can count: no local template, its prompts and
    texts counted by ``counting``; reasoning placement guessed the Qwen3.5/3.6 way and checked
    (whole counts take over at the first disagreement)."""
    generic = generic_family()
    prompt_count: Callable[..., int] = counting.count_prompt
    return ModelFamily(
        name="server",
        label=f"counted by the server ({counting.name}); no local template",
        tokenizer=lambda: counting,
        template=None,
        accepts=generic.accepts,
        is_query=generic.is_query,
        shows_think=generic.shows_think,
        prompt_count=prompt_count,
    )
