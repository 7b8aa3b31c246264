"""Settings from defaults < TOML file < environment < command line, validated once
(docs/decisions.md § 1).

Named upstreams (docs/several-servers.md) come from `[upstreams.NAME]` tables, a desktop client's
`mcpServers` file (`--servers-json`) and `--upstream NAME=URL` / `--upstream-command NAME=CMD`;
each is `[upstream]` (file, environment) with its own table over it. With named upstreams,
`[upstream]` holds only what they share: a url or command there is refused, naming the fix.

Environment variables are `MRTR_BRIDGE_<SECTION>_<FIELD>` (e.g. `MRTR_BRIDGE_UPSTREAM_URL`), or
`MRTR_BRIDGE_<FIELD>` for top-level fields; `MRTR_BRIDGE_CONFIG` names the file. Tuples are
comma-separated; mappings are `id=value` pairs separated by commas
(`MRTR_BRIDGE_HELD_KEYS="k1=<base64url>,k2=<base64url>"`). The names come from the `Settings` model,
so a new field gets its variable for free, and an unknown `MRTR_BRIDGE_*` variable is an error
rather than a silently ignored typo. A bad value fails fast with a `ConfigError` naming the dotted
key, where it came from (file, environment variable or flag), the value given (never a secret's:
`config.messages`) and what is allowed, in plain words.
"""

from __future__ import annotations

import functools
import ssl
import tomllib
import types
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

from pydantic import BaseModel, SecretStr, ValidationError

from config.messages import allowed, nearest, shared_key, shown
from config.servers_json import ServersJson
from config.settings import Settings, UpstreamSettings
from config.tls import tls_context

ENV_PREFIX: Final = "MRTR_BRIDGE_"
CONFIG_ENV: Final = "MRTR_BRIDGE_CONFIG"

Layer = dict[str, Any]


class ConfigError(ValueError):
    """A setting is missing, unknown or invalid; `key` is its dotted name (`upstream.url`)."""

    def __init__(
        self, key: str, message: str, source: str | None = None, given: str | None = None
    ) -> None:
        where = f" (from {source})" if source else ""
        value = f"given {given}; " if given is not None else ""
        super().__init__(f"invalid setting {key}{where}: {value}{message}")
        self.key = key
        self.source = source


class MissingSetting(ConfigError):
    """`key` is required because another setting, `because` (from `source`), asks for it."""

    def __init__(self, key: str, because: str, source: str | None, message: str) -> None:
        where = f" (from {source})" if source else ""
        ValueError.__init__(
            self, f"missing setting {key}: required when {because}{where}: {message}"
        )
        self.key = key
        self.source = source


def env_name(dotted: str) -> str:
    """The environment variable of a dotted setting name: `held.ttl_s` ->
    `MRTR_BRIDGE_HELD_TTL_S`."""
    return ENV_PREFIX + dotted.replace(".", "_").upper()


NAMED: Final = "upstreams"  # the table of named upstreams: `[upstreams.NAME]`, no variable


def setting_fields() -> dict[str, Any]:
    """Every leaf setting by dotted name, with its type annotation (`upstreams`: the named
    upstreams' tables, as one)."""
    fields: dict[str, Any] = {}
    for name, info in Settings.model_fields.items():
        annotation = info.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            for sub, sub_info in annotation.model_fields.items():
                fields[f"{name}.{sub}"] = sub_info.annotation
        else:
            fields[name] = annotation
    return fields


def _is_optional(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (typing.Union, types.UnionType) and type(
        None
    ) in typing.get_args(annotation)


def _pairs(dotted: str, raw: str, source: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in raw.split(","))):
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ConfigError(dotted, "expected comma-separated id=value pairs", source)
        pairs[name.strip()] = value.strip()
    return pairs


def _env_value(dotted: str, annotation: Any, raw: str, source: str) -> Any:
    """Turn one environment string into what pydantic expects for `annotation`."""
    origin = typing.get_origin(annotation)
    if origin is tuple:
        return tuple(filter(None, (part.strip() for part in raw.split(","))))
    if origin is dict:
        return _pairs(dotted, raw, source)
    if raw.strip() == "" and _is_optional(annotation):
        return None
    return raw.strip()


def _nest(flat: Mapping[str, Any]) -> Layer:
    nested: Layer = {}
    for dotted, value in flat.items():
        section, _, name = dotted.rpartition(".")
        (nested.setdefault(section, {}) if section else nested)[name] = value
    return nested


def _env_layer(env: Mapping[str, str], sources: dict[str, str]) -> Layer:
    fields = setting_fields()
    by_env = {env_name(dotted): dotted for dotted in fields}
    flat: dict[str, Any] = {}
    for variable, raw in env.items():
        if not variable.startswith(ENV_PREFIX) or variable == CONFIG_ENV:
            continue
        source = f"environment {variable}"
        dotted = by_env.get(variable)
        if variable.startswith(env_name(NAMED)):
            raise ConfigError(
                variable,
                "named upstreams have no environment variables: give them as [upstreams.NAME] in "
                "the config file, --upstream NAME=URL, --upstream-command NAME=CMD or "
                "--servers-json FILE (the MRTR_BRIDGE_UPSTREAM_* variables apply to every one)",
                source,
            )
        if dotted is None:
            near = nearest(variable, [*by_env, CONFIG_ENV])
            hint = f"; did you mean {near}?" if near else ""
            raise ConfigError(variable, f"unknown MRTR_BRIDGE_* environment variable{hint}", source)
        flat[dotted] = _env_value(dotted, fields[dotted], raw, source)
        sources[dotted] = source
    return _nest(flat)


def _file_layer(path: Path, sources: dict[str, str]) -> Layer:
    source = f"config file {path}"
    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle)
    except OSError as exc:
        raise ConfigError("config", f"cannot read {path}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError("config", f"{path} is not valid TOML: {exc}") from None
    for key, value in data.items():
        names = [f"{key}.{sub}" for sub in value] if isinstance(value, dict) else []
        sources.update(dict.fromkeys([key, *names], source))
    return data


def _servers_layer(servers: ServersJson, sources: dict[str, str]) -> Layer:
    """The named upstreams of a desktop client's `mcpServers` file (`--servers-json`)."""
    for name, table in servers.upstreams.items():
        for key in [f"{NAMED}.{name}", *(f"{NAMED}.{name}.{sub}" for sub in table)]:
            sources[key] = f"servers file {servers.path}"
    return {NAMED: {name: dict(table) for name, table in servers.upstreams.items()}}


def _override_layer(
    overrides: Mapping[str, Any], sources: dict[str, str], flags: Mapping[str, str]
) -> Layer:
    flat = {dotted: value for dotted, value in overrides.items() if value is not None}
    for dotted in flat:
        flag = flags.get(dotted) or flags.get(shared_key(dotted))  # upstreams.a.url: --upstream
        sources[dotted] = f"command line {flag}" if flag else "command line"
    named = {dotted: value for dotted, value in flat.items() if dotted.startswith(NAMED + ".")}
    layer = _nest({dotted: value for dotted, value in flat.items() if dotted not in named})
    for dotted, value in named.items():  # upstreams.NAME.key: one level deeper
        _, name, key = dotted.split(".", 2)
        layer.setdefault(NAMED, {}).setdefault(name, {})[key] = value
    return layer


def _merge(layers: list[Layer]) -> Layer:
    """Merge section by section: a later layer replaces a field, never a whole section (nor a whole
    named upstream's table)."""
    merged: Layer = {}
    for layer in layers:
        for key, value in layer.items():
            if key == NAMED and isinstance(value, dict) and isinstance(merged.get(key), dict):
                tables = merged[key]
                for name, table in value.items():
                    old = tables.get(name)
                    both = isinstance(old, dict) and isinstance(table, dict)
                    tables[name] = {**old, **table} if both else table
            elif isinstance(value, dict) and isinstance(merged.get(key), dict):
                merged[key] = {**merged[key], **value}
            else:
                merged[key] = value
    return merged


def _named_over_shared(merged: Layer, sources: Mapping[str, str]) -> Layer:
    """Each named upstream's table over `[upstream]`, which then must not name an upstream itself
    (one unnamed upstream, or several named ones)."""
    tables = merged.get(NAMED)
    if not tables:
        return merged
    if not isinstance(tables, dict):
        raise ConfigError(NAMED, "expected [upstreams.NAME] tables", _source_of(NAMED, sources))
    shared = merged.get("upstream") or {}
    for key in ("url", "command"):
        if isinstance(shared, dict) and shared.get(key):
            raise ConfigError(
                f"upstream.{key}",
                "with named upstreams, [upstream] holds only the settings they share: give this "
                "upstream a name (--upstream NAME=URL, --upstream-command NAME=CMD, or an "
                "[upstreams.NAME] table) or leave the named ones out",
                _source_of(f"upstream.{key}", sources),
            )
    own = {
        name: {**shared, **table} if isinstance(table, dict) and isinstance(shared, dict) else table
        for name, table in tables.items()
    }
    return {**merged, NAMED: own}


def _source_of(dotted: str, sources: Mapping[str, str]) -> str | None:
    parts = dotted.split(".")
    for size in range(len(parts), 0, -1):
        source = sources.get(".".join(parts[:size]))
        if source is not None:
            return source
    return None


def meant(dotted: str) -> str | None:
    """The setting an unknown one most likely meant: a near name in its own section or at the top
    (`front.lisen` -> `front.listen`, `upstrem` -> `upstream`), the same name in another section
    (`front.url` -> `upstream.url`), or a near dotted name."""
    section, _, name = dotted.rpartition(".")
    fields = setting_fields()
    here = [key.rpartition(".")[2] for key in fields if key.rpartition(".")[0] == section]
    if not section:
        here = list(Settings.model_fields)
    near = nearest(name, here)
    if near is not None:
        return f"{section}.{near}" if section else near
    elsewhere = [key for key in fields if key.rpartition(".")[2] == name]
    return elsewhere[0] if len(elsewhere) == 1 else nearest(dotted, fields)


def _validate(merged: Layer, sources: Mapping[str, str]) -> Settings:
    merged = _named_over_shared(merged, sources)
    try:
        settings = Settings.model_validate(merged)
    except ValidationError as exc:
        first = exc.errors()[0]
        dotted = ".".join(str(part) for part in first["loc"]) or "settings"
        given = None if first["type"] == "extra_forbidden" else shown(dotted, first.get("input"))
        suggestion = meant(dotted) if first["type"] == "extra_forbidden" else None
        raise ConfigError(
            dotted, allowed(first, suggestion), _source_of(dotted, sources), given
        ) from None
    _check_cluster_keys(settings, sources)
    if settings.identity.principal == "header" and not settings.identity.principal_header:
        source = _source_of("identity.principal", sources)
        raise MissingSetting(
            "identity.principal_header",
            'identity.principal is "header"',
            source,
            "the name of the header that carries the caller's identity (e.g. X-Forwarded-User), in "
            f"the config file or {env_name('identity.principal_header')}",
        )
    _check_tls_files(settings, sources)
    return _with_authorization_file(settings, sources)


def _upstreams_of(settings: Settings) -> list[tuple[str, UpstreamSettings]]:
    """Every upstream's settings with the dotted prefix of their keys: `[upstream]`, then each named
    one (`upstreams.NAME`)."""
    named = [(f"{NAMED}.{name}", upstream) for name, upstream in settings.upstreams.items()]
    return [("upstream", settings.upstream), *named]


def _check_tls_files(settings: Settings, sources: Mapping[str, str]) -> None:
    """Every upstream's TLS files load now, not at the first call: a path that cannot be read, or
    a file that is not a PEM certificate or key, is one line at start-up (its content never
    shown)."""
    for prefix, upstream in _upstreams_of(settings):
        _check_tls_of(prefix, upstream, sources)


def _check_tls_of(prefix: str, upstream: UpstreamSettings, sources: Mapping[str, str]) -> None:
    if upstream.tls_client_key is not None and upstream.tls_client_cert is None:
        key = f"{prefix}.tls_client_key"
        raise ConfigError(key, f"needs {prefix}.tls_client_cert", _source_of(key, sources))
    checks: list[tuple[str, str, Callable[[], object]]] = []
    if upstream.tls_ca_file is not None:
        cafile = upstream.tls_ca_file
        load_ca = functools.partial(ssl.create_default_context, cafile=cafile)
        checks.append((f"{prefix}.tls_ca_file", cafile, load_ca))
    if upstream.tls_client_cert is not None:
        files = " and ".join(filter(None, (upstream.tls_client_cert, upstream.tls_client_key)))
        checks.append((f"{prefix}.tls_client_cert", files, lambda: tls_context(upstream)))
    for key, files, load in checks:
        try:
            load()
        except (OSError, ssl.SSLError) as exc:
            reason = (  # an SSLError is an OSError too: first
                f"not a PEM file of the right kind ({exc.reason or type(exc).__name__})"
                if isinstance(exc, ssl.SSLError)
                else exc.strerror or type(exc).__name__
            )
            raise ConfigError(
                key, f"cannot load {files}: {reason}", _source_of(key, sources)
            ) from None


def _check_cluster_keys(settings: Settings, sources: Mapping[str, str]) -> None:
    """Replicas must share a requestState key: an ephemeral one per replica could not open another
    replica's `requestState`."""
    if settings.cluster.enabled and not settings.held.keys:
        peers = "cluster.peers" if settings.cluster.peers else "cluster.peers_dns"
        raise MissingSetting(
            "held.keys",
            f"{peers} is set",
            _source_of(peers, sources),
            "replicas need held.keys shared by every replica (an ephemeral key cannot open "
            "another replica's requestState); make one with `mrtr-bridge keygen` and set "
            f"{env_name('held.keys')} on every replica",
        )


def _with_authorization_file(settings: Settings, sources: Mapping[str, str]) -> Settings:
    """Read every upstream's `authorization_file` into its `authorization` (the value is never
    echoed)."""
    read = {
        prefix: _authorization_of(prefix, upstream, sources)
        for prefix, upstream in _upstreams_of(settings)
    }
    named = {name: read[f"{NAMED}.{name}"] for name in settings.upstreams}
    return settings.model_copy(update={"upstream": read["upstream"], NAMED: named})


def _authorization_of(
    prefix: str, upstream: UpstreamSettings, sources: Mapping[str, str]
) -> UpstreamSettings:
    if upstream.authorization_file is None:
        return upstream
    key = f"{prefix}.authorization_file"
    source = _source_of(key, sources)
    if upstream.authorization is not None:
        raise ConfigError(
            key, f"give {prefix}.authorization or {prefix}.authorization_file, not both", source
        )
    try:
        value = Path(upstream.authorization_file).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise ConfigError(
            key, f"cannot read {upstream.authorization_file}: {reason}", source
        ) from None
    try:
        return UpstreamSettings.model_validate(
            {**dict(upstream), "authorization": SecretStr(value)}
        )
    except ValidationError as exc:
        message = exc.errors(include_input=False)[0]["msg"]
        raise ConfigError(key, f"its content is not usable: {message}", source) from None


def load_settings(
    config_file: Path | None,
    env: Mapping[str, str],
    overrides: Mapping[str, Any] | None = None,
    flags: Mapping[str, str] | None = None,
    servers: ServersJson | None = None,
) -> Settings:
    """Build the one `Settings` object: defaults < file < `servers` (an `mcpServers` file's named
    upstreams) < environment < `overrides` (dotted keys; `upstreams.NAME.url` for a named one).

    `config_file` wins over `MRTR_BRIDGE_CONFIG`; `overrides` entries that are None are ignored;
    `flags` names the command-line flag of an override (`front.listen` -> `--listen`) for errors."""
    sources: dict[str, str] = {}
    layers: list[Layer] = []
    path = config_file or (Path(env[CONFIG_ENV]) if env.get(CONFIG_ENV) else None)
    if path is not None:
        layers.append(_file_layer(path, sources))
    if servers is not None:
        layers.append(_servers_layer(servers, sources))
    layers.append(_env_layer(env, sources))
    layers.append(_override_layer(overrides or {}, sources, flags or {}))
    return _validate(_merge(layers), sources)


__all__ = [
    "CONFIG_ENV",
    "ENV_PREFIX",
    "NAMED",
    "ConfigError",
    "MissingSetting",
    "env_name",
    "load_settings",
    "meant",
    "setting_fields",
]
