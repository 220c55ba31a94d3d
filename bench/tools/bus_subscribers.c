/* bus_subscribers: many subscriptions on one bus connection, for the bus bench's memory phase (sd-bus).
 *
 *   bus_subscribers NAME COUNT
 *
 * Calls org.accmon.Accmon1.Manager.Subscribe({}) on NAME COUNT times, one call after the other (never more than one
 * reply outstanding: dbus-daemon's max_replies_per_connection does not bite), waits for each subscription's Snapshot
 * and prints "subscribed COUNT". Then it acknowledges each Events signal (Ack of its last sequence, no reply asked) and
 * prints "acked N" each time every one of its subscriptions has received and acknowledged at least N events. Runs
 * until killed. The bus is the system bus's address (DBUS_SYSTEM_BUS_ADDRESS). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>

#define SUBSCRIPTION "org.accmon.Accmon1.Subscription"

static const char *destination;
static int count, snapshots;
static char (*paths)[128];
static uint64_t *received;

static void fail(const char *what, int r) {
    fprintf(stderr, "bus_subscribers: %s: %s\n", what, strerror(-r));
    exit(1);
}

static int find(const char *path) {
    for (int i = 0; i < count; i++)
        if (strcmp(paths[i], path) == 0) return i;
    return -1;
}

static int on_snapshot(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    snapshots++;
    return 0;
}

static int on_events(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    int index = find(sd_bus_message_get_path(m));
    uint64_t last = 0, events = 0;
    int r = sd_bus_message_enter_container(m, 'a', "(sta{sv})");
    if (r < 0) fail("Events", r);
    while ((r = sd_bus_message_enter_container(m, 'r', "sta{sv}")) > 0) {
        const char *change;
        uint64_t sequence;
        if ((r = sd_bus_message_read(m, "st", &change, &sequence)) < 0 || (r = sd_bus_message_skip(m, "a{sv}")) < 0 ||
            (r = sd_bus_message_exit_container(m)) < 0)
            fail("Events", r);
        if (sequence > last) last = sequence;
        events++;
    }
    if (r < 0) fail("Events", r);
    if (index >= 0) received[index] += events;
    r = sd_bus_call_method_async(sd_bus_message_get_bus(m), NULL, destination, sd_bus_message_get_path(m),
                                 SUBSCRIPTION, "Ack", NULL, NULL, "t", last);
    if (r < 0) fail("Ack", r);
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 3 || (count = atoi(argv[2])) <= 0) {
        fprintf(stderr, "usage: bus_subscribers NAME COUNT\n");
        return 2;
    }
    destination = argv[1];
    paths = calloc((size_t)count, sizeof *paths);
    received = calloc((size_t)count, sizeof *received);
    sd_bus *bus = NULL;
    sd_bus_error error = SD_BUS_ERROR_NULL;
    sd_bus_message *reply = NULL;
    const char *text;
    int r = sd_bus_open_system(&bus);
    if (r < 0) fail("connecting to the system bus", r);
    r = sd_bus_call_method(bus, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                           "GetNameOwner", &error, &reply, "s", destination);
    if (r < 0 || (r = sd_bus_message_read(reply, "s", &text)) < 0) fail("GetNameOwner", r);
    char *owner = strdup(text);
    reply = sd_bus_message_unref(reply);
    if ((r = sd_bus_match_signal(bus, NULL, owner, NULL, SUBSCRIPTION, "Snapshot", on_snapshot, NULL)) < 0 ||
        (r = sd_bus_match_signal(bus, NULL, owner, NULL, SUBSCRIPTION, "Events", on_events, NULL)) < 0)
        fail("AddMatch", r);
    for (int i = 0; i < count; i++) {
        r = sd_bus_call_method(bus, destination, "/org/accmon/Accmon1", "org.accmon.Accmon1.Manager", "Subscribe",
                               &error, &reply, "a{sv}", 0);
        if (r < 0) {
            fprintf(stderr, "bus_subscribers: Subscribe %d: %s\n", i + 1, error.message ? error.message : strerror(-r));
            return 1;
        }
        if ((r = sd_bus_message_read(reply, "o", &text)) < 0) fail("Subscribe", r);
        snprintf(paths[i], sizeof paths[i], "%s", text);
        reply = sd_bus_message_unref(reply);
    }
    int told_subscribed = 0;
    uint64_t told = 0;
    for (;;) {
        r = sd_bus_process(bus, NULL);
        if (r < 0) fail("processing", r);
        if (r > 0) continue;
        if (!told_subscribed && snapshots >= count) {
            printf("subscribed %d\n", count);
            told_subscribed = 1;
        }
        uint64_t least = UINT64_MAX;
        for (int i = 0; i < count; i++)
            if (received[i] < least) least = received[i];
        if (told_subscribed && least > told) {
            printf("acked %llu\n", (unsigned long long)least);
            told = least;
        }
        fflush(stdout);
        r = sd_bus_wait(bus, UINT64_MAX);
        if (r < 0 && r != -EINTR) fail("waiting", r);
    }
}
