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
"""

import argparse
import ctypes
import gc
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
import zlib

import gi

gi.require_version("UMockdev", "1.0")
from gi.repository import UMockdev  # noqa: E402

PCI = "pci0000:00/0000:00:14.0"
# A USB device accmond rejects (its idVendor is not hex) with a notice naming its path: the `sync` sentinel.
SENTINEL = f"/sys/devices/{PCI}/usb2/2-15"


def log(message):
    sys.stderr.write(f"testbed[{os.getpid()}]: {message}\n")
    sys.stderr.flush()


class HarnessError(Exception):
    pass


# ---------------------------------------------------------------------------------------------------------------------
# Device specs and templates


class Dev:
    """One sysfs device of an instance. `parent` is a Dev of the same instance, or a syspath."""

    def __init__(self, role, subsystem, name, parent, attrs=None, props=None, binattrs=None, driver=None):
        self.role = role
        self.subsystem = subsystem
        self.name = name
        self.parent = parent
        self.attrs = dict(attrs or {})
        self.props = dict(props or {})
        self.binattrs = dict(binattrs or {})
        self.driver = driver
        self.syspath = None

    def parent_path(self):
        return self.parent.syspath if isinstance(self.parent, Dev) else self.parent


class Instance:
    def __init__(self, name, template, params):
        self.name = name
        self.template = template
        self.params = params
        self.devs = []  # parent-first
        self.children = []  # child instances (on a hub's ports)
        self.parent_instance = None
        self.present = False  # in sysfs
        self.plugged = False  # add uevents sent (or coldplugged), remove not yet
        self.allocations = {}  # numbers taken from the pools (tty index, event number, ...)

    @property
    def top(self):
        return self.devs[0]

    def role(self, role):
        for dev in self.devs:
            if dev.role == role:
                return dev
        raise HarnessError(f"instance '{self.name}' has no role '{role}' (roles: {[d.role for d in self.devs]})")

    def tree(self):
        """This instance and its descendants, parent-first."""
        result = [self]
        for child in self.children:
            result += child.tree()
        return result


def usb_descriptor(vid, pid, bcd, cls, num_ifaces, iface_classes):
    """A plausible `descriptors` blob: the device descriptor, then a configuration with interface descriptors."""
    device = bytes([18, 1, 0x00, 0x02, cls, 0, 0, 64, vid & 0xFF, vid >> 8, pid & 0xFF, pid >> 8,
                    bcd & 0xFF, bcd >> 8, 1, 2, 3, 1])
    interfaces = b""
    for number, iface_class in enumerate(iface_classes[:num_ifaces]):
        interfaces += bytes([9, 4, number, 0, 1, iface_class, 0, 0, 0])
        interfaces += bytes([7, 5, 0x81 + number, 3, 8, 0, 10])
    total = 9 + len(interfaces)
    config = bytes([9, 2, total & 0xFF, total >> 8, num_ifaces, 1, 0, 0x80, 50])
    return device + config + interfaces


def hex_or(text, default):
    try:
        return int(text, 16)
    except (TypeError, ValueError):
        return default


class World:
    """The testbed, its base topology, number pools, and the instances."""

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

    def root_hub_dev(self, bus, pid="0002", speed="480", version=" 2.00"):
        """A root hub `usbN` of the xHCI controller, as Linux 6.1 shows it."""
        attrs = {
            "idVendor": "1d6b", "idProduct": pid, "bcdDevice": "0601", "bDeviceClass": "09",
            "bDeviceSubClass": "00", "bDeviceProtocol": "01", "bNumConfigurations": "1", "bNumInterfaces": " 1",
            "busnum": str(bus), "devnum": "1", "devpath": "0", "maxchild": "12", "speed": speed,
            "version": version, "manufacturer": "Linux 6.1.0-18-amd64 xhci-hcd",
            "product": "xHCI Host Controller", "serial": "0000:00:14.0", "removable": "unknown",
            "authorized": "1", "quirks": "0x0",
        }
        props = {
            "DEVTYPE": "usb_device", "DRIVER": "usb", "DEVNAME": f"/dev/bus/usb/{bus:03d}/001", "BUSNUM": f"{bus:03d}",
            "DEVNUM": "001", "MAJOR": "189", "MINOR": str((bus - 1) * 128), "PRODUCT": f"1d6b/{int(pid, 16):x}/601",
            "TYPE": "9/0/1", "ID_VENDOR_ID": "1d6b", "ID_MODEL_ID": pid, "ID_BUS": "usb",
            "ID_VENDOR_FROM_DATABASE": "Linux Foundation", "ID_MODEL_FROM_DATABASE": "2.0 root hub",
        }
        binattrs = {"descriptors": usb_descriptor(0x1D6B, int(pid, 16), 0x0601, 9, 1, [9])}
        return Dev("usb", "usb", f"usb{bus}", self.pci, attrs, props, binattrs, driver="usb")

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

    # --- USB building blocks

    def usb_device(self, instance, parent_path, parent_port_path, bus, p, defaults, iface_classes):
        """The usb_device Dev for `instance`, from the template defaults overridden by params `p`."""
        port = self.port_under(parent_path, p.get("port"))
        instance.port_slot = (parent_path, port)
        port_path = f"{bus}-{port}" if parent_port_path is None else f"{parent_port_path}.{port}"
        devnum = self.devnum(bus)
        vid = p.get("vendor", defaults["vendor"])
        pid = p.get("product", defaults["product"])
        bcd = p.get("bcdDevice", defaults.get("bcdDevice", "0100"))
        cls = p.get("class", defaults.get("class", "00"))
        manufacturer = p.get("manufacturer", defaults.get("manufacturer"))
        product = p.get("name", defaults.get("name"))
        serial = p.get("serial", defaults.get("serial"))
        removable = p.get("removable", defaults.get("removable", "removable"))
        speed = p.get("speed", defaults.get("speed", "12"))
        attrs = {
            "idVendor": vid, "idProduct": pid, "bcdDevice": bcd, "bDeviceClass": cls,
            "bDeviceSubClass": "00", "bDeviceProtocol": "00" if cls != "09" else "02", "bMaxPacketSize0": "64",
            "bNumConfigurations": "1", "bConfigurationValue": "1", "bNumInterfaces": f"{len(iface_classes):2d}",
            "bmAttributes": "a0", "bMaxPower": "100mA", "busnum": str(bus), "devnum": str(devnum),
            "devpath": port_path.split("-", 1)[1], "speed": speed, "version": " 2.00", "maxchild": "0",
            "removable": removable, "authorized": "1", "avoid_reset_quirk": "0", "quirks": "0x0",
            "urbnum": "17", "ltm_capable": "no", "rx_lanes": "1", "tx_lanes": "1",
        }
        if cls == "09":
            attrs["maxchild"] = str(p.get("ports", 7))
        for key, value in (("manufacturer", manufacturer), ("product", product), ("serial", serial)):
            if value is not None:
                attrs[key] = value
        vid_n, pid_n, bcd_n = hex_or(vid, 0xFFFF), hex_or(pid, 0xFFFF), hex_or(bcd, 0x0100)
        # The kernel's PRODUCT says what idVendor/idProduct/bcdDevice say; a garbage device's says the same garbage
        # (accmond then reads the attributes, and rejects the non-hex ids).
        hex_ids = all(hex_or(text, None) is not None for text in (vid, pid, bcd))
        product_property = f"{vid_n:x}/{pid_n:x}/{bcd_n:x}" if hex_ids else f"{vid}/{pid}/{bcd}"
        props = {
            "DEVTYPE": "usb_device", "DRIVER": "usb", "DEVNAME": f"/dev/bus/usb/{bus:03d}/{devnum:03d}",
            "BUSNUM": f"{bus:03d}", "DEVNUM": f"{devnum:03d}", "MAJOR": "189",
            "MINOR": str((bus - 1) * 128 + devnum - 1), "PRODUCT": product_property,
            "TYPE": f"{hex_or(cls, 0)}/0/0", "ID_BUS": "usb", "ID_VENDOR_ID": vid,
            "ID_MODEL_ID": pid, "ID_REVISION": bcd, "ID_PATH": f"pci-0000:00:14.0-usb-0:{port_path.split('-', 1)[1]}",
            "ID_USB_INTERFACES": ":" + ":".join(f"{c:02x}0000" for c in iface_classes) + ":",
        }
        if manufacturer is not None and isinstance(manufacturer, str):
            props["ID_VENDOR"] = manufacturer.replace(" ", "_")[:64]
        if product is not None:
            props["ID_MODEL"] = product.replace(" ", "_")[:64]
        if serial is not None:
            props["ID_SERIAL_SHORT"] = serial
            props["ID_SERIAL"] = f"{props.get('ID_VENDOR', vid)}_{props.get('ID_MODEL', pid)}_{serial}"
        props.update(p.get("properties", {}))
        attrs.update(p.get("attributes", {}))
        binattrs = {"descriptors": usb_descriptor(vid_n, pid_n, bcd_n, hex_or(cls, 0), len(iface_classes),
                                                  iface_classes)}
        if "manufacturer_bytes" in p:  # invalid UTF-8 and other bytes a device may report
            binattrs["manufacturer"] = bytes.fromhex(p["manufacturer_bytes"])
            attrs.pop("manufacturer", None)
        dev = Dev("usb", "usb", port_path, parent_path, attrs, props, binattrs, driver="usb")
        dev.usb_id = bool(p.get("usb_id"))
        if dev.usb_id:
            # What usb_id sets comes from usb_id (which sets ID_VENDOR... only when ID_BUS is not set yet).
            for key in [key for key in dev.props if key.startswith(("ID_BUS", "ID_VENDOR", "ID_MODEL", "ID_SERIAL",
                                                                    "ID_REVISION", "ID_USB_"))]:
                del dev.props[key]
        instance.port_path = port_path
        instance.bus = bus
        return dev

    def interface(self, role, usb, number, iface_class, driver):
        attrs = {"bInterfaceNumber": f"{number:02x}", "bAlternateSetting": " 0", "bNumEndpoints": "03",
                 "bInterfaceClass": f"{iface_class:02x}", "bInterfaceSubClass": "00", "bInterfaceProtocol": "00",
                 "authorized": "1", "supports_autosuspend": "1"}
        props = {"DEVTYPE": "usb_interface", "INTERFACE": f"{iface_class}/0/0", "DRIVER": driver or "",
                 "MODALIAS": f"usb:v{usb.attrs.get('idVendor', '')}p{usb.attrs.get('idProduct', '')}"}
        if not driver:
            del props["DRIVER"]
        return Dev(role, "usb", f"{usb.name}:1.{number}", usb, attrs, props, driver=driver)

    def parent_for(self, instance, parent):
        """(syspath, port path or None, bus) for a new USB instance: a root hub port, or a port of a hub instance
        (`parent`: None for usb1, "usbN", a hub instance's name, or the hub Instance itself)."""
        if parent is None:
            return self.root_hubs[1], None, 1
        if isinstance(parent, str) and parent.startswith("usb") and parent[3:].isdigit():
            bus = int(parent[3:])
            if bus not in self.root_hubs:
                raise HarnessError(f"no root hub {parent}")
            return self.root_hubs[bus], None, bus
        hub = parent if isinstance(parent, Instance) else self.instances.get(parent)
        if hub is None:
            raise HarnessError(f"parent '{parent}': no such instance")
        if not hasattr(hub, "port_path"):
            raise HarnessError(f"parent '{hub.name}': not a USB device")
        instance.parent_instance = hub
        return hub.top.syspath or self.predicted_path(hub.top), hub.port_path, hub.bus

    def predicted_path(self, dev):
        parent = dev.parent_path() if not isinstance(dev.parent, Dev) else self.predicted_path(dev.parent)
        return f"{parent}/{dev.name}"

    # --- templates

    TEMPLATES = {
        "usb": "a USB device with a serial number (default: SanDisk Cruzer Blade 0781:5567, mass storage interface)",
        "ftdi": "an FTDI FT232R USB-serial adapter: usb_device -> usb_interface -> usb-serial port -> tty ttyUSBn",
        "acm": "a CDC-ACM board (Arduino Uno 2341:0043): usb_device -> interfaces 1.0 (tty ttyACMn) and 1.1",
        "btkbd": "a Bluetooth keyboard (Apple Magic Keyboard): hid -> input inputN -> event node eventN "
                 "(params: name, address, vendor, product, nodes)",
        "hub": "a USB 2.0 hub (05e3:0608, bDeviceClass 09) with params.children child devices",
        "roothub": "another xHCI root hub usbN (ignored by accmond)",
        "internal": "an internal, non-removable USB camera (removable=fixed)",
        "noserial": "a USB mouse with no serial number (Logitech 046d:c077)",
        "badvendor": "a USB-serial adapter whose idVendor is 'zz99' (rejected: not hex), with a ttyUSB",
        "longname": "a USB device whose product string is 10 kB long",
        "badutf8": "a USB device whose manufacturer string holds invalid UTF-8 bytes",
    }

    def build(self, name, template, params, parent_name):
        if template not in self.TEMPLATES:
            raise HarnessError(f"unknown template '{template}' (templates: {', '.join(sorted(self.TEMPLATES))})")
        p = dict(params or {})
        inst = Instance(name, template, p)
        if template == "btkbd":
            self.build_btkbd(inst, p)
            return inst
        if template == "roothub":
            bus = self.next_bus
            self.next_bus += 1
            inst.devs.append(self.root_hub_dev(bus))
            inst.root_bus = bus
            return inst
        parent_path, parent_port_path, bus = self.parent_for(inst, p.get("parent", parent_name))
        if template == "usb":
            d = {"vendor": "0781", "product": "5567", "bcdDevice": "0100", "manufacturer": "SanDisk",
                 "name": "Cruzer Blade", "serial": "4C530001231115117143", "speed": "480"}
            usb = self.usb_device(inst, parent_path, parent_port_path, bus, p, d, [8])
            inst.devs += [usb, self.interface("intf", usb, 0, 8, "usb-storage")]
        elif template == "ftdi":
            d = {"vendor": "0403", "product": "6001", "bcdDevice": "0600", "manufacturer": "FTDI",
                 "name": "FT232R USB UART", "serial": "A50285BI"}
            self.build_usb_serial(inst, p, d, parent_path, parent_port_path, bus)
        elif template == "badvendor":
            d = {"vendor": "zz99", "product": "7523", "bcdDevice": "0264", "manufacturer": "QinHeng",
                 "name": "USB Serial", "serial": None}
            self.build_usb_serial(inst, p, d, parent_path, parent_port_path, bus)
        elif template == "acm":
            d = {"vendor": "2341", "product": "0043", "bcdDevice": "0001", "manufacturer": "Arduino (www.arduino.cc)",
                 "name": "Arduino Uno", "serial": "75833353035351A0C1E1"}
            usb = self.usb_device(inst, parent_path, parent_port_path, bus, p, d, [2, 10])
            comm = self.interface("intf", usb, 0, 2, "cdc_acm")
            data = self.interface("intf1", usb, 1, 10, "cdc_acm")
            n = self.take_lowest("ttyACM", inst)
            serial = usb.attrs.get("serial", "")
            links = [f"/dev/serial/by-id/usb-{usb.props.get('ID_VENDOR', 'unknown')}_{usb.props.get('ID_MODEL', '')}"
                     f"_{serial}-if00", f"/dev/serial/by-path/pci-0000:00:14.0-usb-0:{inst.port_path.split('-', 1)[1]}:1.0"]
            tty = Dev("tty", "tty", f"tty/ttyACM{n}", comm, {"dev": f"166:{n}"},
                      {"DEVNAME": f"/dev/ttyACM{n}", "MAJOR": "166", "MINOR": str(n), "DEVLINKS": " ".join(links),
                       "ID_USB_INTERFACE_NUM": "00", "ID_USB_DRIVER": "cdc_acm", "ID_MM_CANDIDATE": "1"})
            inst.devs += [usb, comm, data, tty]
        elif template == "hub":
            d = {"vendor": "05e3", "product": "0608", "bcdDevice": "8537", "manufacturer": None, "name": "USB2.0 Hub",
                 "serial": None, "class": "09", "speed": "480"}
            usb = self.usb_device(inst, parent_path, parent_port_path, bus, p, d, [9])
            inst.devs += [usb, self.interface("intf", usb, 0, 9, "hub")]
            children = p.get("children", 0)
            if isinstance(children, int):
                children = [{"template": "usb", "name": f"{name}-c{k}",
                             "params": {"serial": f"HUBCHILD{k:02d}{zlib.crc32(name.encode()) % 10000:04d}",
                                        "name": f"Child {k}"}} for k in range(1, children + 1)]
            for spec in children:
                child_name = spec["name"]
                if child_name in self.instances:
                    raise HarnessError(f"instance '{child_name}' exists")
                child = self.build(child_name, spec.get("template", "usb"), spec.get("params"), inst)
                inst.children.append(child)
        elif template == "internal":
            d = {"vendor": "04f2", "product": "b6dd", "bcdDevice": "5614", "manufacturer": "Chicony Electronics Co.,Ltd.",
                 "name": "Integrated Camera", "serial": "0001", "removable": "fixed", "speed": "480"}
            usb = self.usb_device(inst, parent_path, parent_port_path, bus, p, d, [14, 14])
            inst.devs += [usb, self.interface("intf", usb, 0, 14, "uvcvideo"), self.interface("intf1", usb, 1, 14, "uvcvideo")]
        elif template == "noserial":
            d = {"vendor": "046d", "product": "c077", "bcdDevice": "7200", "manufacturer": "Logitech",
                 "name": "USB Optical Mouse", "serial": None, "speed": "1.5"}
            usb = self.usb_device(inst, parent_path, parent_port_path, bus, p, d, [3])
            inst.devs += [usb, self.interface("intf", usb, 0, 3, "usbhid")]
        elif template == "longname":
            d = {"vendor": "1209", "product": "0001", "bcdDevice": "0100", "manufacturer": "pid.codes",
                 "name": ("Very Long Product Name " * 500)[:10240], "serial": "LONG0001"}
            usb = self.usb_device(inst, parent_path, parent_port_path, bus, p, d, [255])
            inst.devs += [usb, self.interface("intf", usb, 0, 255, None)]
        elif template == "badutf8":
            d = {"vendor": "1a86", "product": "55d4", "bcdDevice": "0443", "manufacturer": None,
                 "name": "USB Single Serial", "serial": "5434012345"}
            p.setdefault("manufacturer_bytes", "ff41636d65c328e2828220436f72702efe")  # \xffAcme\xc3(\xe2\x82\x82 Corp.\xfe
            usb = self.usb_device(inst, parent_path, parent_port_path, bus, p, d, [255])
            inst.devs += [usb, self.interface("intf", usb, 0, 255, None)]
        return inst

    def build_usb_serial(self, inst, p, d, parent_path, parent_port_path, bus):
        usb = self.usb_device(inst, parent_path, parent_port_path, bus, p, d, [255])
        intf = self.interface("intf", usb, 0, 255, "ftdi_sio" if inst.template == "ftdi" else "ch341")
        n = self.take_lowest("ttyUSB", inst)
        port = Dev("port", "usb-serial", f"ttyUSB{n}", intf, {"port_number": "0", "latency_timer": "16"},
                   {"DRIVER": intf.driver}, driver=intf.driver)
        serial = usb.attrs.get("serial")
        links = []
        if serial:
            links.append(f"/dev/serial/by-id/usb-{usb.props.get('ID_VENDOR', 'unknown')}_"
                         f"{usb.props.get('ID_MODEL', '')}_{serial}-if00-port0")
        links.append(f"/dev/serial/by-path/pci-0000:00:14.0-usb-0:{inst.port_path.split('-', 1)[1]}:1.0-port0")
        tty = Dev("tty", "tty", f"tty/ttyUSB{n}", port, {"dev": f"188:{n}"},
                  {"DEVNAME": f"/dev/ttyUSB{n}", "MAJOR": "188", "MINOR": str(n), "DEVLINKS": " ".join(links),
                   "ID_USB_INTERFACE_NUM": "00", "ID_USB_DRIVER": intf.driver})
        inst.devs += [usb, intf, port, tty]

    def ensure_bt_adapter(self):
        """The laptop's internal Bluetooth controller (USB, removable=fixed) and its hci0, made on first use."""
        if self.bt_adapter:
            return self.bt_adapter
        inst = Instance("bt-controller", "internal", {})
        d = {"vendor": "8087", "product": "0a2b", "bcdDevice": "0010", "manufacturer": None, "name": None,
             "serial": None, "removable": "fixed"}
        usb = self.usb_device(inst, self.root_hubs[1], None, 1, {"port": 10}, d, [224, 224])
        intf = self.interface("intf", usb, 0, 224, "btusb")
        hci = Dev("hci", "bluetooth", "bluetooth/hci0", intf, {}, {"DEVTYPE": "host"})
        inst.devs += [usb, intf, hci, self.interface("intf1", usb, 1, 224, "btusb")]
        self.create(inst)
        self.instances[inst.name] = inst
        inst.plugged = True
        self.bt_adapter = hci.syspath
        return self.bt_adapter

    def build_btkbd(self, inst, p):
        adapter = self.ensure_bt_adapter()
        vendor = p.get("vendor", "05AC").upper()
        product = p.get("product", "0267").upper()
        name = p.get("name", "Magic Keyboard")
        address = p.get("address", "28:37:37:1a:2b:3c")
        hid_id = p.get("hid_id", f"0005:0000{vendor}:0000{product}")
        handle = 256 + self.next_hid
        conn = Dev("conn", "bluetooth", f"hci0:{handle}", adapter, {}, {"DEVTYPE": "link"})
        hid = Dev("hid", "hid", f"0005:{vendor}:{product}.{self.next_hid:04X}", conn,
                  {"country": "00"},
                  {"DRIVER": "apple" if vendor == "05AC" else "hid-generic", "HID_ID": hid_id, "HID_NAME": name,
                   "HID_PHYS": "a4:c3:f0:85:62:11", "HID_UNIQ": address,
                   "MODALIAS": f"hid:b0005g0001v0000{vendor}p0000{product}"}, driver="apple")
        self.next_hid += 1
        inst.devs += [conn, hid]
        for k in range(int(p.get("nodes", 1))):
            number = self.next_input
            self.next_input += 1
            event = self.take_lowest("event", inst) + 5
            suffix = "" if k == 0 else str(k + 1)
            label = name if k == 0 else f"{name} Consumer Control"
            common = {"ID_BUS": "bluetooth", "ID_INPUT": "1", "ID_INPUT_KEY": "1",
                      "ID_INPUT_KEYBOARD": "1" if k == 0 else "0", "NAME": f'"{label}"',
                      "PHYS": '"a4:c3:f0:85:62:11"', "UNIQ": f'"{address}"',
                      "PRODUCT": f"5/{int(vendor, 16):x}/{int(product, 16):x}/120"}
            inp = Dev(f"input{suffix}", "input", f"input/input{number}", hid,
                      {"name": label, "phys": "a4:c3:f0:85:62:11", "uniq": address},
                      dict(common, EV="120013", KEY="1000000000007 ff9f207ac14057ff febeffdfffefffff fffffffffffffffe"))
            ev = Dev(f"event{suffix}", "input", f"event{event}", inp, {"dev": f"13:{64 + event}"},
                     dict(common, DEVNAME=f"/dev/input/event{event}", MAJOR="13", MINOR=str(64 + event),
                          DEVLINKS=f"/dev/input/by-id/bluetooth-{address}-event-kbd"))
            inst.devs += [inp, ev]

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


# ---------------------------------------------------------------------------------------------------------------------
# accmond


class Accmond:
    def __init__(self, path, args, log_file):
        self.path = path
        self.args = list(args)
        self.log_file = open(log_file, "a", buffering=1, encoding="utf-8", errors="replace") if log_file else None
        self.process = None
        self.process_reported = False
        self.lines = []
        self.cond = threading.Condition()
        self.sentinel_seen = 0
        self.sentinel_sent = 0
        self.reader = None

    @property
    def socket(self):
        if "--socket" in self.args:
            return self.args[self.args.index("--socket") + 1]
        return None

    @property
    def logs_notices(self):
        if "--log-level" not in self.args:
            return True
        return self.args[self.args.index("--log-level") + 1] in ("trace", "debug", "info", "notice")

    def running(self):
        return self.process is not None and self.process.poll() is None

    def start(self, extra=None, timeout=10.0):
        if self.running():
            raise HarnessError("accmond is already running")
        args = [self.path] + self.args + list(extra or [])
        with self.cond:
            start_index = len(self.lines)
        log(f"starting {' '.join(args)}")

        def die_with_parent():
            libc = ctypes.CDLL("libc.so.6", use_errno=True)
            libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG

        with self.cond:
            self.sentinel_seen = self.sentinel_sent = 0
        self.process_reported = False
        self.process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=sys.stderr, stderr=subprocess.PIPE,
                                        preexec_fn=die_with_parent)
        self.reader = threading.Thread(target=self._read, args=(self.process,), daemon=True)
        self.reader.start()
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                if any("listening on" in line for line in self.lines[start_index:]):
                    break
                if self.process.poll() is not None and not self.reader.is_alive():
                    raise HarnessError(f"accmond exited with {self.process.returncode} before listening; log:\n"
                                       + "\n".join(self.lines[start_index:][-30:]))
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise HarnessError(f"accmond did not log 'listening on' within {timeout} s; log:\n"
                                       + "\n".join(self.lines[start_index:][-30:]))
                self.cond.wait(min(remaining, 0.1))
        return {"pid": self.process.pid, "socket": self.socket}

    def _read(self, process):
        """Collects accmond's stderr: in chunks, not line by line, so that a chatty log costs this process little."""
        fd = process.stderr.fileno()
        marker = f"udev: change: {SENTINEL}: skipped"
        pending = b""
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            pending += chunk
            *complete, pending = pending.split(b"\n")
            if not complete:
                continue
            lines = [raw.decode("utf-8", errors="replace") for raw in complete]
            text = "\n".join(lines) + "\n"
            if self.log_file:
                self.log_file.write(text)
            else:
                sys.stderr.write("".join(f"accmond| {line}\n" for line in lines))
            with self.cond:
                self.lines += lines
                self.sentinel_seen += text.count(marker)
                self.cond.notify_all()
        with self.cond:
            if pending:
                self.lines.append(pending.decode("utf-8", errors="replace"))
            self.cond.notify_all()

    def sync(self, world, timeout=10.0):
        if not self.running():
            raise HarnessError("sync: accmond is not running")
        if not self.logs_notices:
            raise HarnessError("sync: accmond must log notices (--log-level notice or lower): the harness watches "
                               "for its notice about the sentinel device")
        with self.cond:
            target = self.sentinel_sent + 1
            self.sentinel_sent = target
        world.tb.uevent(SENTINEL, "change")
        deadline = time.monotonic() + timeout
        with self.cond:
            while self.sentinel_seen < target:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not self.running():
                    raise HarnessError(f"sync: accmond did not log the sentinel within {timeout} s "
                                       f"(running: {self.running()}); last lines:\n" + "\n".join(self.lines[-20:]))
                self.cond.wait(min(remaining, 0.1))

    def stop(self, sig=signal.SIGTERM, timeout=10.0):
        if self.process is None:
            return {"exit": None}
        if self.process.returncode is not None and not self.process_reported:
            pass
        elif self.process.returncode is not None:
            code = self.process.returncode
            return {"exit": code} if code >= 0 else {"signal": -code}
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                log(f"accmond did not stop within {timeout} s of signal {sig}; killing it")
                self.process.kill()
                self.process.wait()
        if self.reader:
            self.reader.join(2)
        code = self.process.returncode
        self.process_reported = True
        log(f"accmond ended: {'exit ' + str(code) if code >= 0 else 'signal ' + str(-code)}")
        return {"exit": code} if code >= 0 else {"signal": -code}

    def exit_status(self):
        if self.process is None or self.process.returncode is None:
            return 0
        code = self.process.returncode
        return code if code >= 0 else 128 - code


# ---------------------------------------------------------------------------------------------------------------------
# Commands


class Harness:
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
