"""The reverse direction: legacy clients' sessions served by the bridge in front of a 2026-07-28
upstream (docs/directions.md). The pure mapping is in `translators.reverse`."""
