"""How a session ends: every way out mapped to one exit code, one line and the end record's
reason, looking through the exception groups anyio's task groups wrap errors in."""

from __future__ import annotations

import asyncio

import pytest

from emil.agent.session import EXIT_BUG, EXIT_CONFIG, EXIT_GONE, EXIT_STOPPED, ending_of
from emil.exceptions import EndpointConfigError, PatienceExhausted


def test_a_stop_is_exit_0() -> None:
    ending = ending_of(None, stop_reason="signal SIGTERM")
    assert (ending.exit_code, ending.reason, ending.line) == (EXIT_STOPPED, "stopped: signal SIGTERM", "emil: stopped: signal SIGTERM")
    assert ending_of(None).reason == "stopped"


def test_a_configuration_error_deep_in_task_groups_is_exit_2_in_one_line() -> None:
    config = EndpointConfigError("the server does not serve model 'x':\n set model", status=404)
    wrapped = BaseExceptionGroup("outer", [ExceptionGroup("inner", [config]), asyncio.CancelledError()])
    ending = ending_of(wrapped)
    assert ending.exit_code == EXIT_CONFIG and ending.cause is config
    assert ending.line == "emil: configuration error: the server does not serve model 'x': set model"
    assert ending.reason == "configuration: the server does not serve model 'x': set model"


def test_gone_is_exit_3_and_configuration_wins_over_it() -> None:
    gone = PatienceExhausted("minecraft server unavailable for 60 s", service="minecraft server", waited_s=60)
    ending = ending_of(ExceptionGroup("g", [gone]))
    assert (ending.exit_code, ending.reason) == (EXIT_GONE, "gone: minecraft server unavailable for 60 s")
    assert ending.line == "emil: gave up waiting: minecraft server unavailable for 60 s"
    both = ExceptionGroup("g", [gone, EndpointConfigError("fix it")])
    assert ending_of(both).exit_code == EXIT_CONFIG


def test_cancellation_alone_is_a_stop_and_anything_else_a_bug() -> None:
    cancelled = asyncio.CancelledError()
    assert ending_of(cancelled, stop_reason="signal SIGINT").reason == "stopped: signal SIGINT"
    assert ending_of(KeyboardInterrupt()).reason == "stopped: interrupted"
    bug = ending_of(ExceptionGroup("g", [KeyError("x")]))
    assert bug.exit_code == EXIT_BUG and bug.reason == "error: KeyError: 'x'"
    assert bug.line == "emil: internal error (KeyError: 'x'); details in the log and the recording"


@pytest.mark.parametrize("code", [EXIT_STOPPED, EXIT_BUG, EXIT_CONFIG, EXIT_GONE])
def test_the_codes_are_the_documented_ones(code: int) -> None:
    assert code == {EXIT_STOPPED: 0, EXIT_BUG: 1, EXIT_CONFIG: 2, EXIT_GONE: 3}[code]
