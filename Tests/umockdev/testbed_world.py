"""The umockdev world: the testbed with its base topology (an xHCI controller and its root hubs, the internal Bluetooth
controller, a platform UART, the `sync` sentinel), the number pools, the instances, and what happens to them in
sysfs (created while no listener hears, deleted deepest first) and as uevents (plug and unplug orders). What each
template's devices look like is the builders' business (testbed_builders.py)."""

import os
import subprocess

import gi

gi.require_version("UMockdev", "1.0")
from gi.repository import UMockdev  # noqa: E402

from testbed_builders import DeviceBuilders  # noqa: E402
from testbed_common import PCI, SENTINEL, HarnessError, log  # noqa: E402


class World(DeviceBuilders):
    """The testbed, its base topology, number pools, and the instances (their devices built by DeviceBuilders)."""

    def __init__(self):
        self.tb = UMockdev.Testbed.new()
        # Testbed.new() sets UMOCKDEV_DIR with C setenv; Python's os.environ does not see it. Children need it.
        os.environ["UMOCKDEV_DIR"] = self.tb.get_root_dir()
        log(f"umockdev root {self.tb.get_root_dir()}")
        self.instances = {}
        self.next_port = {}  # parent syspath -> next port number
        self.ports_used = {}  # parent syspath -> port numbers taken
        self.next_devnum = {}  # bus number -> next devnum
        self.next_bus = 3
        self.next_hid = 1
        self.next_input = 5
        self.used = {"ttyUSB": set(), "ttyACM": set(), "event": set()}
        self.bt_adapter = None
        self._base()

    # Base topology: an xHCI controller with its two root hubs, the laptop's internal Bluetooth controller, a platform
    # UART, and the sync sentinel.
    def _base(self):
        tb = self.tb
        self.pci = tb.add_device("pci", PCI, None,
                                 ["vendor", "0x8086", "device", "0xa36d", "class", "0x0c0330"],
                                 ["DRIVER", "xhci_hcd", "PCI_CLASS", "C0330", "PCI_ID", "8086:A36D",
                                  "PCI_SLOT_NAME", "0000:00:14.0"])
        self.root_hubs = {}
        for bus, (pid, speed, version) in {1: ("0002", "480", " 2.00"), 2: ("0003", "10000", " 3.10")}.items():
            self.root_hubs[bus] = self._root_hub(bus, pid, speed, version)
        platform = tb.add_device("platform", "platform/serial8250", None, [], ["DRIVER", "serial8250"])
        tb.add_device("tty", "tty/ttyS0", platform, ["type", "4", "port", "0x3F8", "irq", "4"],
                      ["DEVNAME", "/dev/ttyS0", "MAJOR", "4", "MINOR", "64"])
        sentinel = tb.add_device("usb", "2-15", self.root_hubs[2],
                                 ["idVendor", "SYNC", "idProduct", "0000", "bDeviceClass", "00", "removable", "removable",
                                  "product", "accmon harness sync sentinel"],
                                 ["DEVTYPE", "usb_device", "DEVNAME", "/dev/bus/usb/002/127"])
        assert sentinel == SENTINEL, sentinel
        self.ensure_bt_adapter()

    def _root_hub(self, bus, pid="0002", speed="480", version=" 2.00"):
        dev = self.root_hub_dev(bus, pid, speed, version)
        path = self.tb.add_device("usb", dev.name, dev.parent, flat(dev.attrs), flat(dev.props))
        for attr, value in dev.binattrs.items():
            self.tb.set_attribute_binary(path, attr, list(value))
        self.next_devnum[bus] = 2
        return path

    # --- number pools

    def take_lowest(self, pool, instance):
        number = 0
        while number in self.used[pool]:
            number += 1
        self.used[pool].add(number)
        instance.allocations.setdefault(pool, []).append(number)
        return number

    def release(self, instance):
        for pool, numbers in instance.allocations.items():
            if pool in self.used:
                self.used[pool] -= set(numbers)
        slot = getattr(instance, "port_slot", None)
        if slot:
            self.ports_used.get(slot[0], set()).discard(slot[1])
            self.next_port[slot[0]] = min(self.next_port.get(slot[0], 1), slot[1])

    def port_under(self, parent_path, requested=None):
        used = self.ports_used.setdefault(parent_path, set())
        if requested is not None:
            port = int(requested)
        else:
            port = self.next_port.get(parent_path, 1)
            while port in used:
                port += 1
            self.next_port[parent_path] = port + 1
        used.add(port)
        return port

    def devnum(self, bus):
        number = self.next_devnum.get(bus, 2)
        self.next_devnum[bus] = number + 1 if number < 127 else 2
        return number

    # --- sysfs

    def muted(self):
        """While active, umockdev sees no listener: `add_device` (which sends an `add` uevent by itself since
        umockdev 0.17.?) creates devices silently, so that the harness alone decides which events are sent, when,
        and in what order, and none is sent before the binary attributes are written. The listeners' sockets are
        renamed away and back; a connected or bound socket keeps working under its restored name."""
        harness = self

        class Muted:
            def __enter__(self):
                root = harness.tb.get_root_dir()
                self.moved = []
                for name in os.listdir(root):
                    if name.startswith("event") and name[5:].isdigit():
                        os.rename(os.path.join(root, name), os.path.join(root, "muted-" + name))
                        self.moved.append(name)

            def __exit__(self, *exc):
                root = harness.tb.get_root_dir()
                for name in self.moved:
                    os.rename(os.path.join(root, "muted-" + name), os.path.join(root, name))
                return False

        return Muted()

    def create(self, inst):
        """Creates the instance's devices (and its children's) in sysfs, without sending any uevent."""
        with self.muted():
            self._create(inst)

    def _create(self, inst):
        for dev in inst.devs:
            parent = dev.parent_path()
            path = self.tb.add_device(dev.subsystem, dev.name, parent, flat(dev.attrs), flat(dev.props))
            if not path:
                raise HarnessError(f"add_device {dev.subsystem} {dev.name} under {parent} failed")
            dev.syspath = path
            for attr, value in dev.binattrs.items():
                self.tb.set_attribute_binary(path, attr, list(value))
            if getattr(dev, "usb_id", False):
                self.run_usb_id(path)
            if inst.template == "roothub":
                self.next_devnum[inst.root_bus] = 2
        inst.present = True
        for child in inst.children:
            # A child's usb_device Dev was built with the hub's predicted path as its parent: fix it up.
            child.top.parent = inst.top.syspath
            self._create(child)

    def run_usb_id(self, path):
        """Sets the ID_* properties udev's own usb_id builtin gives the device (`udevadm test-builtin`, which reads
        the testbed's sysfs through the preload), in place of the harness's hand-made ones."""
        result = subprocess.run(["udevadm", "test-builtin", "usb_id", path], capture_output=True)
        if result.returncode != 0:
            raise HarnessError(f"udevadm test-builtin usb_id {path}: {result.stderr.decode(errors='replace')[-500:]}")
        for entry in result.stdout.split(b"\n"):
            name, separator, value = entry.partition(b"=")
            if separator and name.startswith(b"ID_"):
                self.tb.set_property(path, name.decode(), value.decode())

    def destroy(self, inst):
        """Deletes the instance's devices (and its children's) from sysfs, deepest first: `remove_device` cleans up
        the class, bus and /sys/dev links of the device it is given, not those of its descendants."""
        for each in reversed(inst.tree()):
            if each.present:
                for dev in reversed(each.devs):
                    if dev.syspath and os.path.isdir(self.tb.get_root_dir() + dev.syspath):
                        self.tb.remove_device(dev.syspath)
            each.present = False

    # --- events

    def uevent(self, dev, action):
        if not dev.syspath:
            raise HarnessError(f"{dev.role}: not in sysfs")
        self.tb.uevent(dev.syspath, action)
        return 1

    def resolve(self, inst, ref):
        if "." in ref:
            name, role = ref.split(".", 1)
            target = self.instances.get(name)
            if target is None or target not in inst.tree():
                raise HarnessError(f"'{ref}': not a device of '{inst.name}' or its children")
            return target.role(role)
        return inst.role(ref)

    def plug_events(self, inst, bind, order=None):
        count = 0
        if order is not None:
            for ref in order:
                count += self.uevent(self.resolve(inst, ref), "add")
            return count
        for each in inst.tree():
            for dev in each.devs:
                count += self.uevent(dev, "add")
            if bind:
                for dev in reversed(each.devs):
                    if dev.driver:
                        count += self.uevent(dev, "bind")
        return count

    def unplug_events(self, inst, bind, order=None):
        count = 0
        if order is not None:
            for ref in order:
                count += self.uevent(self.resolve(inst, ref), "remove")
            return count
        for each in reversed(inst.tree()):
            for dev in reversed(each.devs):
                if bind and dev.driver:
                    count += self.uevent(dev, "unbind")
                count += self.uevent(dev, "remove")
        return count


def flat(mapping):
    result = []
    for key, value in mapping.items():
        if value is None:
            continue
        result += [key, str(value)]
    return result
