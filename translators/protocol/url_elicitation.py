"""A legacy `-32042` (URL elicitation required) lifted into modern URL-mode input requests.

Modern removed `-32042`; the held call asks the client for each listed URL interaction and, once
the client accepted them all, issues the upstream call again (docs/decisions.md § 11).
"""

from __future__ import annotations

from translators.protocol.eras import ELICIT
from translators.protocol.pushes import PendingPush, PushAnswer
from translators.wire.errors import LEGACY_URL_ELICITATION_REQUIRED, BridgeError, UpstreamFault
from translators.wire.fast_json import as_object
from translators.wire.jsonrpc import JsonObject


def is_url_elicitation_required(error: JsonObject | None) -> bool:
    return (error or {}).get("code") == LEGACY_URL_ELICITATION_REQUIRED


def lift_url_elicitations(error: JsonObject | None) -> dict[str, PendingPush]:
    """The URL-mode input requests a `-32042` lists, by input key (`url-1`, `url-2`, …)."""
    elicitations = as_object(as_object(error).get("data")).get("elicitations")
    if not isinstance(elicitations, list):
        return {}
    lifted = [e for e in elicitations if isinstance(e, dict) and isinstance(e.get("url"), str)]
    pending: dict[str, PendingPush] = {}
    for n, item in enumerate(lifted, start=1):
        key = f"url-{n}"
        params = {"mode": "url", "message": item.get("message", ""), "url": item["url"]}
        pending[key] = PendingPush(
            key, None, ELICIT, {"method": ELICIT, "params": params}, item.get("elicitationId")
        )
    return pending


def any_declined(answers: dict[str, PushAnswer]) -> bool:
    return any((a.result or {}).get("action") != "accept" for a in answers.values())


def url_declined() -> BridgeError:
    return UpstreamFault(
        "The server requires a URL interaction (elicitation) that the client did not accept",
        {"upstreamCode": LEGACY_URL_ELICITATION_REQUIRED},
        public=True,
    )


__all__ = ["any_declined", "is_url_elicitation_required", "lift_url_elicitations", "url_declined"]
