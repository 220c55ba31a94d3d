"""The MQTT suite's rig (bench/mqtt.py): a mosquitto on a free port, `accmond --simulate --no-udev` and `accmon-mqtt`
publishing it as host `bench` (or, with bridge=False, accmond alone for the minimal relay), in one work directory,
with the receivers' output timed by tools/stamp; and the small measures the suite takes of its processes."""
import json, os, subprocess, time

from common import Driver, free_port, accmond_arguments, stop, wait_accepting, wait_for_socket

BRIDGE_HOST = "bench"


def percentiles(values):
    values = sorted(values)
    if not values:
        return {"p50_us": None, "p95_us": None, "p99_us": None}
    pick = lambda q: round(values[min(len(values) - 1, int(q * len(values)))] / 1000, 1)
    return {"p50_us": pick(0.50), "p95_us": pick(0.95), "p99_us": pick(0.99)}


def peak_rss_kib(pid):
    with open(f"/proc/{pid}/status") as status:
        return next((int(line.split()[1]) for line in status if line.startswith("VmHWM:")), 0)


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Rig:
    """mosquitto, accmond and the bridge in one work directory; receivers timed by stamp."""

    def __init__(self, work, bin_dir, stamp, bridge=True):
        self.work = work
        self.bin_dir = bin_dir
        self.stamp = stamp
        self.with_bridge = bridge
        self.port = free_port()
        self.processes = []
        try:
            self.start()
        except BaseException:
            self.close()
            raise

    def start(self):
        work = self.work
        with open(os.path.join(work, "mosquitto.conf"), "w") as conf:
            conf.write(f"listener {self.port} 127.0.0.1\nallow_anonymous true\npersistence false\nuser root\n"
                       "log_type error\n")
        self.start_broker()
        self.socket_path = os.path.join(work, "accmon.sock")
        self.accmond = self.spawn([f"{self.bin_dir}/accmond", "--socket", self.socket_path, "--simulate",
                                   "--no-udev", "--log-level", "warning"] + accmond_arguments(self.bin_dir, work))
        wait_for_socket(self.socket_path)
        with open(os.path.join(work, "machine-id"), "w") as machine:
            machine.write("0123456789abcdef0123456789abcdef\n")
        with open(os.path.join(work, "mqtt.json"), "w") as config:
            json.dump({"broker": f"mqtt://127.0.0.1:{self.port}", "host": BRIDGE_HOST, "socket": self.socket_path,
                       "machineIDFile": os.path.join(work, "machine-id")}, config)
        if self.with_bridge:
            self.start_bridge()
        self.driver = Driver(self.socket_path, "bench-mqtt")
        self.send, self.reply, self.request = self.driver.send, self.driver.reply, self.driver.request

    def start_bridge(self):
        self.bridge = self.spawn([f"{self.bin_dir}/accmon-mqtt", "--config", os.path.join(self.work, "mqtt.json"),
                                  "--log-level", "info"], log="bridge")
        self.wait_for_log("bridge", "mqtt: synchronized")

    def spawn(self, command, log=None, stdout=subprocess.DEVNULL, stdin=None):
        stderr = open(os.path.join(self.work, f"{log}.err"), "w") if log else subprocess.DEVNULL
        process = subprocess.Popen(command, stdout=stdout, stderr=stderr, stdin=stdin)
        self.processes.append(process)
        return process

    def start_broker(self):
        self.broker = self.spawn(["mosquitto", "-c", os.path.join(self.work, "mosquitto.conf")], log="mosquitto")
        wait_accepting(self.port, "mosquitto")

    def wait_for_log(self, name, text, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            with open(os.path.join(self.work, f"{name}.err")) as log:
                if text in log.read():
                    return
            time.sleep(0.02)
        raise SystemExit(f"bench: {name} never logged {text!r}")

    def stamped(self, command, name):
        """Starts `command` with its output timed by stamp into WORK/NAME.txt."""
        out = open(os.path.join(self.work, f"{name}.txt"), "w")
        stamp = subprocess.Popen([self.stamp], stdin=subprocess.PIPE, stdout=out)
        process = self.spawn(command, stdout=stamp.stdin, log=name)
        stamp.stdin.close()
        self.processes.append(stamp)
        return process

    def lines(self, name):
        with open(os.path.join(self.work, f"{name}.txt")) as text:
            return [line.rstrip("\n").split(" ", 1) for line in text if " " in line]

    def subscriber(self, topic, name, fmt="%t"):
        process = self.stamped(["mosquitto_sub", "-p", str(self.port), "-t", topic, "-F", fmt], name)
        time.sleep(0.3)
        return process

    @staticmethod
    def plug_message(serial):
        return {"type": "simulate", "action": "connect",
                "accessory": {"kind": "usb", "vendorID": "1209", "productID": "0001", "serialNumber": serial,
                              "name": "bench accessory"}}

    def truth(self):
        return {a["connectionID"] for a in self.request({"type": "list"})["accessories"]}

    def retained(self):
        """The connection ids of the host's retained accessory topics, read with accmon list --broker."""
        result = subprocess.run([f"{self.bin_dir}/accmon", "list", "--broker", f"mqtt://127.0.0.1:{self.port}",
                                 "--json"], capture_output=True, text=True, timeout=60)
        if result.returncode != 0:
            return None
        hosts = json.loads(result.stdout)["hosts"]
        return {a["connectionID"] for host in hosts if host["host"] == BRIDGE_HOST for a in host["accessories"]}

    def close(self):
        for process in reversed(self.processes):
            stop(process)
