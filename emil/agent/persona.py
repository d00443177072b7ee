"""Emil's system prompt: persona and rules rendered from editable templates in prompts/.

Rendered once at start; the result is pinned at the top of every prompt and never changes
during a session (live status rides in the newest message, so the prefix cache holds).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import jinja2

from emil.exceptions import ConfigurationError

__all__ = ["DEFAULT_PROMPTS_DIR", "PROMPT_FILES", "load_system_prompt"]

DEFAULT_PROMPTS_DIR = Path(__file__).resolve().parents[2] / "prompts"
"""prompts/ beside the emil package (a source checkout or an editable install)."""

PROMPT_FILES = ("persona.md.j2", "rules.md.j2")


def load_system_prompt(
    prompts_dir: Path | None,
    *,
    name: str,
    tools: Sequence[str],
    operators: Sequence[str] = (),
    allow_commands: bool = False,
    persona: str = "",
) -> str:
    """Render persona + rules; a missing file or template error is a configuration error.

    ``persona`` (the setting): who this NPC is, rendered into persona.md.j2; empty = Emil's own."""
    folder = prompts_dir or DEFAULT_PROMPTS_DIR
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(folder)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=False,
        autoescape=False,
    )
    parts = []
    for filename in PROMPT_FILES:
        try:
            template = env.get_template(filename)
            parts.append(
                template.render(name=name, tools=list(tools), operators=list(operators), allow_commands=allow_commands,
                                persona=persona.strip()).strip()
            )
        except jinja2.TemplateNotFound as e:
            raise ConfigurationError(
                f"prompt template {folder / filename} not found; set prompts_dir to a folder holding {', '.join(PROMPT_FILES)}"
            ) from e
        except jinja2.TemplateError as e:
            raise ConfigurationError(f"prompt template {folder / filename} has an error: {e}; fix the template") from e
    return "\n\n".join(parts) + "\n"
