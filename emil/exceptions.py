"""Emil's exception hierarchy.

::

    EmilError
    ├── ConfigurationError        the operator must change something; never retried
    │   ├── UnknownTokenizerError   no tokenizer for this model name (lists the options)
    │   ├── ModelNotServedError     the configured model is not in /v1/models (lists what is)
    │   ├── BudgetError             the pinned prompt cannot fit the budget (names each number)
    │   ├── NotARecordingError      a file given as a session recording is something else
    │   └── EndpointConfigError     401/403/404/400-not-overflow from the LLM server
    ├── LimitExceeded             a bounded thing ran out; carries the limit and the value
    │   └── ContextOverflowError    the request could not be made to fit after bounded retries
    ├── TransientError            may succeed later; callers back off with jitter
    │   └── EndpointUnavailable     connection refused/reset, timeouts, 429, 502/503/504, loading
    ├── ServerFault               a 200 that is not a valid completion (bad JSON, no choices...):
    │                             the server misbehaved; retried a bounded number of times
    ├── PatienceExhausted         a service stayed down longer than its configured patience
    └── WorldError                the Minecraft side failed (bridge, server, bot)

How a session ends (docs/reliability.md): a stop signal (exit 0), a :class:`ConfigurationError`
(exit 2) or :class:`PatienceExhausted` (exit 3). Everything else fails one turn at most.

Model mistakes (bad JSON arguments, unknown tools, failed validation, failed actions) are not
exceptions: they are data that goes back to the model as an observation.
"""

from __future__ import annotations

__all__ = [
    "BudgetError",
    "ConfigurationError",
    "ContextOverflowError",
    "EmilError",
    "EndpointConfigError",
    "EndpointUnavailable",
    "LimitExceeded",
    "ModelNotServedError",
    "NotARecordingError",
    "PatienceExhausted",
    "RequestRejected",
    "ServerFault",
    "TransientError",
    "UnknownTokenizerError",
    "WorldError",
]


class EmilError(Exception):
    """Base of every error Emil raises on purpose."""


class ConfigurationError(EmilError):
    """Something the operator must change; retrying cannot help, so nothing retries it."""


class UnknownTokenizerError(ConfigurationError):
    """No tokenizer is known for a model name; the message lists the options."""


class ModelNotServedError(ConfigurationError):
    """The configured model is not among those the server lists in /v1/models."""


class BudgetError(ConfigurationError):
    """The pinned part of the prompt (system, tools, current turn) cannot fit the budget."""


class NotARecordingError(ConfigurationError):
    """A file named as a session recording does not start with an Emil header record."""


class EndpointConfigError(ConfigurationError):
    """The LLM server refused the request for a reason retrying will not fix."""

    def __init__(self, message: str, *, status: int | None = None, server_message: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.server_message = server_message


class LimitExceeded(EmilError):
    """A bounded resource ran out; the message names the limit and the value."""


class ContextOverflowError(LimitExceeded):
    """The prompt could not be made to fit the window within the bounded retries.

    Every number the decision rested on is kept as an attribute so logs and recordings can show
    them: the window, the output reserve, and the prompt sizes tried.
    """

    def __init__(
        self,
        message: str,
        *,
        window: int | None = None,
        requested_output: int | None = None,
        attempts: tuple[int, ...] = (),
        server_prompt_tokens: int | None = None,
    ) -> None:
        super().__init__(message)
        self.window = window
        self.requested_output = requested_output
        self.attempts = attempts
        self.server_prompt_tokens = server_prompt_tokens


class TransientError(EmilError):
    """A failure that may pass: callers back off with jitter and try again."""


class EndpointUnavailable(TransientError):
    """The LLM server could not be reached or asked us to come back later."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class ServerFault(EmilError):
    """The server answered 200 with something that is not a valid chat completion.

    Invalid JSON, an HTML page, empty ``choices``, a choice without a message, fields of the
    wrong type, a stream that ends without a finish. It is the server's fault, not Emil's and
    not the model's: the request is retried a bounded number of times, then the turn fails.
    ``body`` is the start of what the server sent (truncated), for the recording.
    """

    def __init__(self, message: str, *, body: str = "") -> None:
        super().__init__(message)
        self.body = body


class RequestRejected(EmilError):
    """The server refused one request as invalid (a 4xx that says nothing about the setup:
    a 400, 413, 422... about this request's content). Retrying the same request cannot help
    and stopping Emil would let one bad turn end the session: this turn fails, the next event
    starts a new one. ``server_message`` is what the server said."""

    def __init__(self, message: str, *, status: int | None = None, server_message: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.server_message = server_message


class PatienceExhausted(EmilError):
    """A service stayed unavailable longer than its configured patience; the session stops.

    ``service`` names it (e.g. "llm endpoint", "minecraft server"), ``waited_s`` is how long it
    was down. The message ends with what the operator can do.
    """

    def __init__(self, message: str, *, service: str, waited_s: float) -> None:
        super().__init__(message)
        self.service = service
        self.waited_s = waited_s


class WorldError(EmilError):
    """The Minecraft side failed: bridge, Node process, server or bot."""
