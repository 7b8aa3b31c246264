"""The legacy revisions the bridge speaks upstream, and what each one has (docs/revisions.md).

The bridge offers `OFFERED` in `initialize`; a server that does not support it answers with an older
revision, and the session then speaks that one. Every difference between revisions the bridge acts
on is a field of `Revision`, read by the translators; nothing compares version strings by order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from translators.protocol.eras import LEGACY_VERSION
from translators.wire.errors import UpstreamProtocolError


@dataclass(frozen=True)
class Revision:
    """One legacy revision and the features the bridge relies on."""

    version: str
    elicitation: bool  # `elicitation/create` exists (form mode)
    elicitation_modes: (
        bool  # `elicitation: {form, url}` capability, URL mode, -32042, .../elicitation/complete
    )
    rich_enums: bool  # titled / multi-select enums and defaults in elicitation schemas
    # sampling `tools` / `toolChoice` / tool-use content; `sampling.{context,tools}` capability
    sampling_tools: bool
    version_header: bool  # Streamable HTTP requests carry `MCP-Protocol-Version`
    batches: bool  # a message may be a JSON array of messages
    completions_flag: bool  # servers declare the `completions` capability
    audio: bool  # audio content blocks
    completion_context: bool  # `completion/complete` carries `context` (earlier arguments)


_FEATURES: Final = (
    "elicitation",
    "elicitation_modes",
    "rich_enums",
    "sampling_tools",
    "version_header",
    "batches",
    "completions_flag",
    "audio",
    "completion_context",
)
_MATRIX: Final = {  # one column per feature, in the order of _FEATURES
    "2025-11-25": (1, 1, 1, 1, 1, 0, 1, 1, 1),
    "2025-06-18": (1, 0, 0, 0, 1, 0, 1, 1, 1),
    "2025-03-26": (0, 0, 0, 0, 0, 1, 1, 1, 0),
    "2024-11-05": (0, 0, 0, 0, 0, 0, 0, 0, 0),
}
REVISIONS: Final[dict[str, Revision]] = {
    version: Revision(
        version, **{name: bool(flag) for name, flag in zip(_FEATURES, row, strict=True)}
    )
    for version, row in _MATRIX.items()
}
SUPPORTED: Final[tuple[str, ...]] = tuple(REVISIONS)
OFFERED: Final = LEGACY_VERSION
NEWEST: Final = REVISIONS[OFFERED]


class UnsupportedUpstreamVersion(UpstreamProtocolError):
    """The upstream answered `initialize` with a revision outside `SUPPORTED`."""

    def __init__(self, upstream: str, answered: Any, data: dict[str, Any] | None = None) -> None:
        self.answered = answered if isinstance(answered, str) else repr(answered)
        super().__init__(
            f"Upstream {upstream} answered initialize with protocol version {self.answered[:40]!r};"
            f" the bridge supports {', '.join(SUPPORTED)} upstream",
            {**(data or {}), "upstreamVersion": self.answered[:40], "supported": list(SUPPORTED)},
            public=f"The upstream server speaks protocol version {self.answered[:40]!r}; the "
            "bridge supports"
            f" {', '.join(SUPPORTED)} upstream",
        )

    @property
    def verdict(self) -> str:
        """The same reason without the upstream's address (for `/readyz`)."""
        return (
            f"unsupported protocol version {self.answered[:40]!r} (supported: "
            f"{', '.join(SUPPORTED)})"
        )


def negotiated(upstream: str, answered: Any, data: dict[str, Any] | None = None) -> Revision:
    """The revision of a session whose server answered `initialize` with `answered`."""
    if isinstance(answered, str) and answered in REVISIONS:
        return REVISIONS[answered]
    raise UnsupportedUpstreamVersion(upstream, answered, data)


__all__ = [
    "NEWEST",
    "OFFERED",
    "REVISIONS",
    "SUPPORTED",
    "Revision",
    "UnsupportedUpstreamVersion",
    "negotiated",
]
