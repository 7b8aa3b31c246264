"""Settings loading: defaults < file < environment < command line, and precise errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from config import ConfigError, Settings, env_name, load_settings
from config.loader import setting_fields

EXAMPLE = Path(__file__).resolve().parents[3] / "config" / "bridge.example.toml"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "bridge.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_need_no_file_and_no_environment() -> None:
    """With nothing configured the settings are the model's defaults."""
    assert load_settings(None, {}, {}) == Settings()


def test_the_example_file_states_the_defaults() -> None:
    """Every value written in config/bridge.example.toml is the default."""
    assert load_settings(EXAMPLE, {}, {}) == Settings()


def test_the_example_file_documents_every_setting() -> None:
    """Each setting of the model appears in the example, set or commented out, under its section."""
    documented: set[str] = set()
    section = ""
    for line in EXAMPLE.read_text(encoding="utf-8").splitlines():
        if header := re.fullmatch(r"#?\s*\[([\w.]+)\]", line.strip()):
            section = header.group(1)
            documented.add(section)
        elif key := re.fullmatch(r"#?\s*(\w+)\s*=.*", line.strip()):
            documented.add(f"{section}.{key.group(1)}" if section else key.group(1))
    assert set(setting_fields()) <= documented


def test_environment_beats_file_and_command_line_beats_both(tmp_path: Path) -> None:
    """The precedence is command line > environment > file > defaults, field by field."""
    path = write(tmp_path, '[front]\nlisten = "127.0.0.1:1000"\npath = "/bridge"\n')
    env = {"MRTR_BRIDGE_FRONT_LISTEN": "127.0.0.1:2000"}
    assert load_settings(path, {}, {}).front.listen == "127.0.0.1:1000"
    from_env = load_settings(path, env, {})
    assert (from_env.front.listen, from_env.front.path) == ("127.0.0.1:2000", "/bridge")
    assert (
        load_settings(path, env, {"front.listen": "127.0.0.1:3000"}).front.listen
        == "127.0.0.1:3000"
    )


def test_unset_command_line_flags_are_ignored() -> None:
    """Overrides that are None (flags not given) leave lower layers alone."""
    env = {"MRTR_BRIDGE_UPSTREAM_URL": "http://127.0.0.1:9/mcp"}
    assert load_settings(None, env, {"upstream.url": None}).upstream.url == "http://127.0.0.1:9/mcp"


def test_the_config_file_can_come_from_the_environment(tmp_path: Path) -> None:
    """MRTR_BRIDGE_CONFIG names the file; an explicit file wins over it."""
    named = write(tmp_path, 'server_identity = "bridge"\n')
    explicit = tmp_path / "other.toml"
    explicit.write_text('server_identity = "upstream"\n', encoding="utf-8")
    env = {"MRTR_BRIDGE_CONFIG": str(named)}
    assert load_settings(None, env, {}).server_identity == "bridge"
    assert load_settings(explicit, env, {}).server_identity == "upstream"


def test_environment_values_are_typed_from_the_model() -> None:
    """Numbers, booleans, tuples, mappings, optionals and top-level fields all parse from
    strings."""
    settings = load_settings(
        None,
        {
            "MRTR_BRIDGE_HELD_TTL_S": "30.5",
            "MRTR_BRIDGE_FRONT_MAX_BODY_BYTES": "2048",
            "MRTR_BRIDGE_UPSTREAM_FORWARD_AUTHORIZATION": "false",
            "MRTR_BRIDGE_FRONT_ALLOWED_HOSTS": " a.example, b.example ,",
            "MRTR_BRIDGE_UPSTREAM_UNOWNED_ROOTS": "",
            "MRTR_BRIDGE_HELD_KEYS": "k1=AAAA=,k2=BBBB",
            "MRTR_BRIDGE_UPSTREAM_URL": "",
            "MRTR_BRIDGE_SERVER_IDENTITY": "bridge",
        },
        {},
    )
    assert settings.held.ttl_s == 30.5
    assert settings.front.max_body_bytes == 2048
    assert settings.upstream.forward_authorization is False
    assert settings.front.allowed_hosts == ("a.example", "b.example")
    assert settings.upstream.unowned_roots == ()
    assert {kid: key.get_secret_value() for kid, key in settings.held.keys.items()} == {
        "k1": "AAAA=",
        "k2": "BBBB",
    }
    assert settings.upstream.url is None
    assert settings.server_identity == "bridge"


def test_file_keys_table_is_read(tmp_path: Path) -> None:
    """[held.keys] in the file becomes the key ring's secrets."""
    path = write(tmp_path, '[held]\nactive_key = "k1"\n[held.keys]\nk1 = "c2VjcmV0"\n')
    held = load_settings(path, {}, {}).held
    assert (held.active_key, held.keys["k1"].get_secret_value()) == ("k1", "c2VjcmV0")


@pytest.mark.parametrize(
    "dotted", ["upstream.url", "front.listen", "held.ttl_s", "held.keys", "server_identity"]
)
def test_env_name_follows_section_and_field(dotted: str) -> None:
    """Every setting's variable is MRTR_BRIDGE_ plus its dotted name in upper snake case."""
    assert env_name(dotted) == "MRTR_BRIDGE_" + dotted.replace(".", "_").upper()


@pytest.mark.parametrize(
    ("env", "overrides", "expected"),
    [
        (
            {"MRTR_BRIDGE_HELD_TTL_S": "soon"},
            {},
            "invalid setting held.ttl_s (from environment MRTR_BRIDGE_HELD_TTL_S): "
            "given 'soon'; allowed: a number",
        ),
        (
            {"MRTR_BRIDGE_FRONT_MAX_BODY_BYTES": "10"},
            {},
            "invalid setting front.max_body_bytes (from environment "
            "MRTR_BRIDGE_FRONT_MAX_BODY_BYTES): "
            "given '10'; allowed: a number of at least 1024",
        ),
        (
            {},
            {"front.listen": "8080"},
            "invalid setting front.listen (from command line): "
            "given '8080'; allowed: HOST:PORT, e.g. 127.0.0.1:8080 or 0.0.0.0:8080",
        ),
        (
            {"MRTR_BRIDGE_LOG_LEVEL": "loud"},
            {},
            "invalid setting log.level (from environment MRTR_BRIDGE_LOG_LEVEL): "
            "given 'loud'; allowed: 'debug', 'info', 'warning' or 'error'",
        ),
        (
            {"MRTR_BRIDGE_UPSTREM_URL": "http://x"},
            {},
            "invalid setting MRTR_BRIDGE_UPSTREM_URL (from environment MRTR_BRIDGE_UPSTREM_URL): "
            "unknown MRTR_BRIDGE_* environment variable; did you mean MRTR_BRIDGE_UPSTREAM_URL?",
        ),
        (
            {"MRTR_BRIDGE_HELD_KEYS": "k1"},
            {},
            "invalid setting held.keys (from environment MRTR_BRIDGE_HELD_KEYS): expected "
            "comma-separated id=value pairs",
        ),
        (
            {"MRTR_BRIDGE_IDENTITY_PRINCIPAL": "header"},
            {},
            "missing setting identity.principal_header: required when identity.principal is "
            '"header" (from environment MRTR_BRIDGE_IDENTITY_PRINCIPAL): the name of the header '
            "that carries the caller's identity (e.g. X-Forwarded-User), in the config file or "
            "MRTR_BRIDGE_IDENTITY_PRINCIPAL_HEADER",
        ),
    ],
)
def test_bad_values_fail_fast_naming_key_and_source(
    env: dict[str, str], overrides: dict[str, str], expected: str
) -> None:
    """A bad value is a ConfigError naming the dotted key, where it came from and what is wrong."""
    with pytest.raises(ConfigError) as caught:
        load_settings(None, env, overrides)
    assert str(caught.value) == expected


def test_unknown_file_keys_are_named(tmp_path: Path) -> None:
    """A misspelt key in the file is reported with its dotted name, the file and the nearest
    setting (not the whole section's list)."""
    path = write(tmp_path, "[front]\nlisen = 1\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(path, {}, {})
    assert str(caught.value) == (
        f"invalid setting front.lisen (from config file {path}): no such setting; did you mean "
        "front.listen?"
    )
    assert caught.value.key == "front.lisen"


@pytest.mark.parametrize(
    ("text", "key", "hint"),
    [
        ('[upstrem]\nurl = "http://127.0.0.1:8931/mcp"\n', "upstrem", "did you mean upstream?"),
        ("[Upstream]\ntransport = 'sse'\n", "Upstream", "did you mean upstream?"),
        ("[upstream]\nurll = 'http://h/mcp'\n", "upstream.urll", "did you mean upstream.url?"),
        ("[front]\nurl = 'http://h/mcp'\n", "front.url", "did you mean upstream.url?"),
        ("[held]\nttl = 5\n", "held.ttl", "did you mean held.ttl_s?"),
        ("log_level = 'debug'\n", "log_level", "did you mean log.level?"),
        (
            "[front]\nzzzqqq = 1\n",
            "front.zzzqqq",
            "`mrtr-bridge config example` prints every setting",
        ),
    ],
)
def test_an_unknown_section_or_key_names_the_file_and_the_nearest_setting(
    tmp_path: Path, text: str, key: str, hint: str
) -> None:
    """A misspelt section or key, or one in the wrong section, names its file and the setting it
    most likely meant; with nothing near, where the full list is."""
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_settings(path, {}, {})
    assert str(caught.value) == (
        f"invalid setting {key} (from config file {path}): no such setting; {hint}"
    )


def test_errors_never_echo_the_value(tmp_path: Path) -> None:
    """A rejected secret is not repeated in the error message."""
    path = write(tmp_path, "[upstream]\nauthorization = 987654321\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(path, {}, {})
    assert caught.value.key == "upstream.authorization"
    assert "987654321" not in str(caught.value)


def test_unreadable_and_invalid_files_are_config_errors(tmp_path: Path) -> None:
    """A missing file or a TOML syntax error fails with the file named."""
    missing = tmp_path / "absent.toml"
    with pytest.raises(ConfigError) as caught:
        load_settings(missing, {}, {})
    assert (
        str(caught.value)
        == f"invalid setting config: cannot read {missing}: No such file or directory"
    )
    broken = write(tmp_path, "[front\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(broken, {}, {})
    assert str(caught.value).startswith(f"invalid setting config: {broken} is not valid TOML: ")
