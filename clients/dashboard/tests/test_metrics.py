"""``/metrics`` parsed by a real parser (prometheus_client's, Debian's python3-prometheus-client) and compared with
the truth: what each host's accmond says is connected, which bridges are alive, how many events happened."""

from __future__ import annotations

from collections import Counter
from typing import Dict, Tuple

from conftest import Fleet
from page import fetch, metric_families
from rig import ACCMON, DashboardProcess, eventually

from accmon_dashboard.metrics import render
from accmon_dashboard.model import Model
from accmon_dashboard.hub import Hub

Samples = Dict[str, Dict[Tuple[Tuple[str, str], ...], float]]


def scrape(url: str) -> Samples:
    status, headers, body = fetch(url + "/metrics")
    assert status == 200
    assert headers["Content-Type"].startswith("text/plain; version=0.0.4")
    samples: Samples = {}
    for family in metric_families(body.decode()):
        for sample in family.samples:
            samples.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return samples


def test_metrics_equal_the_truth_of_every_host(fleet: Fleet) -> None:
    lab1, lab2, kiosk = fleet.add("lab-1"), fleet.add("lab-2"), fleet.add("kiosk-12")
    lab1.plug(kind="serial", vendor="0403", product="6001", name="FT232R")
    lab1.plug(kind="serial", vendor="0403", product="6001", name="FT232R")
    kiosk.plug(kind="usb", vendor="0c27", product="3bfa", name="Card reader")
    dashboard = DashboardProcess(["--broker", fleet.broker.url, "--accmon", ACCMON])
    try:
        eventually(lambda: scrape(dashboard.url).get("accmon_dashboard_reader_up", {}).get(()) == 1, 20, "reader up")
        # Live changes after the start: counted as events.
        lab2.plug(kind="bluetooth-hid", vendor="046d", product="b342", name="Keys")
        reader = kiosk.plug(kind="usb", vendor="0c27", product="3bfa", name="Card reader 2")
        kiosk.unplug(reader)
        lab1.plug(kind="usb", vendor="1209", product="0001", name="Board")
        hosts = [lab1, lab2, kiosk]
        killed = []

        def expected() -> Samples:
            connected: Counter[Tuple[str, str]] = Counter()
            for host in hosts:
                for accessory in host.truth():
                    connected[(host.name, accessory["kind"])] += 1
            values: Samples = {"accmon_accessories_connected": {}, "accmon_host_online": {}, "accmon_claims": {}}
            for host in hosts:
                for kind in ("usb", "serial", "bluetooth-hid"):
                    labels = (("host", host.name), ("kind", kind))
                    values["accmon_accessories_connected"][labels] = connected[(host.name, kind)]
                values["accmon_host_online"][(("host", host.name),)] = 0 if host in killed else 1
                values["accmon_claims"][(("host", host.name),)] = 0
            return values

        def current() -> Samples:
            samples = scrape(dashboard.url)
            return {name: samples.get(name, {}) for name in expected()}

        eventually(lambda: current() == expected(), 20, "the metrics to equal the truth",
                   show=lambda: f"{current()} != {expected()}")  # fmt: skip
        # The kiosk's bridge dies (once it published the unplug: an offline host's accessories stay as published).
        kiosk.kill_bridge()
        killed.append(kiosk)
        eventually(lambda: current() == expected(), 20, "the metrics to show kiosk-12 offline",
                   show=lambda: f"{current()} != {expected()}")  # fmt: skip
        samples = scrape(dashboard.url)
        events = samples["accmon_events_total"]
        assert events[(("host", "lab-2"), ("kind", "connect"))] == 1
        assert events[(("host", "lab-1"), ("kind", "connect"))] == 1
        assert events[(("host", "kiosk-12"), ("kind", "connect"))] == 1
        assert events[(("host", "kiosk-12"), ("kind", "disconnect"))] == 1
        assert events[(("host", "kiosk-12"), ("kind", "offline"))] == 1
        assert events[(("host", "lab-1"), ("kind", "disconnect"))] == 0
        by_product = samples["accmon_accessories_by_product"]
        assert by_product[(("host", "kiosk-12"), ("product", "3bfa"), ("vendor", "0c27"))] == 1
        assert by_product[(("host", "lab-1"), ("product", "6001"), ("vendor", "0403"))] == 2
        assert samples["accmon_dashboard_reader_starts_total"][()] == 1
    finally:
        dashboard.close()


def test_label_values_from_the_network_are_escaped() -> None:
    """A host name with a quote, a backslash and a line feed stays one label value (the parser reads it back)."""
    model = Model("fleet", clock=lambda: 1000.0)
    name = 'evil"} 1\naccmon_host_online{host="x\\'
    status = {"state": "online", "host": name, "machineID": "m", "runID": "r", "since": 5.0, "bridge": "0.1.0"}
    accessory = {"connectionID": 1, "kind": "usb", "vendorID": '"\n', "productID": "\\"}
    model.apply_fleet([{"type": "fleet", "hosts": [{"host": name, "status": status, "accessories": [accessory]}]}])
    text = render(model, Hub(model.snapshot), reader_starts=1, started=0.0)
    families = {family.name: family for family in metric_families(text)}
    online = families["accmon_host_online"].samples
    assert [(sample.labels, sample.value) for sample in online] == [({"host": name}, 1.0)]
    product = families["accmon_accessories_by_product"].samples
    assert [sample.labels for sample in product] == [{"host": name, "vendor": '"\n', "product": "\\"}]
    assert all(line.startswith(("#", "accmon_")) for line in text.splitlines())


