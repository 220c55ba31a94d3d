"""The device templates: what each kind of accessory (FTDI and CDC-ACM serial adapters, USB sticks, a Bluetooth
keyboard, hubs, root hubs, internal and garbage devices) looks like in sysfs, attribute by attribute, as Linux 6.1
shows it. Kept apart from the world's lifecycle (testbed_world.py): these only describe devices as Dev specs; the world
creates them, numbers them and sends their uevents."""

import zlib

from testbed_common import HarnessError
from testbed_devices import Dev, Instance


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


class DeviceBuilders:
    """Builds an Instance's Dev specs from a template and its params. A mixin of World: it takes numbers from the
    world's pools (`take_lowest`, `port_under`, `devnum`), reads its `root_hubs`, `pci` and `instances`, and
    `ensure_bt_adapter` creates the Bluetooth controller in the world's sysfs (`create`)."""

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
