"""2026-07-28 upstream clients, one request at a time: over HTTP (`http_caller.py`) and to a stdio
process (`stdio_caller.py`), both behind `caller.ModernCaller`."""
