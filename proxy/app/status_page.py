"""The HTML of `GET /status`: the facts of `/status.json` (proxy/app/status.py) as one page, no
script, every value escaped, refreshed by the browser every `REFRESH_S` seconds."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from html import escape
from typing import Any, Final

REFRESH_S: Final = 5
_STYLE: Final = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#1d2329;background:#f7f8fa}
h1{font-size:20px;margin:0 0 .2em}h2{font-size:16px;margin:1.4em 0 .4em}
.meta{color:#5b6570;margin-bottom:1em}
.cards{display:flex;gap:1em;flex-wrap:wrap}
.card{background:#fff;border:1px solid #d8dde3;border-radius:6px;padding:.6em 1em;min-width:9em}
.card b{display:block;font-size:22px}
table{border-collapse:collapse;background:#fff;border:1px solid #d8dde3;min-width:40em}
th,td{padding:.3em .8em;text-align:left;border-bottom:1px solid #eceff2}
th{background:#eef1f4;font-weight:600}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.none{color:#7a848e;font-style:italic}
.waiting_client{color:#9a5b00;font-weight:600}
"""


def _cell(value: Any) -> str:
    if value is None:
        return '<td class="none">-</td>'
    if isinstance(value, bool):
        return f"<td>{'yes' if value else 'no'}</td>"
    if isinstance(value, int | float):
        return f'<td class="num">{escape(str(value))}</td>'
    css = ' class="waiting_client"' if value == "waiting_client" else ""
    return f"<td{css}>{escape(str(value))}</td>"


def _table(
    columns: Sequence[tuple[str, str]], rows: Iterable[Mapping[str, Any]], empty: str
) -> str:
    body = "".join(
        "<tr>" + "".join(_cell(row.get(key)) for key, _ in columns) + "</tr>" for row in rows
    )
    if not body:
        return f'<p class="none">{escape(empty)}</p>'
    head = "".join(f"<th>{escape(title)}</th>" for _, title in columns)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _card(title: str, value: Any) -> str:
    return f'<div class="card">{escape(title)}<b>{escape(str(value))}</b></div>'


def render_page(facts: Mapping[str, Any]) -> str:
    bridge, held = facts["bridge"], facts["held"]
    upstream = facts["upstreams"][0]
    replicas, batches = facts["replicas"], facts["batch_sizes"]
    last_error = upstream["last_error"]
    error_text = f"{last_error['error']} at {last_error['at']}" if last_error else "none"
    per_tool = [{"tool": tool, "held": count} for tool, count in held["per_tool"].items()]
    learned = [
        {
            "method": row["method"],
            "name": row["name"],
            "sizes": ", ".join(f"round {r}: {n}" for r, n in row["rounds"].items()),
        }
        for row in batches["learned"]
    ]
    declared = [{"name": name, "size": size} for name, size in batches["declared"].items()]
    parts = [
        "<!doctype html><html lang=en><head><meta charset=utf-8>",
        f'<meta http-equiv="refresh" content="{REFRESH_S}">',
        "<title>mrtr-bridge status</title>",
        f"<style>{_STYLE}</style></head><body>",
        "<h1>mrtr-bridge status</h1>",
        f'<div class="meta">version {escape(bridge["version"])} &middot; replica '
        f"{escape(bridge['replica_id'])} &middot; up {bridge['uptime_s']} s &middot; "
        f"{escape(bridge['generated_at'])}</div>",
        '<div class="cards">',
        _card("held calls", held["count"]),
        _card("calls in progress", held["in_progress"]),
        _card("input rounds issued", held.get("rounds_total", 0)),
        _card("upstream sessions", upstream["sessions_open"]),
        _card("replicas seen", len(replicas["peers"])),
        "</div>",
        "<h2>Held calls</h2>",
        _table(
            [
                ("method", "method"),
                ("name", "tool / prompt / resource"),
                ("principal", "principal"),
                ("age_s", "age (s)"),
                ("round", "round"),
                ("state", "state"),
            ],
            held["calls"],
            "no call in progress",
        ),
        "<h2>Held calls per tool</h2>",
        _table([("tool", "tool"), ("held", "calls")], per_tool, "none"),
        "<h2>Upstream</h2>",
        _table(
            [
                ("name", "upstream"),
                ("era", "era"),
                ("transport", "transport"),
                ("sessions_open", "sessions"),
                ("session_limit", "sessions it serves"),
                ("lease_waits", "waits for a session"),
                ("last_error", "last failed open"),
            ],
            [{**upstream, "last_error": error_text}],
            "no upstream",
        ),
        "<h2>Upstream sessions</h2>",
        _table(
            [
                ("principal", "principal"),
                ("revision", "revision"),
                ("state", "state"),
                ("held_by", "leased"),
                ("idle_s", "idle (s)"),
            ],
            upstream["sessions"],
            "no session open",
        ),
        "<h2>Replicas</h2>",
        _table(
            [("replica_id", "replica"), ("address", "address")],
            replicas["peers"],
            "no other replica seen"
            if replicas["clustered"]
            else "one replica (cluster.peers not set)",
        ),
        "<h2>Learned batch sizes</h2>",
        _table(
            [("method", "method"), ("name", "name"), ("sizes", "pushes per round")],
            learned,
            "nothing learned yet",
        ),
        _table([("name", "tool"), ("size", "declared size")], declared, "") if declared else "",
        "</body></html>",
    ]
    return "".join(parts)


__all__ = ["REFRESH_S", "render_page"]
