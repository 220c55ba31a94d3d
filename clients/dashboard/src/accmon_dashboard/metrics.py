"""``/metrics``: the state in the Prometheus text format (version 0.0.4).

Label values are escaped as the format says (backslash, double quote, line feed); host names and accessory ids
come from the network, so nothing else of theirs reaches the output.
"""

from __future__ import annotations

from collections import Counter
from typing import Dict, Iterable, List, Tuple

from .hub import Hub
from .model import EVENT_KINDS, Model
from .records import KINDS

__all__ = ["CONTENT_TYPE", "render"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(pairs: Iterable[Tuple[str, str]]) -> str:
    return "{" + ",".join(f'{name}="{_label(value)}"' for name, value in pairs) + "}"


class _Family:
    def __init__(self, name: str, kind: str, help_text: str) -> None:
        self.lines = [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
        self.name = name

    def add(self, labels: Iterable[Tuple[str, str]], value: float) -> None:
        rendered = _labels(list(labels))
        number = repr(float(value)) if isinstance(value, float) and not value.is_integer() else str(int(value))
        self.lines.append(f"{self.name}{rendered if rendered != '{}' else ''} {number}")


def render(model: Model, hub: Hub, reader_starts: int, started: float) -> str:
    """The metrics text."""
    families: List[_Family] = []
    hosts = sorted(model.hosts)
    by_kind: Counter[Tuple[str, str]] = Counter()
    by_product: Counter[Tuple[str, str, str]] = Counter()
    claims: Counter[str] = Counter()
    for row in model.rows.values():
        by_kind[(row["host"], row["kind"])] += 1
        by_product[(row["host"], row["vendorID"], row["productID"])] += 1
        if "claim" in row:
            claims[row["host"]] += 1
    row_hosts = sorted(set(hosts) | {host for host, _ in by_kind})

    connected = _Family("accmon_accessories_connected", "gauge", "Accessories connected, per host and kind.")
    for host in row_hosts:
        kinds = list(KINDS) + sorted({kind for h, kind in by_kind if h == host and kind not in KINDS})
        for kind in kinds:
            connected.add([("host", host), ("kind", kind)], by_kind[(host, kind)])
    families.append(connected)

    product = _Family("accmon_accessories_by_product", "gauge",
                      "Accessories connected, per host, vendor id and product id (0 once gone).")  # fmt: skip
    for host, vendor, product_id in sorted(model.products | set(by_product)):
        product.add([("host", host), ("vendor", vendor), ("product", product_id)],
                    by_product[(host, vendor, product_id)])  # fmt: skip
    families.append(product)

    online = _Family("accmon_host_online", "gauge", "1 when the host's bridge (or accmond) is online, else 0.")
    since = _Family("accmon_host_online_since_seconds", "gauge",
                    "When the host's online run started (online hosts), in seconds since the epoch.")  # fmt: skip
    stale = _Family("accmon_host_stale", "gauge",
                    "1 when the host's online status is a lease that ran out unrenewed (its bridge, or the broker "
                    "between, is gone without a will), else 0.")  # fmt: skip
    for host in hosts:
        view = model.hosts[host]
        online.add([("host", host)], 1 if view["state"] == "online" else 0)
        stale.add([("host", host)], 1 if view["state"] == "stale" else 0)
        if view["state"] == "online" and view.get("since") is not None:
            since.add([("host", host)], float(view["since"]))
    families += [online, since, stale]

    claimed = _Family("accmon_claims", "gauge", "Accessories checked out (claimed), per host.")
    for host in row_hosts:
        claimed.add([("host", host)], claims[host])
    families.append(claimed)

    events = _Family("accmon_events_total", "counter", "Events the dashboard saw live, per host and kind.")
    counts: Dict[Tuple[str, str], int] = dict(model.event_counts)
    for host in hosts:
        for kind in EVENT_KINDS:
            counts.setdefault((host, kind), 0)
    for (host, kind), count in sorted(counts.items()):
        events.add([("host", host), ("kind", kind)], count)
    families.append(events)

    source = _Family("accmon_dashboard_reader_up", "gauge",
                     "1 while the reader (accmon watch) is connected and its state current, else 0.")  # fmt: skip
    source.add([], 1 if model.source["state"] == "connected" else 0)
    starts = _Family("accmon_dashboard_reader_starts_total", "counter", "Times the reader (accmon watch) was started.")
    starts.add([], reader_starts)
    ignored = _Family("accmon_dashboard_reader_lines_ignored_total", "counter",
                      "Lines of the reader that were not understood.")  # fmt: skip
    ignored.add([], model.ignored_lines)
    followers = _Family("accmon_dashboard_pages", "gauge", "Pages following the state (server-sent event streams).")
    followers.add([], len(hub.followers))
    dropped = _Family("accmon_dashboard_pages_dropped_total", "counter",
                      "Page streams ended because they fell too far behind.")  # fmt: skip
    dropped.add([], hub.dropped)
    uptime = _Family("accmon_dashboard_start_time_seconds", "gauge", "When the dashboard started.")
    uptime.add([], started)
    families += [source, starts, ignored, followers, dropped, uptime]
    return "\n".join(line for family in families for line in family.lines) + "\n"
