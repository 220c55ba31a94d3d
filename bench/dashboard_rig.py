"""The parts `dashboard.py` runs: a fleet (mosquitto, accmond and accmon-mqtt per host, a driver connection to each
accmond) and headless Chromium with the page's hooks (`#accessories` rows, the `accmon:state-rendered` mark)."""
import json, os, subprocess, time

from common import Driver, free_port, stop, wait_accepting, wait_for_socket


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentiles(seconds, unit):
    values = sorted(seconds)
    if not values:
        return {f"p50_{unit}": None, f"p95_{unit}": None, f"p99_{unit}": None}
    pick = lambda q: round(values[min(len(values) - 1, int(q * len(values)))] * 1000, 1)
    return {f"p50_{unit}": pick(0.50), f"p95_{unit}": pick(0.95), f"p99_{unit}": pick(0.99)}


class Host:
    """One accmond (simulated) and its bridge; a driver connection plugs and unplugs."""

    def __init__(self, bin_dir, work, name, broker_port, accmond_arguments):
        self.name = name
        self.work = os.path.join(work, name)
        os.makedirs(self.work)
        self.socket_path = os.path.join(self.work, "accmon.sock")
        self.processes = []
        self.live = []
        with open(os.path.join(self.work, "accmond.err"), "w") as log:
            self.processes.append(subprocess.Popen(
                [f"{bin_dir}/accmond", "--socket", self.socket_path, "--simulate", "--no-udev", "--log-level",
                 "warning"] + accmond_arguments(bin_dir, self.work), stdout=subprocess.DEVNULL, stderr=log))
        wait_for_socket(self.socket_path)
        with open(os.path.join(self.work, "machine-id"), "w") as machine:
            machine.write(f"{abs(hash(name)):032x}"[:32] + "\n")
        with open(os.path.join(self.work, "mqtt.json"), "w") as config:
            json.dump({"broker": f"mqtt://127.0.0.1:{broker_port}", "host": name, "socket": self.socket_path,
                       "machineIDFile": os.path.join(self.work, "machine-id")}, config)
        with open(os.path.join(self.work, "bridge.err"), "w") as log:
            self.processes.append(subprocess.Popen(
                [f"{bin_dir}/accmon-mqtt", "--config", os.path.join(self.work, "mqtt.json"), "--log-level",
                 "warning"], stdout=subprocess.DEVNULL, stderr=log))
        self.accmond = Driver(self.socket_path, "bench-dashboard")
        self.request = self.accmond.request

    def plug(self, serial):
        accessory = {"kind": "usb", "vendorID": "1209", "productID": "0001", "serialNumber": serial,
                     "name": f"bench accessory {serial}", "deviceNodes": ["/dev/bus/usb/001/002"]}
        return self.request({"type": "simulate", "action": "connect", "accessory": accessory})["connectionID"]

    def unplug(self, connection):
        self.request({"type": "simulate", "action": "disconnect", "connectionID": connection})

    def close(self):
        self.accmond.close()
        for process in reversed(self.processes):
            stop(process)


class Fleet:
    def __init__(self, bin_dir, work, hosts, accmond_arguments):
        self.port = free_port()
        self.url = f"mqtt://127.0.0.1:{self.port}"
        with open(os.path.join(work, "mosquitto.conf"), "w") as conf:
            conf.write(f"listener {self.port} 127.0.0.1\nallow_anonymous true\npersistence false\nlog_type error\n"
                       "max_queued_messages 100000\n")
        self.broker = subprocess.Popen(["mosquitto", "-c", os.path.join(work, "mosquitto.conf")],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_accepting(self.port, "mosquitto")
        self.hosts = []
        try:
            for index in range(hosts):
                self.hosts.append(Host(bin_dir, work, f"bench-{index:02d}", self.port, accmond_arguments))
        except BaseException:
            self.close()
            raise

    def populate(self, accessories):
        for host in self.hosts:
            for index in range(accessories):
                host.live.append(host.plug(f"{host.name}-{index}"))

    def count(self):
        return sum(len(host.live) for host in self.hosts)

    def close(self):
        for host in self.hosts:
            host.close()
        stop(self.broker)


OBSERVE = """window.__rowsSeen = {};
const seen = (tr, at) => { window.__rowsSeen[JSON.stringify([tr.getAttribute('data-host'),
  Number(tr.getAttribute('data-connection'))])] ??= at; };
new MutationObserver((mutations) => {
  const at = performance.timeOrigin + performance.now();
  for (const mutation of mutations) for (const node of mutation.addedNodes) {
    if (node.nodeName === 'TR' && node.hasAttribute('data-connection')) seen(node, at);
    if (node.nodeName === 'TBODY') for (const tr of node.querySelectorAll('tr[data-connection]')) seen(tr, at);
  }
}).observe(document.getElementById('accessories'), {childList: true, subtree: true});"""


class Browser:
    def __init__(self):
        from selenium import webdriver
        from selenium.webdriver.chrome.options import Options
        from selenium.webdriver.chrome.service import Service
        chrome = Options()
        chrome.binary_location = "/usr/bin/chromium"
        for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                         "--window-size=1400,900"):
            chrome.add_argument(argument)
        self.driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=chrome)
        self.server = None

    def get(self, url):
        self.driver.get(url)

    def row_count(self):
        return self.driver.execute_script("return document.querySelectorAll('#accessories tbody tr').length;")

    def wait_rows(self, count, timeout=120):
        deadline = time.time() + timeout
        while self.row_count() != count:
            if time.time() > deadline:
                raise SystemExit(f"bench: the page never showed {count} rows ({self.row_count()})")
            time.sleep(0.1)

    def observe_rows(self):
        self.driver.execute_script(OBSERVE)

    def observed_rows(self):
        seen = self.driver.execute_script("return window.__rowsSeen;")
        return {tuple(json.loads(key)): at / 1000 for key, at in seen.items()}

    def load_dashboard(self, url, rows):
        """Milliseconds from navigation start to the page's mark after it rendered the whole state."""
        self.driver.get("about:blank")
        self.driver.get(url)
        deadline = time.time() + 120
        while True:
            marks = self.driver.execute_script(
                "return performance.getEntriesByName('accmon:state-rendered').map((m) => m.startTime);")
            if marks and self.row_count() == rows:
                return round(marks[0], 1)
            if time.time() > deadline:
                raise SystemExit("bench: the page never rendered its state")
            time.sleep(0.05)

    def static_page(self, work, rows, dashboard_url):
        """The rows as one static page (the same table markup and stylesheet), served on a port of its own."""
        import html, urllib.request
        directory = os.path.join(work, "static")
        os.makedirs(os.path.join(directory, "static"))
        with open(os.path.join(directory, "static", "dashboard.css"), "wb") as css:
            css.write(urllib.request.urlopen(dashboard_url + "/static/dashboard.css").read())
        cells = ("host", "kind", "vendorID", "name", "serialNumber", "deviceNodes", "claim", "claim")
        body = "".join(
            f'<tr data-host="{html.escape(r["host"])}" data-connection="{r["connectionID"]}">' +
            "".join(f"<td>{html.escape(str(r.get(c, '')))}</td>" for c in cells) + "</tr>\n" for r in rows)
        with open(os.path.join(directory, "index.html"), "w") as page:
            page.write('<!doctype html><html><head><meta charset="utf-8"><link rel="stylesheet" '
                       'href="/static/dashboard.css"></head><body><table id="accessories"><tbody>\n'
                       f"{body}</tbody></table></body></html>\n")
        port = free_port()
        self.server = subprocess.Popen(["/usr/bin/python3", "-m", "http.server", str(port), "--bind", "127.0.0.1",
                                        "--directory", directory], stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL)
        wait_accepting(port, "the static server")
        return f"http://127.0.0.1:{port}/index.html"

    def load_static(self, url):
        """Milliseconds from navigation start to DOMContentLoaded's end (every row parsed)."""
        self.driver.get("about:blank")
        self.driver.get(url)
        return round(self.driver.execute_script(
            "return performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd;"), 1)

    def quit(self):
        if self.server is not None:
            stop(self.server)
        self.driver.quit()
