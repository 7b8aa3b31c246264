"""The Tasks extension (`io.modelcontextprotocol/tasks`) in front of legacy 2025-11-25 tasks:
pure message mapping and sealed task ids (docs/tasks.md). Not `proxy/common/owned_tasks.py`, which
owns the bridge's asyncio background tasks."""
