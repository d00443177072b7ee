"""The one way to wait out a transient failure (emil.backoff): Backoff, Patience, wait_out."""

from __future__ import annotations

import logging
import random

import pytest

from emil.backoff import Backoff, OutageEvent, Patience, wait_out
from emil.exceptions import EndpointConfigError, EndpointUnavailable, PatienceExhausted


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_backoff_is_full_jitter_exponential_and_capped() -> None:
    b = Backoff(base=0.5, cap=4.0, rng=random.Random(1))
    ceilings = []
    for _ in range(8):
        ceilings.append(b.ceiling())
        d = b.next_delay()
        assert 0.0 <= d <= ceilings[-1]
    assert ceilings == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0, 4.0, 4.0]
    b.reset()
    assert b.ceiling() == 0.5 and b.attempt == 0
    nj = Backoff(base=0.5, cap=4.0, jitter=False)
    assert [nj.next_delay() for _ in range(5)] == [0.5, 1.0, 2.0, 4.0, 4.0]
    assert Backoff(base=1.0, cap=1.0, jitter=False).next_delay() == 1.0  # base == cap is allowed
    with pytest.raises(ValueError, match="base"):
        Backoff(base=2.0, cap=1.0)
    with pytest.raises(ValueError, match="base"):
        Backoff(base=0.0, cap=1.0)


def test_jitter_spreads_below_the_ceiling() -> None:
    delays = [Backoff(base=8.0, cap=8.0, rng=random.Random(seed)).next_delay() for seed in range(50)]
    assert min(delays) < 4.0 < max(delays) <= 8.0


def test_an_episode_is_down_retries_up_and_logs_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    clock = _Clock()
    events: list[OutageEvent] = []
    p = Patience("llm endpoint", backoff=Backoff(1.0, 4.0, jitter=False), on_event=events.append,
                 clock=clock)
    caplog.set_level(logging.DEBUG, logger="emil.backoff")
    assert not p.down and p.down_for_s() == 0.0
    assert p.failed(EndpointUnavailable("refused")) == 1.0
    clock.now += 1.0
    assert p.failed("refused again") == 2.0
    clock.now += 2.0
    assert p.down and p.down_for_s() == 3.0 and p.attempts == 2
    p.succeeded()
    assert not p.down and p.backoff.attempt == 0
    assert [(e.kind, e.attempt) for e in events] == [("down", 1), ("retry", 1), ("retry", 2), ("up", 2)]
    assert events[2].delay_s == 2.0 and events[2].down_for_s == 1.0 and events[2].error == "refused again"
    assert events[3].down_for_s == 3.0
    levels = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert [lv for lv, _ in levels] == [logging.WARNING, logging.DEBUG, logging.INFO]
    assert "next attempt at" in levels[0][1] and "refused" in levels[0][1]
    assert "back after 3.0 s" in levels[2][1]
    # a success while up is no episode: no event, no log line
    p.succeeded()
    assert len(events) == 4 and len(caplog.records) == 3


def test_patience_runs_out_at_exactly_the_limit() -> None:
    clock = _Clock()
    events: list[OutageEvent] = []
    p = Patience("minecraft server", backoff=Backoff(10.0, 10.0, jitter=False), limit_s=5.0,
                 fix="start the server", on_event=events.append, clock=clock)
    assert p.failed("refused") == 5.0  # never sleeps past the patience
    clock.now += 4.999
    assert p.failed("refused") == pytest.approx(0.001)
    clock.now += 0.001
    with pytest.raises(PatienceExhausted) as err:
        p.failed(EndpointUnavailable("still refused"))
    e = err.value
    assert e.service == "minecraft server" and e.waited_s == pytest.approx(5.0)
    assert "patience of 5 s" in str(e) and "still refused" in str(e) and str(e).endswith("; start the server")
    assert isinstance(e.__cause__, EndpointUnavailable)
    assert events[-1].kind == "gone"


def test_a_new_episode_starts_after_a_success() -> None:
    clock = _Clock()
    p = Patience("x", backoff=Backoff(1.0, 1.0, jitter=False), limit_s=10, clock=clock)
    p.failed("a")
    clock.now += 9
    p.succeeded()
    clock.now += 100
    assert p.failed("b") == 1.0  # the patience counts from this episode's start
    assert p.episodes == 2


async def test_wait_out_retries_transients_and_stops_on_config() -> None:
    calls = 0

    async def flaky() -> str:
        nonlocal calls
        calls += 1
        if calls < 3:
            raise EndpointUnavailable("503 loading", status=503)
        return "up"

    p = Patience("x", backoff=Backoff(0.001, 0.004))
    assert await wait_out(flaky, p) == "up"
    assert calls == 3 and p.episodes == 1 and not p.down

    async def misconfigured() -> str:
        raise EndpointConfigError("set the key", status=401)

    p2 = Patience("x", backoff=Backoff(0.001, 0.004))
    with pytest.raises(EndpointConfigError):
        await wait_out(misconfigured, p2)
    assert p2.episodes == 0

    async def down() -> str:
        raise EndpointUnavailable("refused")

    with pytest.raises(PatienceExhausted, match="refused"):
        await wait_out(down, Patience("x", backoff=Backoff(0.001, 0.002), limit_s=0.02))


def test_the_defaults() -> None:
    b = Backoff(jitter=False)
    assert [b.next_delay() for _ in range(8)] == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    p = Patience("x")
    p.backoff.jitter = False
    assert [p.failed("e") for _ in range(7)] == [0.5, 1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    assert p.attempts == 7 and p.fix == "" and p.limit_s is None
    assert Patience("y").attempts == 0 and Patience("y").episodes == 0


def test_every_event_and_log_line_word_for_word(caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    import emil.backoff as backoff_module

    class _Now:
        @staticmethod
        def now() -> object:
            import datetime as dt

            return dt.datetime(2026, 1, 1, 12, 0, 0)

    monkeypatch.setattr(backoff_module, "datetime", _Now)
    clock = _Clock()
    events: list[OutageEvent] = []
    p = Patience("llm endpoint", backoff=Backoff(2.0, 2.0, jitter=False), limit_s=10, fix="start vLLM",
                 on_event=events.append, clock=clock)
    caplog.set_level(logging.DEBUG, logger="emil.backoff")
    p.failed("refused")
    clock.now += 2.0
    p.failed("refused again")
    clock.now += 2.5
    p.succeeded()
    assert caplog.messages == [
        "llm endpoint unavailable (refused); next attempt at 12:00:02 (in 2.0 s), giving up after 10 s",
        "llm endpoint still unavailable after 2 attempts, 2 s (refused again); next attempt at 12:00:02",
        "llm endpoint is back after 4.5 s (2 failed attempts)",
    ]
    assert events == [
        OutageEvent("down", "llm endpoint", 1, "refused"),
        OutageEvent("retry", "llm endpoint", 1, "refused", 2.0, 0.0),
        OutageEvent("retry", "llm endpoint", 2, "refused again", 2.0, 2.0),
        OutageEvent("up", "llm endpoint", 2, "", 0.0, 4.5),
    ]
    assert p.attempts == 0 and p.down_since is None
    caplog.clear()
    Patience("world", backoff=Backoff(1.0, 1.0, jitter=False), clock=clock).failed("x")
    assert caplog.messages == ["world unavailable (x); next attempt at 12:00:01 (in 1.0 s)"]


def test_gone_says_what_to_do_only_when_there_is_a_fix() -> None:
    clock = _Clock()
    events: list[OutageEvent] = []
    p = Patience("world", backoff=Backoff(1.0, 1.0, jitter=False), limit_s=1, on_event=events.append, clock=clock)
    p.failed("a")
    clock.now += 1.5
    with pytest.raises(PatienceExhausted) as err:
        p.failed("b")
    assert str(err.value) == "world unavailable for 2 s, longer than its patience of 1 s (last error: b)"
    assert err.value.__cause__ is None
    assert events[-1] == OutageEvent("gone", "world", 2, "b", 0.0, 1.5)


async def test_wait_sleeps_the_delay_it_returns() -> None:
    import time

    p = Patience("x", backoff=Backoff(0.05, 0.05, jitter=False))
    started = time.monotonic()
    assert await p.wait("e") == 0.05
    assert time.monotonic() - started >= 0.045
