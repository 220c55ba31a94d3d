"""The remote half of the claims suite (docs/MQTT.md §12): a mosquitto with the password file and the ACL of the
page, and `accmon-mqtt` publishing the bench's accmond as host `bench`, beside the local claims of claims.py on the
same accmond. Figures: `accmon claim --broker ... -- CMD` from start to the command running (p50/p99), and claims per
second through one broker (claim and release round trips of one MQTT client, each waiting for its reply: through
mosquitto, the bridge and accmond and back). The MQTT client is Debian's python3-paho-mqtt."""
import json, os, socket, subprocess, time, uuid

from common import free_port, wait_accepting

HOST = "bench"
USER = "ci"


def supported(bin_dir):
    """Whether this build has claims across the fleet (a bench of an older revision measures the local half only)."""
    accmon = os.path.join(bin_dir, "accmon")
    if not os.path.exists(os.path.join(bin_dir, "accmon-mqtt")):
        return False
    usage = subprocess.run([accmon, "help", "claim"], capture_output=True, text=True).stdout
    try:
        import paho.mqtt.client  # noqa: F401
    except ImportError:
        return False
    return "--broker" in usage


def manifest():
    """The bench's manifest with the bridge (root, here) and the MQTT user `ci` allowed to claim."""
    return {"version": 1, "bridges": {"users": ["root"]},
            "accessories": [{"name": "bench", "match": {"id": "1209:*"}, "claim": {"remote": [USER]}}]}


def acl(source_dir):
    """The ACL of docs/MQTT.md §12.2, with a block for the host `bench` in front: the page's block for `lab-1` (its
    subtree and the census) under the bench's host name."""
    with open(os.path.join(source_dir, "docs", "MQTT.md")) as page:
        text = page.read()
    start = text.index("```\n# /etc/mosquitto/acl (fleet claims)\n") + 4
    page_acl = text[start:text.index("```", start)]
    lab1 = page_acl[page_acl.index("user lab-1\n"):page_acl.index("user lab-2\n")]
    return lab1.replace("lab-1", HOST) + page_acl


class RemoteRig:
    def __init__(self, bin_dir, work, socket_path, source_dir):
        self.bin_dir, self.work, self.processes = bin_dir, work, []
        self.port = free_port()
        passwords = os.path.join(work, "passwords")
        for index, user in enumerate([HOST, USER]):
            subprocess.run(["mosquitto_passwd", *(["-c"] if index == 0 else []), "-b", passwords, user, f"pw-{user}"],
                           check=True)
        with open(os.path.join(work, "acl"), "w") as out:
            out.write(acl(source_dir))
        with open(os.path.join(work, "mosquitto.conf"), "w") as conf:
            conf.write(f"listener {self.port} 127.0.0.1\nallow_anonymous false\npersistence false\nuser root\n"
                       f"log_type error\nset_tcp_nodelay true\npassword_file {passwords}\n"
                       f"acl_file {os.path.join(work, 'acl')}\n")
        self.spawn(["mosquitto", "-c", os.path.join(work, "mosquitto.conf")])
        wait_accepting(self.port, "mosquitto")
        self.password_files = {}
        for user in (HOST, USER):
            path = os.path.join(work, f"{user}.password")
            with open(path, "w") as out:
                out.write(f"pw-{user}\n")
            os.chmod(path, 0o600)
            self.password_files[user] = path
        with open(os.path.join(work, "machine-id"), "w") as machine:
            machine.write("0123456789abcdef0123456789abcdef\n")
        with open(os.path.join(work, "mqtt.json"), "w") as config:
            json.dump({"broker": f"mqtt://127.0.0.1:{self.port}", "host": HOST, "socket": socket_path,
                       "username": HOST, "passwordFile": self.password_files[HOST],
                       "machineIDFile": os.path.join(work, "machine-id"), "restoreID": "bench-bridge"}, config)
        log = open(os.path.join(work, "bridge.err"), "w")
        self.spawn([os.path.join(bin_dir, "accmon-mqtt"), "--config", os.path.join(work, "mqtt.json"),
                    "--log-level", "info"], stderr=log)
        deadline = time.time() + 30
        while "taking requests" not in open(os.path.join(work, "bridge.err")).read():
            if time.time() > deadline:
                raise SystemExit("bench: the bridge's claim gateway did not start")
            time.sleep(0.02)
        self.client = Claimer(self.port)

    def spawn(self, command, stderr=subprocess.DEVNULL):
        self.processes.append(subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr))

    def login(self):
        return ["--broker", f"mqtt://127.0.0.1:{self.port}", "--username", USER, "--password-file",
                self.password_files[USER]]

    def close(self):
        self.client.close()
        for process in reversed(self.processes):
            process.terminate()
            process.wait()


class Claimer:
    """An MQTT 5 claimer (paho): a request with a nonce, an expiry, a response topic and correlation data; waits for
    the reply with that nonce."""

    def __init__(self, port):
        import queue
        import paho.mqtt.client as mqtt
        from paho.mqtt.packettypes import PacketTypes
        from paho.mqtt.properties import Properties
        self.mqtt, self.Properties, self.PacketTypes = mqtt, Properties, PacketTypes
        self.replies = queue.Queue()
        self.client = mqtt.Client(client_id=f"bench-claimer-{os.getpid()}", protocol=mqtt.MQTTv5)
        self.client.username_pw_set(USER, f"pw-{USER}")
        self.client.on_message = lambda _c, _u, message: self.replies.put(json.loads(message.payload))
        self.client.connect("127.0.0.1", port)
        # No Nagle and no delayed acknowledgements on the claimer's side, as the bridge and accmon do on theirs.
        self.client.socket().setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.client.loop_start()
        self.client.subscribe(f"accmon/{HOST}/claim-replies/{USER}/#", qos=1)
        time.sleep(0.2)

    def ask(self, request, timeout=10):
        nonce = uuid.uuid4().hex
        request = dict(request, nonce=nonce)
        properties = self.Properties(self.PacketTypes.PUBLISH)
        properties.MessageExpiryInterval = 30
        properties.ResponseTopic = f"accmon/{HOST}/claim-replies/{USER}/bench"
        properties.CorrelationData = nonce.encode()
        self.client.publish(f"accmon/{HOST}/claim-requests/{USER}", json.dumps(request), qos=1,
                            properties=properties)
        deadline = time.time() + timeout
        while time.time() < deadline:
            reply = self.replies.get(timeout=timeout)
            if reply.get("nonce") == nonce:
                return reply
        raise SystemExit(f"bench: no reply to {request}")

    def close(self):
        self.client.loop_stop()
        self.client.disconnect()


def claims_per_second(rig, connection, seconds):
    count = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        reply = rig.client.ask({"op": "claim", "connections": [connection]})
        if reply.get("kind") != "held":
            raise SystemExit(f"bench: remote claim refused: {reply}")
        rig.client.ask({"op": "release", "claimIDs": [reply["claimID"]]})
        count += 1
    return count / seconds
