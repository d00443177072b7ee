"""vLLM replicas of the tiny model on this CPU, side by side, for the scale-out rig.

:class:`Replicas`: N servers (:mod:`emil.serving.cpu_vllm`) started at once (each pinned to its
own core when the machine has one), their ``/metrics`` (:func:`emil.serving.router.replica_counters`),
the sessions each one's log names (vLLM logs ``Received request chatcmpl-<X-Request-Id>``, and
Emil's request ids start with its session key), a prefix-cache reset between runs, a kill (a
crash: SIGKILL to the process group) and a revival. The rest of the rig is
:mod:`emil.testing.emil_processes` (the Emils and players) and :mod:`emil.testing.scaleout` (a run).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import threading
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import httpx

from emil.serving.cpu_vllm import (
    CpuServerError,
    CpuServerOptions,
    CpuVLLMEnv,
    CpuVLLMServer,
    default_model_dir,
    group_members,
)
from emil.serving.router import ReplicaCounters, replica_counters

__all__ = ["KV_BYTES_PER_TOKEN", "Replicas"]

KV_BYTES_PER_TOKEN = 512
"""KV cache per token of the tiny Qwen3 (2 layers x 1 KV head x 64 dims x K and V x 2 bytes)."""
_RECEIVED = re.compile(r"Received request chatcmpl-(?P<id>\S+?)-(?P<n>\d+): ")


class Replicas:
    """``count`` CPU vLLM servers of the tiny model, started side by side.

    ``kv_cache_tokens`` sizes each one's KV cache (small enough and sessions compete for it);
    the servers log every request (``--enable-log-requests``) and allow a prefix-cache reset
    (``VLLM_SERVER_DEV_MODE``), both for the measurements here.
    """

    def __init__(
        self,
        env: CpuVLLMEnv,
        count: int,
        log_dir: Path,
        *,
        max_model_len: int = 16384,
        kv_cache_tokens: int = 131072,
    ) -> None:
        self.env = env
        self.model = default_model_dir(env)
        self.log_dir = log_dir
        self.max_model_len = max_model_len
        self.kv_cache_tokens = kv_cache_tokens
        self.servers = [self._server(i) for i in range(count)]
        self.killed: set[int] = set()

    def _server(self, index: int, generation: int = 0) -> CpuVLLMServer:
        cores = os.cpu_count() or 1
        options = CpuServerOptions(
            max_model_len=self.max_model_len,
            kv_cache_bytes=self.kv_cache_tokens * KV_BYTES_PER_TOKEN,
            extra_args=("--enable-log-requests",),
            env={"VLLM_SERVER_DEV_MODE": "1",
                 # one core each, so two replicas do not take turns on one
                 "VLLM_CPU_OMP_THREADS_BIND": str(index % cores)},
        )  # fmt: skip
        name = f"replica-{index}" + (f"-{generation}" if generation else "")
        return CpuVLLMServer(self.env, self.model, options, log_path=self.log_dir / f"{name}.log")

    def start(self, indices: Sequence[int] | None = None) -> None:
        """Start the servers (``indices``: these only) at once; CpuServerError (all stopped)
        when one does not start."""
        errors: list[CpuServerError] = []

        def start(server: CpuVLLMServer) -> None:
            try:
                server.start()
            except CpuServerError as exc:
                errors.append(exc)

        chosen = [self.servers[i] for i in (range(len(self.servers)) if indices is None else indices)]
        threads = [threading.Thread(target=start, args=(s,)) for s in chosen]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if errors:
            self.stop()
            raise errors[0]

    def revive(self) -> None:
        """Replace every killed server with a new one (a new port and log) and start it."""
        dead = sorted(self.killed)
        for i in dead:
            self.servers[i].stop()
            self.servers[i] = self._server(i, generation=len(list(self.log_dir.glob(f"replica-{i}*.log"))))
        self.killed.clear()
        if dead:
            self.start(dead)

    def stop(self) -> list[int]:
        """Stop every server; the pids that outlived their group's stop (none, normally)."""
        left: list[int] = []
        for server in self.servers:
            left += server.stop()
        return left

    def __enter__(self) -> Replicas:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    @property
    def urls(self) -> list[str]:
        """Root URLs (``http://127.0.0.1:PORT``), what the router takes."""
        return [s.root_url for s in self.servers]

    def index_of(self, url: str) -> int:
        return self.urls.index(url.rstrip("/"))

    def counters(self) -> list[ReplicaCounters | None]:
        """Each replica's /metrics now (None for a killed one)."""
        out: list[ReplicaCounters | None] = []
        with httpx.Client(timeout=10) as client:
            for i, server in enumerate(self.servers):
                if i in self.killed:
                    out.append(None)
                    continue
                response = client.get(f"{server.root_url}/metrics")
                response.raise_for_status()
                out.append(replica_counters(response.text))
        return out

    def reset_prefix_caches(self) -> None:
        """Empty every live replica's prefix cache (between benchmark runs)."""
        with httpx.Client(timeout=30) as client:
            for i, server in enumerate(self.servers):
                if i not in self.killed:
                    client.post(f"{server.root_url}/reset_prefix_cache").raise_for_status()

    def sessions(self, index: int) -> Counter[str]:
        """Session key -> chat requests replica ``index`` received, from its log."""
        path = self.servers[index].log_path
        assert path is not None
        text = path.read_text(errors="replace") if path.exists() else ""
        return Counter(m["id"] for m in _RECEIVED.finditer(text))

    def kill(self, index: int) -> None:
        """SIGKILL replica ``index``'s whole process group (a crash, not a shutdown)."""
        server = self.servers[index]
        group = server.supervisor.process_group
        assert group is not None, "the replica never started"
        self.killed.add(index)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while group_members(group) and time.monotonic() < deadline:
            time.sleep(0.2)
