"""Other Emils on the same Minecraft server: found without anyone listing them.

Every Emil writes one small file, ``<name>.json`` holding its process id, in a directory per
Minecraft server (host and port) under the user's temporary directory, and removes it when it
stops. The others it finds there whose process is alive are its *peers*: their chat is NPC chat
(emil.trust.npc), so two Emils started side by side do not talk each other into a loop even
when nobody listed them in ``npc_players``. Emils on other machines are not seen this way:
list them. A directory that cannot be written costs one warning and no peers.
"""

from __future__ import annotations

import json
import logging
import os
import re
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

__all__ = ["PeerRegistry", "default_root"]

_log = logging.getLogger("emil.world")

REFRESH_S = 5.0
"""How long a look at the directory is reused."""


def default_root() -> Path:
    """``<tmp>/emil-peers-<uid>``: one per user, so another user's files are never read."""
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return Path(tempfile.gettempdir()) / f"emil-peers-{uid}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True


class PeerRegistry:
    """This Emil's entry for one server, and the peers it finds (see the module docstring)."""

    def __init__(self, host: str, port: int, name: str, *, root: Path | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        server = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{host}_{port}")
        self.dir = (root or default_root()) / server
        self.name = name
        self.clock = clock
        self._file = self.dir / f"{name}.json"
        self._cached: frozenset[str] = frozenset()
        self._at = -float("inf")
        self._warned = False

    def __enter__(self) -> PeerRegistry:
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            self._file.write_text(json.dumps({"name": self.name, "pid": os.getpid()}), encoding="utf-8")
        except OSError as e:
            self._warn(e)
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        try:
            data = json.loads(self._file.read_text(encoding="utf-8"))
            if data.get("pid") == os.getpid():  # never remove a newer Emil's entry of the same name
                self._file.unlink()
        except (OSError, ValueError, AttributeError):
            pass

    def _warn(self, e: OSError) -> None:
        if not self._warned:
            self._warned = True
            _log.warning("cannot use %s to find other Emils on this server (%s); list them in npc_players",
                         self.dir, e.strerror or e)

    def peers(self) -> frozenset[str]:
        """The other live Emils on this server (looked up at most every REFRESH_S)."""
        now = self.clock()
        if now - self._at < REFRESH_S:
            return self._cached
        self._at = now
        found = set()
        try:
            entries = list(self.dir.glob("*.json"))
        except OSError as e:
            self._warn(e)
            entries = []
        for path in entries:
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
                name, pid = str(data["name"]), int(data["pid"])
            except (OSError, ValueError, KeyError, TypeError):
                continue
            if name != self.name and _alive(pid):
                found.add(name)
        self._cached = frozenset(found)
        return self._cached
