"""How many pushes an upstream tool sends together, learned per tool and input round
(docs/decisions.md, "Push batching by learned size").

A legacy server that needs several inputs at once sends several pushes; the bridge wants them in
one `InputRequiredResult`, but nothing on the wire says which push is the last. The held call
(translators/held/machine.py) closes a batch as soon as it holds as many pushes as the same tool
sent for the same round last time, and otherwise at the `held.batch_quiet_ms` ceiling. Every closed
batch is noted here (`NoteBatchSize`), and so is a push that arrives after its round was answered
(the batch was larger than learned): the next call of the tool uses the corrected size.

Pure data, no I/O: the registry (proxy/calls/registry.py) owns one `BatchSizes` per bridge.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

from translators.protocol.eras import TOOLS_CALL

BatchKey = tuple[str, str]  # (method, tool or prompt name / resource URI)
MAX_KEYS: Final = 4096  # tools remembered; the least recently used is forgotten first
_NOTHING: Final[Mapping[int, int]] = MappingProxyType({})


def batch_key(method: str, params: Any) -> BatchKey:
    """What a call's batch sizes are learned under: its method and the tool, prompt or URI."""
    params = params if isinstance(params, dict) else {}
    name = params.get("name", params.get("uri", ""))
    return method, name if isinstance(name, str) else ""


class BatchSizes:
    """Learned batch size per (method, name) and input round; bounded to `max_keys` names.

    `declared` (`held.batch_sizes`): tool name -> pushes it sends together in every round, known
    before any call; a learned size replaces it for its round."""

    def __init__(self, declared: Mapping[str, int] | None = None, max_keys: int = MAX_KEYS) -> None:
        self._sizes: OrderedDict[BatchKey, dict[int, int]] = OrderedDict()
        self._declared = dict(declared or {})
        self._max_keys = max_keys

    def sizes(self, key: BatchKey) -> Mapping[int, int]:
        """What was learned for `key` (input round -> pushes sent together): the live table, to
        read only, so a held call costs no copy."""
        sizes = self._sizes.get(key)
        if sizes is None:
            return _NOTHING
        self._sizes.move_to_end(key)
        return sizes

    def declared(self, key: BatchKey) -> int:
        """The size `held.batch_sizes` declares for `key`'s tool in every round, or 0."""
        return self._declared.get(key[1], 0) if key[0] == TOOLS_CALL else 0

    def note(self, key: BatchKey, round_: int, size: int) -> None:
        """The pushes of `round_` came `size` together (the latest observation wins)."""
        if size < 1:
            return
        sizes = self._sizes.setdefault(key, {})
        sizes[round_] = size
        self._sizes.move_to_end(key)
        while len(self._sizes) > self._max_keys:
            self._sizes.popitem(last=False)

    def __len__(self) -> int:
        return len(self._sizes)

    def table(self, limit: int) -> list[tuple[BatchKey, dict[int, int]]]:
        """At most `limit` learned entries, the most recently used first (a copy)."""
        newest = list(reversed(self._sizes.items()))[:limit]
        return [(key, dict(sizes)) for key, sizes in newest]

    @property
    def declared_sizes(self) -> Mapping[str, int]:
        return MappingProxyType(self._declared)


__all__ = ["MAX_KEYS", "BatchKey", "BatchSizes", "batch_key"]
