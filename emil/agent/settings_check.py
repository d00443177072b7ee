"""Settings checks that need no server, run before Emil connects to anything.

:class:`~emil.config.Settings` validates each value and the budget arithmetic it can do alone
(output reserve < window, prompt budget + reserve <= window when the window is pinned). This
module checks what the settings *name*: the chat template and prompt files compile, the
tokenizer spec resolves, the recording folder is writable. Each problem is a
:class:`~emil.exceptions.ConfigurationError` saying what to change, so ``live`` and ``demo``
stop with one line and exit 2 before waiting for vLLM or joining Minecraft. What needs the
server (the served window, the pinned prompt against it) is checked at startup
(emil.agent.startup), still before the bot connects.
"""

from __future__ import annotations

import os
from pathlib import Path

from emil.config import Settings
from emil.exceptions import ConfigurationError

__all__ = ["check_settings"]


def check_settings(s: Settings, *, recording: Path | None = None) -> None:
    """Raise ConfigurationError for the first setting that names something unusable."""
    from emil.agent.persona import load_system_prompt
    from emil.memory.summary import load_summary_prompt
    from emil.model.resolve import get_token_counter
    from emil.model.template import ChatTemplate

    if s.chat_template is not None:
        try:
            ChatTemplate.from_file(s.chat_template)
        except OSError as e:
            raise ConfigurationError(
                f"cannot read chat_template {s.chat_template}: {e.strerror}; fix the path or leave chat_template on auto"
            ) from e
        except ConfigurationError:
            raise
        except Exception as e:  # a template that does not compile: jinja2's own error types
            raise ConfigurationError(
                f"chat_template {s.chat_template} does not compile ({type(e).__name__}: {e}); fix it or leave chat_template on auto"
            ) from e
    if s.prompts_dir is not None and not s.prompts_dir.is_dir():
        raise ConfigurationError(f"prompts_dir {s.prompts_dir} is not a folder; fix the path or leave prompts_dir on auto")
    load_system_prompt(s.prompts_dir, name=s.bot_name, tools=[], operators=s.operators, allow_commands=s.allow_commands,
                       persona=s.persona)
    load_summary_prompt(s.prompts_dir, name=s.bot_name, max_tokens=s.summary_max_tokens)
    if s.tokenizer != "auto":
        get_token_counter(s.tokenizer)
    folder = recording.parent if recording is not None else s.recording_dir
    _writable_folder(folder, "the recording" if recording is not None else "recording_dir")


def _writable_folder(folder: Path, what: str) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigurationError(f"cannot create {folder} for {what}: {e.strerror}; choose a writable folder") from e
    if not os.access(folder, os.W_OK):
        raise ConfigurationError(f"{folder} ({what}) is not writable; choose a writable folder")
