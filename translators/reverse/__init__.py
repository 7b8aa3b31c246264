"""The reverse direction (pure): a legacy client's session served by the bridge in front of a
2026-07-28 upstream (docs/directions.md)."""
