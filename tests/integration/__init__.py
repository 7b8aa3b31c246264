"""Integration tests: real legacy peers, the bridge, and the mcp 2.x client."""
