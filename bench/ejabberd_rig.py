"""A two-node ejabberd 23.01 cluster on loopback for the bench (the recipe of docs/MQTT.md §11, as the test suite's
EjabberdCluster.swift): the configuration of docs/MQTT.md §10 with each node's port, two Erlang node names of one
cookie, users registered by the node itself, then `join_cluster` from a client node."""
import os, random, re, subprocess, time

from common import LoopbackBroker, accepts, free_port

REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTER = ("tester", "pw-tester")


def documented_configuration():
    text = open(os.path.join(REPOSITORY, "docs", "MQTT.md")).read()
    found = re.search(r"```yaml\n# /etc/ejabberd/ejabberd.yml \(accmon\)\n(.*?)```", text, re.S)
    if not found:
        raise SystemExit("docs/MQTT.md: the ejabberd configuration is missing")
    return found.group(1)


def configuration(port, bridges):
    text = documented_configuration()
    everything = '      "#":\n        - allow: testers\n'
    for old, new in [("    port: 1883\n", f"    port: {port}\n"), ('    ip: "::"\n', '    ip: "127.0.0.1"\n'),
                     ("    user: [lab-1, lab-2]\n",
                      f"    user: [{', '.join(bridges)}]\n  testers:\n    user: [{TESTER[0]}]\n"),
                     ("    access_publish:\n", "    access_publish:\n" + everything),
                     ("    access_subscribe:\n", "    access_subscribe:\n" + everything)]:
        if old not in text:
            raise SystemExit(f"docs/MQTT.md §10: the ejabberd configuration has no {old!r}")
        text = text.replace(old, new)
    return "loglevel: warning\nlog_rotate_count: 0\n" + text


class Node(LoopbackBroker):
    def __init__(self, work, name, cookie, bridges):
        self.directory = os.path.join(work, name)
        os.makedirs(self.directory)
        self.node = f"{name}@localhost"
        self.port = free_port()
        with open(os.path.join(self.directory, "ejabberd.yml"), "w") as out:
            out.write(configuration(self.port, bridges))
        users = ",".join(f'"{user}"' for user in [TESTER[0]] + bridges)
        ready = os.path.join(self.directory, "ready")
        register = (f'[ejabberd_auth:try_register(list_to_binary(U), <<"localhost">>, list_to_binary("pw-" ++ U)) '
                    f'|| U <- [{users}]], file:write_file("{ready}", <<>>).')
        self.process = subprocess.Popen(
            ["/usr/bin/erl", "-noinput", "+sbwt", "none", "+sbwtdcpu", "none", "+sbwtdio", "none", "-sname",
             self.node, "-setcookie", cookie, "-kernel", "inet_dist_use_interface", "{127,0,0,1}", "-mnesia", "dir",
             f'"{os.path.join(self.directory, "spool")}"', "-s", "ejabberd", "-eval", register],
            cwd=self.directory, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env=dict(os.environ, EJABBERD_CONFIG_PATH=os.path.join(self.directory, "ejabberd.yml"),
                     EJABBERD_LOG_PATH=os.path.join(self.directory, "ejabberd.log"),
                     ERL_LIBS="/usr/lib/x86_64-linux-gnu", ERL_CRASH_DUMP_BYTES="0", ERL_EPMD_ADDRESS="127.0.0.1"))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if os.path.exists(ready) and accepts(self.port):
                return
            time.sleep(0.05)
        raise SystemExit(f"ejabberd {self.node} did not start")


class Cluster:
    """Node A, then node B, B joined to A's cluster; `bridges` may publish under their own names, with the password
    `pw-<name>`."""

    def __init__(self, work, bridges):
        tag = "%08x" % random.getrandbits(32)
        cookie = f"accmon-bench-{tag}"
        self.a = Node(work, f"accmon{tag}a", cookie, bridges)
        self.b = Node(work, f"accmon{tag}b", cookie, bridges)
        join = (f"R = rpc:call('{self.b.node}', ejabberd_admin, join_cluster, [<<\"{self.a.node}\">>]), "
                'io:format("~p~n", [R]), halt().')
        joined = subprocess.run(["/usr/bin/erl", "-noinput", "-sname", f"accmon{tag}ctl@localhost", "-setcookie",
                                 cookie, "-eval", join], capture_output=True, text=True, timeout=60,
                                env=dict(os.environ, ERL_EPMD_ADDRESS="127.0.0.1"))
        if "ok" not in joined.stdout:
            raise SystemExit(f"ejabberd: join_cluster: {joined.stdout} {joined.stderr}")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # B restarted its applications with A's database
            probe = subprocess.run(["mosquitto_pub", "-V", "mqttv5", "-p", str(self.b.port), "-u", TESTER[0], "-P",
                                    TESTER[1], "-t", "probe", "-m", "x"], capture_output=True)
            if probe.returncode == 0:
                return
            time.sleep(0.1)
        raise SystemExit("ejabberd: node B does not serve after joining")

    def kill(self):
        for node in (self.a, self.b):
            node.kill()
