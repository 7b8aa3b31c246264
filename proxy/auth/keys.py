"""The requestState key ring from settings; an ephemeral key when none is configured
(docs/decisions.md § 9)."""

from __future__ import annotations

import base64
import binascii
import os
import re
import time
from typing import Final

from config.settings import HeldCallSettings
from translators.held.request_state import KEY_SIZE, MAX_KID_LENGTH, KeyRing

# What `keygen --kid` accepts: a bare TOML key (no quoting) that is also one word in a shell line
# and in MRTR_BRIDGE_HELD_KEYS's kid=key pairs; within the key ring's length limit.
KID_CHARACTERS: Final = "letters, digits, '-' and '_'"
_KID: Final = re.compile(rf"[A-Za-z0-9_-]{{1,{MAX_KID_LENGTH}}}")


def new_key() -> tuple[str, str]:
    """A fresh (key id, base64url key) pair, as `mrtr-bridge keygen` prints it."""
    kid = time.strftime("k%Y%m%d", time.gmtime()) + os.urandom(2).hex()
    return kid, base64.urlsafe_b64encode(os.urandom(KEY_SIZE)).rstrip(b"=").decode()


def kid_problem(kid: str) -> str | None:
    """Why `kid` cannot be printed as a key id by `keygen`, or None."""
    if _KID.fullmatch(kid):
        return None
    return f"key id {kid!r} must be 1-{MAX_KID_LENGTH} characters: {KID_CHARACTERS}"


def decode_key(kid: str, encoded: str) -> bytes:
    try:
        key = base64.urlsafe_b64decode(encoded.strip() + "=" * (-len(encoded.strip()) % 4))
    except (binascii.Error, ValueError):
        raise ValueError(f"held.keys.{kid} is not base64url") from None
    if len(key) != KEY_SIZE:
        raise ValueError(f"held.keys.{kid} must decode to {KEY_SIZE} bytes, got {len(key)}")
    return key


def load_keyring(settings: HeldCallSettings) -> tuple[KeyRing, bool]:
    """(key ring, is_ephemeral). With no key configured a random one is made for this
    process only."""
    if not settings.keys:
        return KeyRing({"ephemeral": os.urandom(KEY_SIZE)}, "ephemeral", settings.aead), True
    keys = {
        kid: decode_key(kid, secret.get_secret_value()) for kid, secret in settings.keys.items()
    }
    active = settings.active_key
    if active is None:
        if len(keys) != 1:
            raise ValueError(
                "held.active_key must name the sealing key when several keys are configured"
            )
        active = next(iter(keys))
    return KeyRing(keys, active, settings.aead), False
