"""The SDK's typed stream as the JSON chunks the client reads (for comparisons with ``create()``).

``OpenAIClient._post_streaming`` hands the client each SSE chunk as the decoded JSON, which the
client validates itself (emil.llm.response). The old path, ``chat.completions.create(stream=True)``,
yields the SDK's chunk objects instead; this adapter turns them back into JSON so
tools/bench_client.py and the client tests can run both paths through the same parsing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

__all__ = ["SdkChunks"]


class SdkChunks:
    """Wraps an ``AsyncStream[ChatCompletionChunk]``: ``async with`` / ``async for`` yield dicts."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    async def __aenter__(self) -> SdkChunks:
        await self._stream.__aenter__()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._stream.__aexit__(*exc_info)

    async def __aiter__(self) -> AsyncIterator[object]:
        async for chunk in self._stream:
            yield chunk.to_dict()
