"""The HTML of `GET /status`: the facts of `/status.json` (proxy/app/status_facts.py) as one page,
no script, every value escaped, refreshed by the browser every `REFRESH_S` seconds: the bridge's
figures, a table of the upstreams, then a section per upstream."""

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
    bridge, held, upstreams = facts["bridge"], facts["held"], facts["upstreams"]
    replicas = facts["replicas"]
    ready = sum(1 for upstream in upstreams if upstream["ready"])
    parts = [
        "<!doctype html><html lang=en><head><meta charset=utf-8>",
        f'<meta http-equiv="refresh" content="{REFRESH_S}">',
        "<title>mrtr-bridge status</title>",
        f"<style>{_STYLE}</style></head><body>",
        "<h1>mrtr-bridge status</h1>",
        f'<div class="meta">version {escape(bridge["version"])} &middot; replica '
        f"{escape(bridge['replica_id'])} &middot; up {bridge['uptime_s']} s &middot; "
        f"keys {escape(bridge['keys'])} &middot; {escape(bridge['generated_at'])}</div>",
        '<div class="cards">',
        _card("held calls", held["count"]),
        _card("calls in progress", held["in_progress"]),
        _card("input rounds issued", held["rounds_total"]),
        _card("upstreams answering", f"{ready} / {len(upstreams)}"),
        _card("replicas seen", len(replicas["peers"])),
        "</div>",
        "<h2>Upstreams</h2>",
        _table(
            [
                ("name", "upstream"),
                ("path", "endpoint"),
                ("era", "era"),
                ("transport", "transport"),
                ("health", "health (last check)"),
                ("sessions_open", "sessions"),
                ("session_limit", "sessions it serves"),
                ("lease_waits", "waits for a session"),
                ("held", "held calls"),
                ("last_error", "last failed open"),
            ],
            [_upstream_row(upstream) for upstream in upstreams],
            "no upstream",
        ),
        *(_upstream_section(upstream) for upstream in upstreams),
        "<h2>Replicas</h2>",
        _table(
            [("replica_id", "replica"), ("address", "address")],
            replicas["peers"],
            "no other replica seen"
            if replicas["clustered"]
            else "one replica (cluster.peers not set)",
        ),
        "</body></html>",
    ]
    return "".join(parts)


def _upstream_row(upstream: Mapping[str, Any]) -> dict[str, Any]:
    last_error = upstream["last_error"]
    error_text = f"{last_error['error']} at {last_error['at']}" if last_error else "none"
    return {**upstream, "held": upstream["held"]["count"], "last_error": error_text}


def _upstream_section(upstream: Mapping[str, Any]) -> str:
    """One upstream's held calls, its sessions and its learned batch sizes."""
    held, batches = upstream["held"], upstream["batch_sizes"]
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
    name = escape(upstream["name"])
    parts = [
        f"<h2>{name}: held calls</h2>",
        _table(_CALL_COLUMNS, held["calls"], "no call in progress"),
        f"<h2>{name}: held calls per tool</h2>",
        _table([("tool", "tool"), ("held", "calls")], per_tool, "none"),
        f"<h2>{name}: sessions</h2>",
        _table(_SESSION_COLUMNS, upstream["sessions"], "no session open"),
        f"<h2>{name}: learned batch sizes</h2>",
        _table(
            [("method", "method"), ("name", "name"), ("sizes", "pushes per round")],
            learned,
            "nothing learned yet",
        ),
        _table([("name", "tool"), ("size", "declared size")], declared, "") if declared else "",
    ]
    return "".join(parts)


_CALL_COLUMNS: Final = [
    ("method", "method"),
    ("name", "tool / prompt / resource"),
    ("principal", "principal"),
    ("age_s", "age (s)"),
    ("round", "round"),
    ("state", "state"),
]
_SESSION_COLUMNS: Final = [
    ("principal", "principal"),
    ("revision", "revision"),
    ("state", "state"),
    ("held_by", "leased"),
    ("idle_s", "idle (s)"),
]


__all__ = ["REFRESH_S", "render_page"]
