/* bus_relay: the bus floor, the least a D-Bus broker between udev and an app can do (tools/relay.c on the bus).
 *
 *   bus_relay NAME [--full]
 *
 * Owns the bus name NAME on the system bus (DBUS_SYSTEM_BUS_ADDRESS), follows libudev's monitor ("udev" netlink group,
 * subsystem usb, devtype usb_device) as tools/relay.c does, and for each add or remove that carries ID_SERIAL_SHORT
 * sends one signal per peer, unicast as accmond sends them (docs/DBUS.md §3), from one thread, with no other work:
 *   - to each peer that called GetManagedObjects on /org/accmon/Accmon1 (answered with no objects), an
 *     InterfacesAdded(o, a{sa{sv}}) or InterfacesRemoved(o, as) of /org/accmon/Accmon1/accessories/<serial>, the
 *     interface org.accmon.Accmon1.Accessory with the properties SerialNumber and SysfsPath;
 *   - to each subscription made with org.accmon.Accmon1.Manager.Subscribe (answered with a path, then a Snapshot with
 *     no accessories), an Events(a(sta{sv})) signal with the one event (change, a sequence number, the same two
 *     properties); Ack is answered (when a reply is asked) and otherwise ignored.
 * With --full, each accessory carries the properties accmond sends (the 17 fields, and the 7 claim properties in
 * InterfacesAdded), made from the event's udev properties: the floor with accmond's message sizes.
 * No sysfs reads, manifest, registry, queue or acknowledgement bookkeeping. Peers that leave the bus are forgotten
 * (NameOwnerChanged). tools/bus_client.c and tools/bus_glib_client.c receive it as they receive accmond. */
#include <errno.h>
#include <libudev.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>
#include <time.h>

#define MANAGER_PATH "/org/accmon/Accmon1"
#define OBJECT_MANAGER "org.freedesktop.DBus.ObjectManager"
#define ACCESSORY "org.accmon.Accmon1.Accessory"
#define SUBSCRIPTION "org.accmon.Accmon1.Subscription"
#define MAX_PEERS 64

static struct { char name[64]; char path[96]; } watchers[MAX_PEERS], subscribers[MAX_PEERS];
static int watcher_count, subscriber_count, full;
static uint64_t sequence, subscriptions_made;

static void check(int r, const char *what) {
    if (r < 0) {
        fprintf(stderr, "bus_relay: %s: %s\n", what, strerror(-r));
        exit(1);
    }
}

static const char *property(struct udev_device *device, const char *key) {
    const char *value = udev_device_get_property_value(device, key);
    return value ? value : "";
}

static int entry(sd_bus_message *m, const char *key, const char *type, ...) {
    va_list values;
    va_start(values, type);
    int r = sd_bus_message_open_container(m, 'e', "sv");
    if (r >= 0) r = sd_bus_message_append(m, "s", key);
    if (r >= 0) r = sd_bus_message_open_container(m, 'v', type);
    if (r >= 0) r = sd_bus_message_appendv(m, type, values);
    if (r >= 0) r = sd_bus_message_close_container(m);
    if (r >= 0) r = sd_bus_message_close_container(m);
    va_end(values);
    return r;
}

/* The accessory's a{sv}: SerialNumber and SysfsPath, or with --full every property accmond sends. */
static int append_accessory(sd_bus_message *m, struct udev_device *device, int with_claim) {
    char sysfs[512];
    snprintf(sysfs, sizeof sysfs, "/sys%s", udev_device_get_devpath(device));
    int r = sd_bus_message_open_container(m, 'a', "{sv}");
    if (r >= 0 && full) {
        char id[256];
        const char *port = strrchr(sysfs, '/');
        snprintf(id, sizeof id, "usb:%s:%s:serial=%s", property(device, "ID_VENDOR_ID"),
                 property(device, "ID_MODEL_ID"), property(device, "ID_SERIAL_SHORT"));
        unsigned product = (unsigned)strtoul(property(device, "ID_MODEL_ID"), NULL, 16);
        if (r >= 0) r = entry(m, "AccessoryID", "s", id);
        if (r >= 0) r = entry(m, "ConnectionID", "t", sequence);
        if (r >= 0) r = entry(m, "DescriptorsSHA256", "s",
                              "0000000000000000000000000000000000000000000000000000000000000000");
        if (r >= 0) r = entry(m, "DeviceNodes", "as", 1, property(device, "DEVNAME"));
        if (r >= 0) r = entry(m, "FirmwareRevision", "s", "");
        if (r >= 0) r = entry(m, "HardwareRevision", "s", property(device, "ID_REVISION"));
        if (r >= 0) r = entry(m, "InterfaceNumber", "s", "");
        if (r >= 0) r = entry(m, "Kind", "s", "usb");
        if (r >= 0) r = entry(m, "Manufacturer", "s", property(device, "ID_VENDOR"));
        if (r >= 0) r = entry(m, "ModelNumber", "s", property(device, "ID_MODEL"));
        if (r >= 0) r = entry(m, "Name", "s", property(device, "ID_MODEL"));
        if (r >= 0) r = entry(m, "PortPath", "s", port ? port + 1 : "");
        if (r >= 0) r = entry(m, "ProductID", "q", (uint16_t)product);
        if (r >= 0) r = entry(m, "ProtocolStrings", "as", 0);
    }
    if (r >= 0) r = entry(m, "SerialNumber", "s", property(device, "ID_SERIAL_SHORT"));
    if (r >= 0) r = entry(m, "SysfsPath", "s", sysfs);
    if (r >= 0 && full) {
        r = entry(m, "VendorID", "q", (uint16_t)strtoul(property(device, "ID_VENDOR_ID"), NULL, 16));
        const char *texts[] = {"ClaimID", "ClaimState", "ClaimHolder"};
        for (int i = 0; with_claim && r >= 0 && i < 3; i++) r = entry(m, texts[i], "s", "");
        if (with_claim && r >= 0) r = entry(m, "ClaimHolderUID", "u", 0);
        if (with_claim && r >= 0) r = entry(m, "ClaimSince", "d", 0.0);
        if (with_claim && r >= 0) r = entry(m, "ClaimReason", "s", "");
        if (with_claim && r >= 0) r = entry(m, "ClaimWaiting", "u", 0);
    }
    if (r >= 0) r = sd_bus_message_close_container(m);
    return r;
}

static void announce(sd_bus *bus, struct udev_device *device, int plugged) {
    char path[160];
    snprintf(path, sizeof path, MANAGER_PATH "/accessories/%s", property(device, "ID_SERIAL_SHORT"));
    sequence++;
    for (int i = 0; i < watcher_count; i++) {
        sd_bus_message *m = NULL;
        int r = sd_bus_message_new_signal(bus, &m, MANAGER_PATH, OBJECT_MANAGER,
                                          plugged ? "InterfacesAdded" : "InterfacesRemoved");
        if (r >= 0) r = sd_bus_message_set_destination(m, watchers[i].name);
        if (r >= 0) r = sd_bus_message_append(m, "o", path);
        if (r >= 0 && plugged) {
            r = sd_bus_message_open_container(m, 'a', "{sa{sv}}");
            if (r >= 0) r = sd_bus_message_open_container(m, 'e', "sa{sv}");
            if (r >= 0) r = sd_bus_message_append(m, "s", ACCESSORY);
            if (r >= 0) r = append_accessory(m, device, 1);
            if (r >= 0) r = sd_bus_message_close_container(m);
            if (r >= 0) r = sd_bus_message_close_container(m);
        } else if (r >= 0) {
            r = sd_bus_message_append(m, "as", 1, ACCESSORY);
        }
        if (r >= 0) r = sd_bus_send(bus, m, NULL);
        check(r, "InterfacesAdded/Removed");
        sd_bus_message_unref(m);
    }
    for (int i = 0; i < subscriber_count; i++) {
        sd_bus_message *m = NULL;
        int r = sd_bus_message_new_signal(bus, &m, subscribers[i].path, SUBSCRIPTION, "Events");
        if (r >= 0) r = sd_bus_message_set_destination(m, subscribers[i].name);
        if (r >= 0) r = sd_bus_message_open_container(m, 'a', "(sta{sv})");
        if (r >= 0) r = sd_bus_message_open_container(m, 'r', "sta{sv}");
        if (r >= 0) r = sd_bus_message_append(m, "st", plugged ? "connect" : "disconnect", sequence);
        if (r >= 0) r = append_accessory(m, device, 0);
        if (r >= 0) r = sd_bus_message_close_container(m);
        if (r >= 0) r = sd_bus_message_close_container(m);
        if (r >= 0) r = sd_bus_send(bus, m, NULL);
        check(r, "Events");
        sd_bus_message_unref(m);
    }
}

/* A method call sd-bus handed over: GetManagedObjects, Subscribe, Ack; anything else is refused. */
static void answer(sd_bus *bus, sd_bus_message *m) {
    const char *sender = sd_bus_message_get_sender(m);
    int r = 0;
    if (sd_bus_message_is_method_call(m, OBJECT_MANAGER, "GetManagedObjects") && watcher_count < MAX_PEERS) {
        snprintf(watchers[watcher_count++].name, sizeof watchers[0].name, "%s", sender);
        r = sd_bus_reply_method_return(m, "a{oa{sa{sv}}}", 0);
    } else if (sd_bus_message_is_method_call(m, "org.accmon.Accmon1.Manager", "Subscribe") &&
               subscriber_count < MAX_PEERS) {
        int slot = subscriber_count++;
        snprintf(subscribers[slot].name, sizeof subscribers[0].name, "%s", sender);
        snprintf(subscribers[slot].path, sizeof subscribers[0].path, MANAGER_PATH "/subscriptions/%llu",
                 (unsigned long long)++subscriptions_made);
        r = sd_bus_reply_method_return(m, "o", subscribers[slot].path);
        if (r >= 0) {
            sd_bus_message *snapshot = NULL;
            r = sd_bus_message_new_signal(bus, &snapshot, subscribers[slot].path, SUBSCRIPTION, "Snapshot");
            if (r >= 0) r = sd_bus_message_set_destination(snapshot, sender);
            if (r >= 0) r = sd_bus_message_append(snapshot, "taa{sv}b", sequence, 0, 0);
            if (r >= 0) r = sd_bus_send(bus, snapshot, NULL);
            sd_bus_message_unref(snapshot);
        }
    } else if (sd_bus_message_is_method_call(m, SUBSCRIPTION, "Ack")) {
        if (sd_bus_message_get_expect_reply(m)) r = sd_bus_reply_method_return(m, "");
    } else if (sd_bus_message_get_expect_reply(m)) {
        r = sd_bus_reply_method_errorf(m, SD_BUS_ERROR_UNKNOWN_METHOD, "bus_relay: no method %s",
                                       sd_bus_message_get_member(m));
    }
    check(r, "reply");
}

/* NameOwnerChanged(name, old, ""): a peer left; its watch and subscriptions go. */
static int peer_left(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    const char *name, *old, *new;
    if (sd_bus_message_read(m, "sss", &name, &old, &new) < 0 || *new) return 0;
    for (int i = 0; i < watcher_count; i++)
        if (strcmp(watchers[i].name, name) == 0) watchers[i--] = watchers[--watcher_count];
    for (int i = 0; i < subscriber_count; i++)
        if (strcmp(subscribers[i].name, name) == 0) subscribers[i--] = subscribers[--subscriber_count];
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3 || (argc == 3 && strcmp(argv[2], "--full"))) {
        fprintf(stderr, "usage: bus_relay NAME [--full]\n");
        return 2;
    }
    full = argc == 3;
    struct udev *udev = udev_new();
    struct udev_monitor *monitor = udev ? udev_monitor_new_from_netlink(udev, "udev") : NULL;
    if (!monitor || udev_monitor_filter_add_match_subsystem_devtype(monitor, "usb", "usb_device") < 0 ||
        udev_monitor_enable_receiving(monitor) < 0) {
        fprintf(stderr, "bus_relay: cannot open the udev monitor\n");
        return 1;
    }
    sd_bus *bus = NULL;
    check(sd_bus_open_system(&bus), "connecting to the system bus");
    check(sd_bus_match_signal(bus, NULL, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                              "NameOwnerChanged", peer_left, NULL), "AddMatch");
    check(sd_bus_request_name(bus, argv[1], 0), argv[1]);
    for (;;) {
        sd_bus_message *m = NULL;
        int r;
        while ((r = sd_bus_process(bus, &m)) > 0) {
            uint8_t type = 0;
            if (m && sd_bus_message_get_type(m, &type) >= 0 && type == SD_BUS_MESSAGE_METHOD_CALL) answer(bus, m);
            m = sd_bus_message_unref(m);
        }
        check(r, "processing");
        uint64_t until;
        int timeout = -1;
        if (sd_bus_get_timeout(bus, &until) > 0 && until != UINT64_MAX) {
            struct timespec t;
            clock_gettime(CLOCK_MONOTONIC, &t);
            uint64_t now = (uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_nsec / 1000u;
            timeout = until <= now ? 0 : (int)((until - now + 999) / 1000);
        }
        struct pollfd watched[2] = {{.fd = udev_monitor_get_fd(monitor), .events = POLLIN},
                                    {.fd = sd_bus_get_fd(bus), .events = (short)sd_bus_get_events(bus)}};
        if (poll(watched, 2, timeout) < 0 && errno != EINTR) return 1;
        struct udev_device *device;
        while ((watched[0].revents & POLLIN) && (device = udev_monitor_receive_device(monitor)) != NULL) {
            const char *action = udev_device_get_action(device);
            int plugged = action && strcmp(action, "add") == 0, unplugged = action && strcmp(action, "remove") == 0;
            if ((plugged || unplugged) && udev_device_get_property_value(device, "ID_SERIAL_SHORT"))
                announce(bus, device, plugged);
            udev_device_unref(device);
        }
    }
}
