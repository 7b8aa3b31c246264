"""The effective settings as a TOML file, every secret masked (`mrtr-bridge config validate`).

The text loads back with `tomllib` and has the layout of `config/bridge.example.toml`: top-level
settings first, then one table per section, each setting on its own line. A setting without a
value is a comment (`# public_url =  (not set)`). Masked, as `***`: `SecretStr` settings
(`upstream.authorization`, `status.admin_token`, every `held.keys` value), the values of the other
secret tables (`upstream.env`, `upstream.headers`: their names stay), and in any URL its user info
and query (`http://***@proxy:3128`, `https://host/mcp?***`); a named upstream's
(`[upstreams.NAME]`) as `[upstream]`'s.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

from pydantic import BaseModel, SecretStr

from config.messages import SECRET_SETTINGS
from config.settings import Settings

MASK: Final = "***"
_URL: Final = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<userinfo>[^/@\s]*@)?(?P<rest>.*)")


def masked_text(value: str) -> str:
    """`value` with the user info and query of a URL masked; any other string as it is."""
    found = _URL.fullmatch(value)
    if found is None:
        return value
    rest, question, _query = found["rest"].partition("?")
    userinfo = f"{MASK}@" if found["userinfo"] else ""
    return f"{found['scheme']}{userinfo}{rest}{'?' + MASK if question else ''}"


def _toml_value(value: Any, secret: bool) -> str:
    if isinstance(value, SecretStr) or (secret and not isinstance(value, dict)):
        return json.dumps(MASK)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(masked_text(value), ensure_ascii=False)
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(_toml_value(item, secret) for item in value) + "]"
    if isinstance(value, dict):
        pairs = (
            f"{json.dumps(str(key), ensure_ascii=False)} = {_toml_value(item, secret)}"
            for key, item in value.items()
        )
        return "{ " + ", ".join(pairs) + " }" if value else "{}"
    raise TypeError(f"no TOML form for {type(value).__name__}")


def _line(dotted: str, name: str, value: Any) -> str:
    if value is None:
        return f"# {name} =  (not set)"
    return f"{name} = {_toml_value(value, dotted in SECRET_SETTINGS)}"


def _table(header: str, secrets_of: str, model: BaseModel) -> list[str]:
    """`[header]` and each setting of `model`, secret as `secrets_of.<name>` is."""
    lines = ["", f"[{header}]"]
    lines += [
        _line(f"{secrets_of}.{name}", name, getattr(model, name))
        for name in type(model).model_fields
    ]
    return lines


def effective_toml(settings: Settings) -> str:
    """Every setting of `settings` as TOML, secrets masked; each named upstream is an
    `[upstreams.NAME]` table with every setting it runs with, masked as `[upstream]` is."""
    lines: list[str] = []
    sections: list[tuple[str, BaseModel]] = []
    for name in type(settings).model_fields:
        value = getattr(settings, name)
        if isinstance(value, BaseModel):
            sections.append((name, value))
        elif name != "upstreams":
            lines.append(_line(name, name, value))
    for section, model in sections:
        lines += _table(section, section, model)
    for name, upstream in sorted(settings.upstreams.items()):
        lines += _table(f"upstreams.{name}", "upstream", upstream)
    return "\n".join(lines) + "\n"
