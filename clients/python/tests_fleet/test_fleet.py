"""accmon.fleet against real parts: mosquitto with the password file and the ACL of docs/MQTT.md §12.2, two
``accmond --simulate`` hosts with their ``accmon-mqtt`` bridges (leases of 3 s renewed every second)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterator, List

import pytest

from accmon import ClaimConflict
from accmon.fleet import FleetClaimer
from accmon.simulator import SimulatedDaemon

REPO = Path(__file__).resolve().parents[3]
BIN = Path(os.environ.get("ACCMON_BIN_DIR") or REPO / ".build" / "debug")
HOSTS = ["lab-1", "lab-2"]


def acl() -> str:
    text = (REPO / "docs" / "MQTT.md").read_text()
    start = text.index("```\n# /etc/mosquitto/acl (fleet claims)\n") + 4
    return text[start:text.index("```", start)]


def eventually(condition: object, timeout: float = 15) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if callable(condition) and condition():
            return True
        time.sleep(0.05)
    return False


class Fleet:
    def __init__(self, work: str) -> None:
        self.processes: List["subprocess.Popen[bytes]"] = []
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = int(probe.getsockname()[1])
        passwords = os.path.join(work, "passwords")
        for index, user in enumerate(HOSTS + ["ci", "qa"]):
            subprocess.run(["mosquitto_passwd", *(["-c"] if index == 0 else []), "-b", passwords, user, f"pw-{user}"],
                           check=True)  # fmt: skip
        with open(os.path.join(work, "acl"), "w") as out:
            out.write(acl())
        config = os.path.join(work, "mosquitto.conf")
        with open(config, "w") as out:
            out.write(f"listener {self.port} 127.0.0.1\nallow_anonymous false\npersistence false\nuser root\n"
                      f"password_file {passwords}\nacl_file {os.path.join(work, 'acl')}\n")  # fmt: skip
        self.processes.append(subprocess.Popen(["mosquitto", "-c", config], stderr=subprocess.DEVNULL))
        assert eventually(lambda: self.accepting())
        manifest = {"version": 1, "bridges": {"users": ["root"]},
                    "accessories": [{"name": "bench", "match": {"id": "*:*"}, "claim": {"remote": ["ci", "qa"]}}]}
        self.daemons: List[SimulatedDaemon] = []
        for name in HOSTS:
            daemon = SimulatedDaemon(str(BIN / "accmond"), manifest=manifest)
            daemon.start()
            self.daemons.append(daemon)
            password = os.path.join(daemon.directory, "password")
            with open(password, "w") as out:
                out.write(f"pw-{name}\n")
            os.chmod(password, 0o600)
            with open(os.path.join(daemon.directory, "machine-id"), "w") as out:
                out.write(f"m{name}\n")
            bridge_config = os.path.join(daemon.directory, "mqtt.json")
            with open(bridge_config, "w") as out:
                json.dump({"broker": f"mqtt://127.0.0.1:{self.port}", "host": name, "socket": daemon.socket,
                           "username": name, "passwordFile": password, "leaseSeconds": 3, "renewSeconds": 1,
                           "machineIDFile": os.path.join(daemon.directory, "machine-id")}, out)  # fmt: skip
            log = open(os.path.join(daemon.directory, "bridge.log"), "wb")
            self.processes.append(subprocess.Popen([str(BIN / "accmon-mqtt"), "--config", bridge_config],
                                                   stderr=log))  # fmt: skip
            assert eventually(lambda: b"taking requests" in Path(daemon.directory, "bridge.log").read_bytes())

    def accepting(self) -> bool:
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            return True
        except OSError:
            return False

    def claims(self, host: int) -> str:
        return subprocess.run([str(BIN / "accmon"), "--socket", self.daemons[host].socket, "claims"],
                              capture_output=True, text=True, check=True).stdout  # fmt: skip

    def close(self) -> None:
        for process in reversed(self.processes):
            process.terminate()
            process.wait()
        for daemon in self.daemons:
            daemon.close()


@pytest.fixture
def fleet() -> Iterator[Fleet]:
    with tempfile.TemporaryDirectory(prefix="accmon-fleet-py-") as work:
        made = Fleet(work)
        yield made
        made.close()


def test_a_claim_by_serial_finds_its_host_holds_while_renewed_and_is_released(fleet: Fleet) -> None:
    fleet.daemons[0].plug("serial", vendor="0403", product="6001", serial="P1", nodes=["/dev/ttyUSB-P1"])
    fleet.daemons[1].plug("serial", vendor="0403", product="6001", serial="P2", nodes=["/dev/ttyUSB-P2"])
    with FleetClaimer("127.0.0.1", fleet.port, username="ci", password="pw-ci") as ci, \
            FleetClaimer("127.0.0.1", fleet.port, username="qa", password="pw-qa") as qa:  # fmt: skip
        assert eventually(lambda: ci.hosts() == HOSTS)
        # The census: every online bridge answers with its count and status (docs/MQTT.md §5).
        answers = ci.census()
        assert sorted(answers) == HOSTS, answers
        assert all(answers[h]["accessories"] == 1 and answers[h]["status"]["state"] == "online" for h in HOSTS)
        with ci.claim(serial="P2", reason="py") as claim:
            assert (claim.host, claim.device_node) == ("lab-2", "/dev/ttyUSB-P2")
            assert "ci (remote)" in fleet.claims(1)
            with pytest.raises(ClaimConflict) as conflict:
                qa.claim("lab-2", serial="P2")
            assert "by ci on lab-2" in conflict.value.message
            assert eventually(lambda: any(n.get("kind") == "contention" for n in claim.notices))
            time.sleep(5)  # past the 3 s lease: renewed, still held
            assert claim.ended is None and "ci (remote)" in fleet.claims(1)
        assert eventually(lambda: fleet.claims(1) == "no claims\n")
