"""The bridge's settings: the model and the one way to load it (docs/decisions.md § 1)."""

from config.loader import CONFIG_ENV, ENV_PREFIX, ConfigError, env_name, load_settings
from config.settings import Settings

__all__ = ["CONFIG_ENV", "ENV_PREFIX", "ConfigError", "Settings", "env_name", "load_settings"]
