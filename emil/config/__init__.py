"""Typed settings from three layers: emil.toml < EMIL_* environment < command-line flags.

``settings`` is the model (:class:`Settings`, every field with its default and its check);
``load`` reads the layers, derives the flags and formats ``--print-config``.

Every field of :class:`Settings` is one key in emil.toml, one ``EMIL_<NAME>`` variable and one
``--<name>`` flag (underscores become dashes); the flags are derived from the model, never
written twice. :func:`load_settings` keeps, for each field, where its value came from, so
``--print-config`` can show it. A bad value raises :class:`~emil.exceptions.ConfigurationError`
naming the field, the value, its source and the fix.
"""

from emil.config.load import (
    DEFAULT_CONFIG_FILE,
    NPC_ENV,
    OTHER_ENV_VARS,
    ConfigFile,
    LoadedSettings,
    NpcTable,
    SettingsError,
    add_settings_flags,
    config_path,
    flags_from_namespace,
    format_settings,
    load_recorded_settings,
    load_settings,
    read_config_file,
    validate_settings,
)
from emil.config.settings import Settings, parse_address

__all__ = [
    "DEFAULT_CONFIG_FILE",
    "NPC_ENV",
    "OTHER_ENV_VARS",
    "ConfigFile",
    "LoadedSettings",
    "NpcTable",
    "Settings",
    "SettingsError",
    "add_settings_flags",
    "config_path",
    "flags_from_namespace",
    "format_settings",
    "load_recorded_settings",
    "load_settings",
    "parse_address",
    "read_config_file",
    "validate_settings",
]
