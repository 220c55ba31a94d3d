"""The harness's commands: one `op_NAME` method per JSON command of the protocol (testbed.py's docstring), each
taking the decoded request and returning the reply's fields, on top of the world and accmond."""

import random
import signal
import time

from testbed_common import HarnessError, log
from testbed_world import World


class Harness:
    """The protocol's commands: `op_NAME(cmd)` answers {"op": NAME, ...} with the reply's fields."""

    def __init__(self, world, accmond, seed):
        self.world = world
        self.accmond = accmond
        self.seed = seed

    def instance(self, name):
        inst = self.world.instances.get(name)
        if inst is None:
            raise HarnessError(f"no instance '{name}' (instances: {sorted(self.world.instances)})")
        return inst

    def device(self, ref):
        name, _, role = ref.partition(".")
        inst = self.instance(name)
        return inst.role(role) if role else inst.top

    def settle(self):
        """Before devices are deleted from sysfs: lets accmond read every event sent so far while the devices are
        still there to look up, so that a later re-creation at the same path cannot race with an old event."""
        if self.accmond.running() and self.accmond.logs_notices:
            self.accmond.sync(self.world, timeout=30)

    def op_templates(self, cmd):
        return {"templates": World.TEMPLATES}

    def op_add(self, cmd):
        name = cmd.get("name")
        if not name:
            raise HarnessError("add: 'name' is required")
        events = cmd.get("events", True)
        bind = cmd.get("bind", True)
        world = self.world
        if name in world.instances:
            inst = world.instances[name]
            if cmd.get("template") and cmd["template"] != inst.template:
                raise HarnessError(f"add: instance '{name}' exists as a '{inst.template}'")
            if inst.plugged and inst.present and events and cmd.get("order") is None:
                raise HarnessError(f"add: '{name}' is plugged already (send a raw uevent for a duplicate add)")
        else:
            if not cmd.get("template"):
                raise HarnessError(f"add: no instance '{name}': a 'template' is required")
            inst = world.build(name, cmd["template"], cmd.get("params"), cmd.get("parent"))
            if inst.parent_instance is not None and inst not in inst.parent_instance.children:
                inst.parent_instance.children.append(inst)
        if not inst.present:
            world.create(inst)
        for each in inst.tree():
            world.instances[each.name] = each
        count = world.plug_events(inst, bind, cmd.get("order")) if events else 0
        for each in inst.tree():
            each.plugged = True
        return {"name": name, "devices": {d.role: d.syspath for d in inst.devs},
                "children": [c.name for c in inst.children], "uevents": count}

    def op_remove(self, cmd):
        inst = self.instance(cmd.get("name", ""))
        count = 0
        if cmd.get("events", True):
            count = self.world.unplug_events(inst, cmd.get("bind", True), cmd.get("order"))
        if not cmd.get("keep", False):
            if count and cmd.get("sync", True):
                self.settle()
            self.world.destroy(inst)
        for each in inst.tree():
            each.plugged = False
        return {"name": inst.name, "uevents": count}

    def op_forget(self, cmd):
        """Deletes an unplugged instance for good (its name can then be reused)."""
        inst = self.instance(cmd.get("name", ""))
        self.world.destroy(inst)
        for each in inst.tree():
            self.world.release(each)
            self.world.instances.pop(each.name, None)
        if inst.parent_instance is not None:
            inst.parent_instance.children.remove(inst)
        return {"name": inst.name}

    def op_uevent(self, cmd):
        dev = self.device(cmd.get("device", ""))
        self.world.uevent(dev, cmd.get("action", "change"))
        return {"device": dev.syspath}

    def op_set(self, cmd):
        dev = self.device(cmd.get("device", ""))
        for key, value in cmd.get("attributes", {}).items():
            self.world.tb.set_attribute(dev.syspath, key, value)
            dev.attrs[key] = value
        for key, value in cmd.get("properties", {}).items():
            self.world.tb.set_property(dev.syspath, key, value)
            dev.props[key] = value
        if cmd.get("uevent"):
            self.world.uevent(dev, cmd["uevent"])
        return {"device": dev.syspath}

    def op_storm(self, cmd):
        names = cmd.get("names") or []
        if not names:
            raise HarnessError("storm: 'names' is required")
        instances = [self.instance(n) for n in names]
        cycles = int(cmd.get("cycles", 1000))
        mode = cmd.get("mode", "testbed")
        if mode not in ("testbed", "events"):
            raise HarnessError("storm: mode is 'testbed' or 'events'")
        bind = cmd.get("bind", False)
        final = set(cmd.get("final", []))
        sync_every = int(cmd.get("sync_every", 1000))
        pacing = self.accmond.running() and self.accmond.logs_notices
        if not pacing:
            log("storm: accmond is not running or does not log notices: no pacing (the datagram queue may overflow)")
        rng = random.Random(cmd.get("seed", self.seed))
        world = self.world
        stats = {n: {"plugs": 0, "unplugs": 0} for n in names}
        uevents = 0
        since_sync = 0
        started = time.monotonic()

        def toggle(inst, plug):
            nonlocal uevents, since_sync
            if plug:
                if not inst.present:
                    world.create(inst)
                sent = world.plug_events(inst, bind)
                inst.plugged = True
                stats[inst.name]["plugs"] += 1
            else:
                sent = world.unplug_events(inst, bind)
                if mode == "testbed":
                    if pacing:
                        self.accmond.sync(world, timeout=30)
                        since_sync = -sent
                    world.destroy(inst)
                inst.plugged = False
                stats[inst.name]["unplugs"] += 1
            for each in inst.tree()[1:]:
                each.plugged = inst.plugged
            uevents += sent
            since_sync += sent
            if pacing and since_sync >= sync_every:
                self.accmond.sync(world, timeout=30)
                since_sync = 0

        unplugs = 0
        while unplugs < cycles:
            inst = rng.choice(instances)
            toggle(inst, not inst.plugged)
            if not inst.plugged:
                unplugs += 1
        for inst in instances:
            want = inst.name in final
            if inst.plugged != want:
                toggle(inst, want)
        if pacing:
            self.accmond.sync(world, timeout=30)
        seconds = time.monotonic() - started
        log(f"storm: {sum(s['plugs'] for s in stats.values())} plugs, "
            f"{sum(s['unplugs'] for s in stats.values())} unplugs, {uevents} uevents in {seconds:.2f} s")
        return {"plugs": sum(s["plugs"] for s in stats.values()),
                "unplugs": sum(s["unplugs"] for s in stats.values()), "uevents": uevents, "per_name": stats,
                "plugged": sorted(i.name for i in instances if i.plugged), "seconds": round(seconds, 3)}

    def op_sync(self, cmd):
        started = time.monotonic()
        self.accmond.sync(self.world, timeout=float(cmd.get("timeout", 10)))
        return {"seconds": round(time.monotonic() - started, 4)}

    def op_start(self, cmd):
        return self.accmond.start(cmd.get("args"), timeout=float(cmd.get("timeout", 10)))

    def op_stop(self, cmd):
        return self.accmond.stop(int(cmd.get("signal", signal.SIGTERM)), timeout=float(cmd.get("timeout", 10)))

    def op_status(self, cmd):
        process = self.accmond.process
        daemon = {"running": self.accmond.running(), "pid": process.pid if process else None,
                  "exit": process.returncode if process else None}
        instances = {n: {"template": i.template, "plugged": i.plugged, "present": i.present,
                         "devices": {d.role: d.syspath for d in i.devs}} for n, i in self.world.instances.items()}
        return {"accmond": daemon, "instances": instances, "root": self.world.tb.get_root_dir()}

    def op_log(self, cmd):
        with self.accmond.cond:
            lines = list(self.accmond.lines)
        if cmd.get("contains"):
            lines = [line for line in lines if cmd["contains"] in line]
        if cmd.get("tail"):
            lines = lines[-int(cmd["tail"]):]
        return {"lines": lines}
