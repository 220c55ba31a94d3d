/* bus_client: the bus bench's sd-bus receiver (libsystemd's sd-bus, the library of busctl and systemd's own clients).
 * It prints one line per accessory event in tools/relay.c's client format, "connect|disconnect <serial> <sysfs path>",
 * so that bench/udev_stream_lines.parse_client matches them to the event sent (tools/stamp times them).
 *
 *   bus_client watch NAME      the object manager at /org/accmon/Accmon1 of the bus name NAME: GetManagedObjects
 *                              (which makes accmond send this peer InterfacesAdded and InterfacesRemoved from then
 *                              on), then a line per InterfacesAdded (SerialNumber and SysfsPath from its properties)
 *                              and per InterfacesRemoved (which has only the path: the serial is remembered from the
 *                              InterfacesAdded of that path)
 *   bus_client subscribe NAME  Manager.Subscribe({}) on NAME, then a line per event of each Events(a(sta{sv})) signal,
 *                              each signal acknowledged (Ack with its last sequence, no reply asked, as an app that
 *                              handles its events acknowledges them)
 *
 * First line "subscribed" once GetManagedObjects has answered (watch) or the Snapshot has come (subscribe): the bench
 * waits for it. The bus is the system bus's address (DBUS_SYSTEM_BUS_ADDRESS). The lines of one wake-up are written
 * together, when sd-bus has nothing more to hand over, so a burst costs one write per batch as the relay's client's
 * reads do. Works the same against accmond and tools/bus_relay.c (the bus floor), which sends the same signals. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>
#include <unistd.h>

#define MANAGER_PATH "/org/accmon/Accmon1"
#define OBJECT_MANAGER "org.freedesktop.DBus.ObjectManager"
#define ACCESSORY "org.accmon.Accmon1.Accessory"
#define SUBSCRIPTION "org.accmon.Accmon1.Subscription"
#define MAX_LIVE 4096

static const char *destination;
static char output[1 << 20];
static size_t output_used;
static int subscribed;

static void fail(const char *what, int r) {
    fprintf(stderr, "bus_client: %s: %s\n", what, strerror(-r));
    exit(1);
}

static void flush_output(void) {
    size_t done = 0;
    while (done < output_used) {
        ssize_t n = write(1, output + done, output_used - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) exit(1);
        done += (size_t)n;
    }
    output_used = 0;
}

static void print_line(const char *change, const char *serial, const char *sysfs) {
    if (output_used + 1024 > sizeof output) flush_output();
    if (!serial) { /* "subscribed" */
        output_used += (size_t)snprintf(output + output_used, sizeof output - output_used, "%s\n", change);
        return;
    }
    int n = snprintf(output + output_used, sizeof output - output_used, "%s %s %s\n", change,
                     *serial ? serial : "-", sysfs && *sysfs ? sysfs : "-");
    if (n > 0) output_used += (size_t)n;
}

/* The live objects' serials and sysfs paths, by object path (a few dozen at a time in the bench). */
static struct { char path[128], serial[64], sysfs[256]; int used; } live[MAX_LIVE];
static int live_top;

static void remember(const char *path, const char *serial, const char *sysfs) {
    int slot = -1;
    for (int i = 0; i < live_top && slot < 0; i++) if (!live[i].used) slot = i;
    if (slot < 0) {
        if (live_top == MAX_LIVE) return;
        slot = live_top++;
    }
    snprintf(live[slot].path, sizeof live[slot].path, "%s", path);
    snprintf(live[slot].serial, sizeof live[slot].serial, "%s", serial ? serial : "");
    snprintf(live[slot].sysfs, sizeof live[slot].sysfs, "%s", sysfs ? sysfs : "");
    live[slot].used = 1;
}

/* Reads an a{sv} of accessory properties, keeping SerialNumber and SysfsPath (copied into the buffers given). */
static int read_properties(sd_bus_message *m, char *serial, size_t serial_size, char *sysfs, size_t sysfs_size) {
    int r = sd_bus_message_enter_container(m, 'a', "{sv}");
    if (r < 0) return r;
    while ((r = sd_bus_message_enter_container(m, 'e', "sv")) > 0) {
        const char *key, *value;
        if ((r = sd_bus_message_read(m, "s", &key)) < 0) return r;
        int wanted = strcmp(key, "SerialNumber") == 0 ? 1 : strcmp(key, "SysfsPath") == 0 ? 2 : 0;
        if (wanted) {
            if ((r = sd_bus_message_read(m, "v", "s", &value)) < 0) return r;
            snprintf(wanted == 1 ? serial : sysfs, wanted == 1 ? serial_size : sysfs_size, "%s", value);
        } else if ((r = sd_bus_message_skip(m, "v")) < 0) {
            return r;
        }
        if ((r = sd_bus_message_exit_container(m)) < 0) return r;
    }
    if (r < 0) return r;
    return sd_bus_message_exit_container(m);
}

/* An object's interfaces, a{sa{sv}}: the accessory's SerialNumber and SysfsPath, the rest skipped. */
static int read_interfaces(sd_bus_message *m, char *serial, size_t serial_size, char *sysfs, size_t sysfs_size) {
    int r = sd_bus_message_enter_container(m, 'a', "{sa{sv}}");
    if (r < 0) return r;
    while ((r = sd_bus_message_enter_container(m, 'e', "sa{sv}")) > 0) {
        const char *interface;
        if ((r = sd_bus_message_read(m, "s", &interface)) < 0) return r;
        if (strcmp(interface, ACCESSORY) == 0) r = read_properties(m, serial, serial_size, sysfs, sysfs_size);
        else r = sd_bus_message_skip(m, "a{sv}");
        if (r < 0 || (r = sd_bus_message_exit_container(m)) < 0) return r;
    }
    if (r < 0) return r;
    return sd_bus_message_exit_container(m);
}

static int on_added(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    const char *path;
    char serial[64] = "", sysfs[256] = "";
    int r = sd_bus_message_read(m, "o", &path);
    if (r < 0 || (r = read_interfaces(m, serial, sizeof serial, sysfs, sizeof sysfs)) < 0) fail("InterfacesAdded", r);
    remember(path, serial, sysfs);
    print_line("connect", serial, sysfs);
    return 0;
}

static int on_removed(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    const char *path;
    int r = sd_bus_message_read(m, "o", &path);
    if (r < 0) fail("InterfacesRemoved", r);
    for (int i = 0; i < live_top; i++) {
        if (live[i].used && strcmp(live[i].path, path) == 0) {
            print_line("disconnect", live[i].serial, live[i].sysfs);
            live[i].used = 0;
            while (live_top > 0 && !live[live_top - 1].used) live_top--;
            return 0;
        }
    }
    print_line("disconnect", "-", path);
    return 0;
}

static int on_snapshot(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    if (!subscribed) print_line("subscribed", NULL, NULL);
    subscribed = 1;
    return 0;
}

/* Events(a(sta{sv})): a line per event, then Ack of the last sequence (no reply asked). */
static int on_events(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    uint64_t last = 0;
    int r = sd_bus_message_enter_container(m, 'a', "(sta{sv})");
    if (r < 0) fail("Events", r);
    while ((r = sd_bus_message_enter_container(m, 'r', "sta{sv}")) > 0) {
        const char *change;
        uint64_t sequence;
        char serial[64] = "", sysfs[256] = "";
        if ((r = sd_bus_message_read(m, "st", &change, &sequence)) < 0 ||
            (r = read_properties(m, serial, sizeof serial, sysfs, sizeof sysfs)) < 0 ||
            (r = sd_bus_message_exit_container(m)) < 0)
            fail("Events", r);
        print_line(change, serial, sysfs);
        if (sequence > last) last = sequence;
    }
    if (r < 0) fail("Events", r);
    r = sd_bus_call_method_async(sd_bus_message_get_bus(m), NULL, destination, sd_bus_message_get_path(m),
                                 SUBSCRIPTION, "Ack", NULL, NULL, "t", last);
    if (r < 0) fail("Ack", r);
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 3 || (strcmp(argv[1], "watch") && strcmp(argv[1], "subscribe"))) {
        fprintf(stderr, "usage: bus_client watch|subscribe NAME\n");
        return 2;
    }
    destination = argv[2];
    sd_bus *bus = NULL;
    sd_bus_error error = SD_BUS_ERROR_NULL;
    sd_bus_message *reply = NULL;
    int r = sd_bus_open_system(&bus);
    if (r < 0) fail("connecting to the system bus", r);
    /* The signals of NAME's owner only: its unique name (sd-bus matches a message's sender as it is, unique). */
    const char *owner;
    r = sd_bus_call_method(bus, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                           "GetNameOwner", &error, &reply, "s", destination);
    if (r < 0 || (r = sd_bus_message_read(reply, "s", &owner)) < 0) {
        fprintf(stderr, "bus_client: GetNameOwner %s: %s\n", destination, error.message ? error.message : strerror(-r));
        return 1;
    }
    char *sender = strdup(owner);
    reply = sd_bus_message_unref(reply);
    if (strcmp(argv[1], "watch") == 0) {
        if ((r = sd_bus_match_signal(bus, NULL, sender, MANAGER_PATH, OBJECT_MANAGER, "InterfacesAdded", on_added,
                                     NULL)) < 0 ||
            (r = sd_bus_match_signal(bus, NULL, sender, MANAGER_PATH, OBJECT_MANAGER, "InterfacesRemoved", on_removed,
                                     NULL)) < 0)
            fail("AddMatch", r);
        r = sd_bus_call_method(bus, destination, MANAGER_PATH, OBJECT_MANAGER, "GetManagedObjects", &error, &reply, "");
        if (r < 0) {
            fprintf(stderr, "bus_client: GetManagedObjects: %s\n", error.message ? error.message : strerror(-r));
            return 1;
        }
        /* The objects there already: remembered, no line (the bench starts with none). */
        if ((r = sd_bus_message_enter_container(reply, 'a', "{oa{sa{sv}}}")) < 0) fail("GetManagedObjects", r);
        while ((r = sd_bus_message_enter_container(reply, 'e', "oa{sa{sv}}")) > 0) {
            const char *path;
            char serial[64] = "", sysfs[256] = "";
            if ((r = sd_bus_message_read(reply, "o", &path)) < 0 ||
                (r = read_interfaces(reply, serial, sizeof serial, sysfs, sizeof sysfs)) < 0 ||
                (r = sd_bus_message_exit_container(reply)) < 0)
                fail("GetManagedObjects", r);
            remember(path, serial, sysfs);
        }
        reply = sd_bus_message_unref(reply);
        print_line("subscribed", NULL, NULL);
    } else {
        /* The subscription's signals are matched before Subscribe: the Snapshot follows the reply at once. */
        if ((r = sd_bus_match_signal(bus, NULL, sender, NULL, SUBSCRIPTION, "Snapshot", on_snapshot, NULL)) < 0 ||
            (r = sd_bus_match_signal(bus, NULL, sender, NULL, SUBSCRIPTION, "Events", on_events, NULL)) < 0)
            fail("AddMatch", r);
        r = sd_bus_call_method(bus, destination, MANAGER_PATH, "org.accmon.Accmon1.Manager", "Subscribe", &error,
                               &reply, "a{sv}", 0);
        if (r < 0) {
            fprintf(stderr, "bus_client: Subscribe: %s\n", error.message ? error.message : strerror(-r));
            return 1;
        }
        reply = sd_bus_message_unref(reply);
    }
    for (;;) {
        r = sd_bus_process(bus, NULL);
        if (r < 0) fail("processing", r);
        if (r > 0) continue;
        flush_output();
        r = sd_bus_wait(bus, UINT64_MAX);
        if (r < 0 && r != -EINTR) fail("waiting", r);
    }
}
