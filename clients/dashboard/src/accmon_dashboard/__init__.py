"""accmon-dashboard: a read-only web page of an accmon fleet (from the MQTT broker) or of one host (from accmond).

The page shows the hosts (online or offline, and since when), their connected accessories (kind, id, name, serial,
device nodes, the holder of a claim and since when) and the recent events, live through server-sent events; the
server also answers ``/metrics`` (Prometheus text format) and ``/healthz``. It reads the fleet through
``accmon watch --broker URL --json`` and one host through ``accmon watch --json``: the dashboard has no MQTT or
accmond protocol code of its own. See docs/DASHBOARD.md.
"""

__version__ = "0.1.0"
