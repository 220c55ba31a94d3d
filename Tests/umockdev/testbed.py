#!/usr/bin/python3
"""accmon's umockdev harness: a fake sysfs/udev world with realistic accessories, and accmond running in it.

Run it through the umockdev preload, in a private network namespace with a larger datagram queue (umockdev delivers
uevents over AF_UNIX datagrams; the host default of 10 queued datagrams is far too small for a plug storm):

    unshare -n sh -c 'sysctl -qw net.unix.max_dgram_qlen=4096 && \
        exec umockdev-wrapper /usr/bin/python3 Tests/umockdev/testbed.py [OPTIONS] ACCMOND [ACCMOND ARGS...]'

(`unshare -rn` when not root: the same inside a user namespace of its own.) `/usr/bin/python3` matters: it is the
Python with `gi` and the UMockdev typelib (Debian: python3-gi, gir1.2-umockdev-1.0, umockdev). Under the preload,
`add_device` with a parent works; without it, it fails with "parent device ... does not exist". accmond inherits the
preload, and `UMOCKDEV_DIR`; its socket is a plain path, reachable from outside the namespace.

Unless ACCMOND ARGS give a --state-dir (and accmond has that option), `--state-dir ROOT/accmond-state` is added: each
testbed's accmond starts from nothing, not from the host's /var/lib/accmon.

Options:
    --defer-start        do not start accmond until the {"op":"start"} command (devices added before are coldplugged)
    --accmond-log FILE   append accmond's stderr to FILE (default: this harness's stderr, prefixed "accmond| ")
    --seed N             seed for the storm's random choices (default 1)

The `sync` command and the storm's pacing watch accmond's log for its notice about a sentinel device (a USB device
whose idVendor is 'SYNC'): accmond must log at notice level or more verbosely (the default, info, is fine).

Protocol: one JSON object per line on stdin, one JSON reply per line on stdout, in order. Every reply has
"ok" (true/false) and "op"; a request's "id", if any, is echoed. Errors: {"ok":false,"op":...,"error":"..."}.
Harness logs go to stderr. On {"op":"quit"} or stdin EOF, accmond gets SIGTERM; the harness exits with accmond's exit
status (128+N when killed by signal N, 0 when it never started).

Devices are created with umockdev's `add_device` while no listener can hear them (umockdev 0.17 sends an `add`
uevent of its own from `add_device`): the harness alone decides which uevents are sent, and in what order.

Devices are grouped in *instances*: one physical accessory made of several sysfs devices ("roles"). A device
reference is "NAME" (the instance's top device) or "NAME.ROLE" (such as "ftdi1.tty").

Commands (optional fields in brackets):
  {"op":"templates"}                        -> {"templates":{name: description}}
  {"op":"add","template":T,"name":N,[ "params":{...}, "parent":HUB, "events":true, "bind":true, "order":[REF...] ]}
        Creates the instance's devices in sysfs (all of them first), then sends `add` uevents parent-first, or in
        "order" (references: a role of N, or NAME.ROLE of a child instance; only those listed are sent). With
        "bind", `bind` uevents follow for devices with a driver (as the kernel does). With "events":false, no uevent
        is sent (a device already present: coldplug before start, or one accmond never hears of). "parent" puts a
        USB instance on a port of a hub instance. Hub params: "children": N or [{"template":..,"name":..,"params":..}].
        USB device params: "manufacturer", "name", "serial" (attribute text; null: none), ...; "usb_id": true sets
        the usb_device's ID_* properties by running udev's own usb_id builtin on it (`udevadm test-builtin`).
        Replugging an unplugged instance: {"op":"add","name":N} without a template.
        -> {"name":N,"devices":{role: syspath},"children":[names],"uevents":K}
  {"op":"remove","name":N,[ "events":true, "bind":true, "order":[REF...], "keep":false, "sync":true ]}
        Sends `remove` uevents child-first (preceded by `unbind` for devices with a driver when "bind"), for the
        instance and its child instances, or only those in "order"; then waits until accmond has read them (see
        sync: it may still look the devices up) and deletes the devices from sysfs, unless "keep" (they stay, for
        a replug with only its uevents).  -> {"uevents":K}
  {"op":"forget","name":N}                  deletes an instance for good (its name and numbers can be reused)
  {"op":"uevent","device":REF,"action":A}    one raw uevent (add, remove, change, bind, unbind, move, ...)
  {"op":"set","device":REF,[ "attributes":{..}, "properties":{..}, "uevent":ACTION ]}
        Changes sysfs attributes / udev properties; with "uevent", sends that event afterwards.
  {"op":"storm","names":[N...],"cycles":C,[ "mode":"testbed"|"events", "seed":S, "final":[N...], "bind":false,
        "sync_every":1000 ]}
        Toggles randomly chosen instances (plug when unplugged, unplug when plugged) until C unplugs happened, then
        leaves exactly the instances in "final" plugged. "testbed" mode deletes and recreates the sysfs devices
        (waiting for accmond to read each unplug's events before the deletion); "events" mode only sends the
        uevents. Every "sync_every" uevents it waits for accmond to catch up (see sync), so that its datagram
        queue never fills up.
        -> {"plugs":P,"unplugs":U,"uevents":K,"per_name":{N:{"plugs":..,"unplugs":..}},"plugged":[N...],"seconds":S}
  {"op":"sync",[ "timeout":10 ]}            waits until accmond has read every uevent sent so far: sends a `change`
        for the sentinel device (SENTINEL below, idVendor 'SYNC') and waits for accmond's "skipped" notice about it
  {"op":"start",[ "args":[...], "timeout":10 ]}  starts accmond (again) and waits for its "listening on" line
        -> {"pid":P,"socket":PATH}
  {"op":"stop",[ "signal":15, "timeout":10 ]}     -> {"exit":CODE} or {"signal":N}
  {"op":"status"}  -> {"accmond":{"running":bool,"pid":P,"exit":..},"instances":{N:{"template":..,"plugged":..}}}
  {"op":"log",[ "contains":TEXT, "tail":N ]}      accmond's stderr lines (those containing TEXT; the last N)
  {"op":"quit"}    -> {"exit":CODE} (accmond's), then the harness exits

This file is the entry point (the protocol loop); the harness lives beside it, one concern per module:
  testbed_common.py    the sentinel's path, the log line, HarnessError
  testbed_devices.py   Dev (one sysfs device) and Instance (one accessory made of several)
  testbed_builders.py  the templates: what each accessory's devices look like (DeviceBuilders, a mixin of World)
  testbed_world.py     World: the testbed, its base topology, number pools, sysfs and uevents
  testbed_accmond.py   Accmond: accmond as a child, its log, and `sync`
  testbed_commands.py  Harness: one op_NAME method per command
Their names are importable from here as well.
"""

import argparse
import gc
import json
import os
import shutil
import signal
import subprocess
import sys

from testbed_accmond import Accmond
from testbed_builders import DeviceBuilders, hex_or, usb_descriptor
from testbed_commands import Harness
from testbed_common import PCI, SENTINEL, HarnessError, log
from testbed_devices import Dev, Instance
from testbed_world import World, flat

__all__ = ["PCI", "SENTINEL", "Accmond", "Dev", "DeviceBuilders", "Harness", "HarnessError", "Instance", "World",
           "accmond_has_option", "flat", "hex_or", "log", "main", "usb_descriptor"]


def main():
    parser = argparse.ArgumentParser(description="accmon umockdev harness (see the module docstring)")
    parser.add_argument("--defer-start", action="store_true")
    parser.add_argument("--accmond-log")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("accmond")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    options = parser.parse_args()
    if "LD_PRELOAD" not in os.environ or "umockdev" not in os.environ.get("LD_PRELOAD", ""):
        log("warning: not running under umockdev-wrapper: adding devices with a parent will fail")

    world = World()
    args = list(options.args)
    if "--state-dir" not in args and accmond_has_option(options.accmond, "--state-dir"):
        # Not the shared default (/var/lib/accmon): each testbed's accmond starts from nothing, and its state dies
        # with the testbed.
        args += ["--state-dir", os.path.join(world.tb.get_root_dir(), "accmond-state")]
    accmond = Accmond(options.accmond, args, options.accmond_log)
    harness = Harness(world, accmond, options.seed)

    def reply(message):
        sys.stdout.write(json.dumps(message, ensure_ascii=False) + "\n")
        sys.stdout.flush()

    def interrupted(*_):
        raise KeyboardInterrupt()

    signal.signal(signal.SIGTERM, interrupted)
    try:
        if not options.defer_start:
            accmond.start()
        for line in sys.stdin:
            line = line.strip()
            if not line:
                continue
            try:
                cmd = json.loads(line)
                if not isinstance(cmd, dict):
                    raise HarnessError("a command is a JSON object")
            except (ValueError, HarnessError) as error:
                reply({"ok": False, "op": None, "error": f"bad command: {error}"})
                continue
            op = cmd.get("op")
            answer = {"ok": True, "op": op}
            if "id" in cmd:
                answer["id"] = cmd["id"]
            if op == "quit":
                answer.update(accmond.stop())
                reply(answer)
                break
            handler = getattr(harness, f"op_{op}", None) if isinstance(op, str) else None
            try:
                if handler is None:
                    raise HarnessError(f"unknown op '{op}'")
                answer.update(handler(cmd))
            except Exception as error:  # noqa: BLE001 - every failure becomes an error reply
                answer = {"ok": False, "op": op, "error": f"{type(error).__name__}: {error}"}
                if "id" in cmd:
                    answer["id"] = cmd["id"]
                log(f"{op}: {answer['error']}")
            reply(answer)
    except KeyboardInterrupt:
        log("interrupted")
    finally:
        accmond.stop()
        # The testbed removes its directory when finalized; make that happen now, before the interpreter exits.
        root = world.tb.get_root_dir()
        world.tb = None
        gc.collect()
        shutil.rmtree(root, ignore_errors=True)
    sys.exit(accmond.exit_status())


def accmond_has_option(path, option):
    try:
        result = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return option in result.stdout


if __name__ == "__main__":
    main()
