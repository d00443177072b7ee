"""The JS bridge outlives a call that timed out.

JSPyBridge hands each reply over through ``threading.Barrier(2, timeout=5)``: when the caller
had already given up (its timeout passed) the loop thread's ``wait()`` broke after five seconds,
the loop thread died, and every later call of the process timed out while Node ran on. That is
what lost a whole test lane under load (docs/reliability.md). Real Node, real JSPyBridge.
"""

from __future__ import annotations

import time

import pytest

from emil.exceptions import WorldError
from emil.world._jsruntime import JsRuntime
from emil.world.setup import ensure_js_deps

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]


def test_a_late_reply_leaves_the_bridge_working() -> None:
    ensure_js_deps(progress=True)
    rt = JsRuntime.instance()
    g = rt._js.globalThis
    assert rt.call(g, "parseInt", "41") == 41
    with pytest.raises(WorldError, match="timed out"):
        rt.call(g, "eval", "new Promise(r => setTimeout(() => r(7), 2000))", timeout=0.5)
    # The reply lands about 1.5 s after the caller left; the old barrier broke 5 s after that.
    time.sleep(8)
    assert rt.alive(), "the bridge's event loop thread died of a reply nobody collected"
    assert rt.call(g, "parseInt", "42") == 42
