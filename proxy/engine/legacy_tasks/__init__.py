"""Legacy 2025-11-25 tasks served through the Tasks extension: the running tasks, their store and
routes (docs/tasks.md). Not `proxy/common/owned_tasks.py`, which owns the bridge's asyncio
background tasks."""
