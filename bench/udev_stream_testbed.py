"""The testbed of bench/udev_stream.py: USB devices under one root hub, with their sysfs attributes and raw
`descriptors` (a device descriptor and one configuration with a vendor-specific interface and an endpoint, 43 bytes,
as a real device has), no DEVNAME (so that coldplug does not announce them; the events carry DEVNAME) and no `serial`
attribute (accmond takes the serial from the event's ID_SERIAL_SHORT). Apart from the script because it is the set-up,
not the measurement. Imports gi: only inside the testbed's Python (under umockdev-wrapper)."""
import os

import gi

gi.require_version("UMockdev", "1.0")
from gi.repository import UMockdev  # noqa: E402


def build_testbed(work, devices, descriptors=True):
    """A testbed with `devices` USB devices (vendor 1209, products A000 on), `descriptors` files unless told not to;
    sets UMOCKDEV_DIR for the processes started from here. Writes WORK/devices, the list bench/tools/uevent_blast
    reads (one "DEVPATH DEVNAME" line per device). Returns (testbed, root directory, devices file, {devpath: index});
    the testbed removes its directory when it goes, so keep it for the whole run."""
    testbed = UMockdev.Testbed.new()
    root = testbed.get_root_dir()
    os.environ["UMOCKDEV_DIR"] = root
    pci = testbed.add_device("pci", "pci0000:00/0000:00:14.0", None, ["vendor", "0x8086"], ["DRIVER", "xhci_hcd"])
    hub = testbed.add_device("usb", "usb1", pci, ["idVendor", "1d6b", "idProduct", "0002", "bDeviceClass", "09",
                                                  "busnum", "1", "devnum", "1"], ["DEVTYPE", "usb_device"])
    device_lines = []
    for index in range(devices):
        syspath = testbed.add_device(
            "usb", f"1-{index + 1}", hub,
            ["idVendor", "1209", "idProduct", "%04x" % (0xA000 + index), "bcdDevice", "0100", "bDeviceClass", "00",
             "removable", "removable", "manufacturer", "accmon", "product", "Bench Device", "busnum", "1",
             "devnum", str(index + 2)],
            ["DEVTYPE", "usb_device", "ID_VENDOR_ID", "1209", "ID_MODEL_ID", "%04x" % (0xA000 + index)])
        if descriptors:
            product = 0xA000 + index
            blob = bytes([18, 1, 0x00, 0x02, 0, 0, 0, 64, 0x09, 0x12, product & 0xFF, product >> 8, 0x00, 0x01,
                          1, 2, 3, 1,  # device: USB 2.0, class per interface, 1209:product, bcdDevice 1.00
                          9, 2, 25, 0, 1, 1, 0, 0x80, 50,  # configuration: 25 bytes, one interface
                          9, 4, 0, 0, 1, 0xFF, 0, 0, 0,  # interface 0: vendor-specific, one endpoint
                          7, 5, 0x81, 3, 8, 0, 10])  # endpoint 1 IN, interrupt
            testbed.set_attribute_binary(syspath, "descriptors", list(blob))
        device_lines.append(f"{syspath[len('/sys'):]} /dev/bus/usb/001/{index % 125 + 2:03d}")
    devices_file = os.path.join(work, "devices")
    with open(devices_file, "w") as out:
        out.write("\n".join(device_lines) + "\n")
    devpath_index = {line.split()[0]: number for number, line in enumerate(device_lines)}
    return testbed, root, devices_file, devpath_index
