"""requestState key management (issue 6): keys come from the file or the environment only, and a
rotation keeps old states opening while new ones are sealed with the new key.

Rotation in operations (docs/operations.md): add the new key next to the old one, then make it
the active key, then, once every state sealed with the old key has expired (`held.ttl_s`), drop
the old key.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest

from config import ConfigError, load_settings
from proxy.app.cli_args import build_parser
from proxy.auth.keys import load_keyring, new_key
from translators.held.request_state import NONCE_SIZE, PREFIX, StateClaims, open_state, seal
from translators.wire.errors import InvalidRequestState

CLAIMS = StateClaims(
    continuation_id=bytes(16),
    round=1,
    replica_id="r0",
    principal_digest=bytes(16),
    method="tools/call",
    params_digest=bytes(16),
    keys_digest=bytes(8),
    expires_at_ms=2**40,
)


def kid_of(token: str) -> str:
    body = token[len(PREFIX) :]
    blob = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    return blob[1 : 1 + blob[0]].decode()


def test_rotation_old_key_opens_new_key_seals() -> None:
    """With both keys configured and the new one active, old states open and new states use the new
    key."""
    (old_kid, old_key), (new_kid, new_key_value) = new_key(), new_key()
    before = load_settings(None, {"MRTR_BRIDGE_HELD_KEYS": f"{old_kid}={old_key}"})
    during = load_settings(
        None,
        {
            "MRTR_BRIDGE_HELD_KEYS": f"{old_kid}={old_key},{new_kid}={new_key_value}",
            "MRTR_BRIDGE_HELD_ACTIVE_KEY": new_kid,
        },
    )
    after = load_settings(None, {"MRTR_BRIDGE_HELD_KEYS": f"{new_kid}={new_key_value}"})
    (old_ring, _), (both_ring, _), (new_ring, _) = (
        load_keyring(s.held) for s in (before, during, after)
    )
    old_state = seal(CLAIMS, old_ring, os.urandom(NONCE_SIZE))
    new_state = seal(CLAIMS, both_ring, os.urandom(NONCE_SIZE))
    assert (kid_of(old_state), kid_of(new_state)) == (old_kid, new_kid)
    assert open_state(old_state, both_ring) == open_state(new_state, both_ring) == CLAIMS
    assert open_state(new_state, new_ring) == CLAIMS
    with pytest.raises(InvalidRequestState) as dropped:
        open_state(old_state, new_ring)
    assert dropped.value.reason == "unknown_key"


def test_keys_come_from_a_file_and_never_show_in_a_repr(tmp_path: Path) -> None:
    """`[held.keys]` in the config file loads; the settings' repr masks every key."""
    kid, key = new_key()
    config = tmp_path / "bridge.toml"
    config.write_text(
        f'[upstream]\nurl = "http://127.0.0.1:1/mcp"\n\n[held.keys]\n{kid} = "{key}"\n'
    )
    settings = load_settings(config, {})
    ring, ephemeral = load_keyring(settings.held)
    assert (ring.key_ids, ring.active, ephemeral) == ((kid,), kid, False)
    assert key not in repr(settings) and key not in str(settings.model_dump())


def test_several_keys_need_an_active_key_named() -> None:
    """Two keys and no held.active_key is a startup error, not a silent choice."""
    (kid1, key1), (kid2, key2) = new_key(), new_key()
    settings = load_settings(None, {"MRTR_BRIDGE_HELD_KEYS": f"{kid1}={key1},{kid2}={key2}"})
    with pytest.raises(ValueError, match="active_key"):
        load_keyring(settings.held)


def test_no_key_can_be_given_on_the_command_line() -> None:
    """`serve` has no flag for keys (ps would show them), and a --held-keys override is refused."""
    parser = build_parser()
    help_text = parser.format_help() + "".join(
        action.format_help()
        for action in parser._subparsers._group_actions  # type: ignore[union-attr]
        for action in action.choices.values()
    )
    assert "--held" not in help_text and "--key" not in help_text
    with pytest.raises(SystemExit):
        parser.parse_args(["serve", "--upstream", "http://127.0.0.1:1/mcp", "--held-keys", "k=v"])


def test_a_malformed_key_fails_fast_without_printing_it() -> None:
    """A key that is not 32 bytes of base64url stops startup with a message that names the key id
    only."""
    secret = "not-a-key-" + "z" * 20
    with pytest.raises(ValueError) as failed:
        load_keyring(load_settings(None, {"MRTR_BRIDGE_HELD_KEYS": f"k1={secret}"}).held)
    assert "held.keys.k1" in str(failed.value) and secret not in str(failed.value)


def test_unknown_setting_names_are_errors_not_ignored() -> None:
    """A mistyped key variable is refused at startup rather than leaving the bridge on an ephemeral
    key."""
    with pytest.raises(ConfigError, match="MRTR_BRIDGE_HELD_KEY"):
        load_settings(None, {"MRTR_BRIDGE_HELD_KEY": "k1=abc"})
