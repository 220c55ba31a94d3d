/* fleet_baseline: a plain subscriber that reads a fleet's retained messages in the same windows as `accmon list
 * --broker` (Sources/AccmonMQTT/FleetSession+Reads.swift), and does nothing else with them: the floor of the scale
 * bench.
 *
 *   fleet_baseline PORT [--prefix P] [--broker-queue L] [--host NAME]
 *
 * The same reads in the same order: the end-marker topic `P/$readers/<id>` (a QoS 1 probe echoed once), then every
 * status `P/+/status` in one read (or, with --host, none), the host index `P/$hosts/<bucket>/+` in windows of buckets
 * when that read may have lost messages, then the hosts sorted by topic level in windows of whole hosts: each host's
 * status, accessory and claim topics, as many hosts as fit (L - 8) * 9 / 20 messages (a host counts 1 + the
 * accessories its status says, or the mean of those known), the next window started once the oldest one's SUBACK
 * came, the filters of the windows ended unsubscribed with the next SUBSCRIBE. Each read ends when its QoS 0 end
 * marker comes back; another marker goes when nothing arrives for 0.2 s after L packets (1 s
 * before); TCP_QUICKACK goes on after each read, as accmon's reader does. The work is only what choosing the windows
 * needs: the host level from each status topic, and its count (strstr); no JSON is decoded, nothing is kept of the
 * accessories. Prints one JSON line
 * {"seconds":S,"windows":W,"messages":M,"hosts":H,"accessories":A}.
 */
#define _GNU_SOURCE
#include <mosquitto.h>
#include <mqtt_protocol.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "bench_common.h"

#define UNCOUNTED 8

struct host { char *level; int count; /* -1: no count */ };

static struct mosquitto *client;
static const char *prefix = "accmon";
static char marker_topic[256], nonce[32];
static int queue_limit = 1000;
static struct host *hosts;
static size_t host_count, host_capacity;
/* An open read: its number, the packets since its SUBSCRIBE, its SUBACK, its markers, how it ended. */
struct window {
    int number, subscribe_mid, subscribed, markers_sent, ended_with, count;
    long packets;
    char **filters;
};

static int in_statuses, in_index, window_number, probe_done;
static struct window open_windows[2]; /* the oldest, and the next one started before it ended */
static int open_count;
static long messages, accessories;
static uint64_t last_packet;
static size_t prefix_length;

static void fail(const char *what, int rc) {
    fprintf(stderr, "fleet_baseline: %s: %s\n", what, mosquitto_strerror(rc));
    exit(1);
}

/* Appends a host; duplicates (a host both read from the statuses and the index) are merged after sorting. */
static void add_host(const char *level, size_t length, int count) {
    if (host_count == host_capacity) {
        host_capacity = host_capacity ? host_capacity * 2 : 1024;
        hosts = realloc(hosts, host_capacity * sizeof *hosts);
    }
    hosts[host_count++] = (struct host){strndup(level, length), count};
}

static void on_message(struct mosquitto *m, void *data, const struct mosquitto_message *message) {
    (void)m, (void)data;
    for (int i = 0; i < open_count; i++) open_windows[i].packets++;
    last_packet = now_ns();
    if (!strcmp(message->topic, marker_topic)) {
        char token[64] = "";
        int number, resend;
        if (!probe_done) { probe_done = 1; return; }
        memcpy(token, message->payload, message->payloadlen < 63 ? (size_t)message->payloadlen : 63);
        if (strncmp(token, nonce, strlen(nonce)) || sscanf(token + strlen(nonce), " %d %d", &number, &resend) != 2)
            return;
        for (int i = 0; i < open_count; i++) {
            if (open_windows[i].number == number) open_windows[i].ended_with = resend;
            /* An older window whose markers did not come back first: dropped. */
            else if (open_windows[i].number < number && open_windows[i].ended_with < 0)
                open_windows[i].ended_with = open_windows[i].markers_sent;
        }
        return;
    }
    messages++;
    const char *level = message->topic + prefix_length + 1, *slash = strchr(level, '/');
    if (!slash) return;
    if (in_statuses && !strcmp(slash, "/status")) {
        const char *found = message->payloadlen > 0 ? strstr(message->payload, "\"retained\":{") : NULL;
        found = found ? strstr(found, "\"accessories\":") : NULL;
        add_host(level, (size_t)(slash - level), found ? atoi(found + 14) : -1);
    } else if (in_index && !strncmp(level, "$hosts/", 7)) {
        const char *entry = strrchr(message->topic, '/') + 1;
        add_host(entry, strlen(entry), -1);
    } else if (strstr(slash, "/accessories/") == slash) {
        accessories++;
    }
}

static void on_packet(struct mosquitto *m, void *data, int mid, int count, const int *granted) {
    (void)m, (void)data, (void)count, (void)granted;
    for (int i = 0; i < open_count; i++) {
        open_windows[i].packets++;
        if (open_windows[i].subscribe_mid == mid) open_windows[i].subscribed = 1;
    }
    last_packet = now_ns();
}

static void on_unsubscribe(struct mosquitto *m, void *data, int mid) { on_packet(m, data, mid, 0, NULL); }

static void drive(int timeout_ms) {
    struct pollfd wait = {.fd = mosquitto_socket(client), .events = POLLIN};
    if (mosquitto_want_write(client)) wait.events |= POLLOUT;
    poll(&wait, 1, timeout_ms);
    int rc = MOSQ_ERR_SUCCESS;
    if (wait.revents & (POLLIN | POLLHUP | POLLERR))
        for (int i = 0; i < 256 && rc == MOSQ_ERR_SUCCESS; i++) {
            uint64_t before = last_packet;
            rc = mosquitto_loop_read(client, 1);
            if (last_packet == before) break;
        }
    if (wait.revents & POLLIN) {
        /* As accmon does: no delayed ACK, which mosquitto's Nagle would wait for at every round trip. */
        int on = 1;
        setsockopt(mosquitto_socket(client), IPPROTO_TCP, TCP_QUICKACK, &on, sizeof on);
    }
    if (rc == MOSQ_ERR_SUCCESS && (wait.revents & POLLOUT)) rc = mosquitto_loop_write(client, 1);
    if (rc == MOSQ_ERR_SUCCESS) rc = mosquitto_loop_misc(client);
    if (rc != MOSQ_ERR_SUCCESS) fail("connection", rc);
}

static void send_marker(struct window *window) {
    char token[64];
    int length = snprintf(token, sizeof token, "%s %d %d", nonce, window->number, window->markers_sent++);
    int rc = mosquitto_publish(client, NULL, marker_topic, length, token, 0, 0);
    if (rc != MOSQ_ERR_SUCCESS) fail("marker", rc);
}

static char **pending_unsubscribe;
static int pending_count;

/* Opens a read: subscribes `filters` (after unsubscribing the reads ended before) and sends its end marker. */
static void open_window(char **filters, int count) {
    if (pending_count > 0) {
        mosquitto_unsubscribe_multiple(client, NULL, pending_count, pending_unsubscribe, NULL);
        for (int i = 0; i < pending_count; i++) free(pending_unsubscribe[i]);
        free(pending_unsubscribe);
        pending_unsubscribe = NULL;
        pending_count = 0;
    }
    struct window *window = &open_windows[open_count++];
    *window = (struct window){.number = ++window_number, .ended_with = -1, .count = count};
    window->filters = malloc((size_t)count * sizeof *window->filters);
    for (int i = 0; i < count; i++) window->filters[i] = strdup(filters[i]);
    int rc = mosquitto_subscribe_multiple(client, &window->subscribe_mid, count, filters, 0, 0, NULL);
    if (rc != MOSQ_ERR_SUCCESS) fail("subscribe", rc);
    send_marker(window);
    last_packet = now_ns();
}

/* Drives the connection until the oldest read ended (another marker when nothing comes); closes it and returns
 * whether nothing can have been dropped in it. With `chain`, returns -1 as soon as the oldest read's SUBACK came and
 * no other read is open: the next read may start. */
static int drive_window(int chain) {
    struct window *oldest = &open_windows[0];
    while (oldest->ended_with < 0) {
        if (chain && open_count == 1 && oldest->subscribed) return -1;
        drive(20);
        struct window *newest = &open_windows[open_count - 1];
        uint64_t idle = now_ns() - last_packet;
        if (idle > 10000000000ull) fail("no answer within 10 s", MOSQ_ERR_TIMEOUT);
        if (idle > (newest->packets + UNCOUNTED >= queue_limit ? 200000000ull : 1000000000ull)) {
            send_marker(newest);
            last_packet = now_ns();
        }
    }
    int complete = oldest->ended_with == 0 && oldest->packets + UNCOUNTED < queue_limit;
    pending_unsubscribe = realloc(pending_unsubscribe, (size_t)(pending_count + oldest->count) * sizeof(char *));
    memcpy(pending_unsubscribe + pending_count, oldest->filters, (size_t)oldest->count * sizeof(char *));
    pending_count += oldest->count;
    free(oldest->filters);
    open_windows[0] = open_windows[1];
    open_count--;
    return complete;
}

/* One read alone. */
static int read_window(char **filters, int count) {
    open_window(filters, count);
    return drive_window(0);
}

static int by_level(const void *a, const void *b) {
    return strcmp(((const struct host *)a)->level, ((const struct host *)b)->level);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: fleet_baseline PORT [--prefix P] [--broker-queue L] [--host NAME]\n");
        return 64;
    }
    int port = atoi(argv[1]);
    const char *named = NULL;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--prefix")) prefix = argv[i + 1];
        else if (!strcmp(argv[i], "--broker-queue")) queue_limit = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--host")) named = argv[i + 1];
        else { fprintf(stderr, "fleet_baseline: unknown option %s\n", argv[i]); return 64; }
    }
    prefix_length = strlen(prefix);
    uint64_t started = now_ns();
    mosquitto_lib_init();
    char id[64];
    snprintf(id, sizeof id, "fleet-baseline-%d", (int)getpid());
    snprintf(nonce, sizeof nonce, "%x", (unsigned)started);
    snprintf(marker_topic, sizeof marker_topic, "%s/$readers/%s", prefix, id);
    client = mosquitto_new(id, true, NULL);
    mosquitto_int_option(client, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V5);
    mosquitto_message_callback_set(client, on_message);
    mosquitto_subscribe_callback_set(client, on_packet);
    mosquitto_unsubscribe_callback_set(client, on_unsubscribe);
    int rc = mosquitto_connect(client, "127.0.0.1", port, 30);
    if (rc != MOSQ_ERR_SUCCESS) fail("connect", rc);
    mosquitto_subscribe(client, NULL, marker_topic, 0);
    mosquitto_publish(client, NULL, marker_topic, 5, "probe", 1, 0);
    while (!probe_done) drive(100);

    int budget = (queue_limit - UNCOUNTED) * 9 / 20, windows = 0;
    char filter[512];
    if (named) {
        add_host(named, strlen(named), -1);
    } else {
        char *statuses = filter;
        snprintf(filter, sizeof filter, "%s/+/status", prefix);
        in_statuses = 1;
        int complete = read_window(&statuses, 1);
        in_statuses = 0;
        windows++;
        if (!complete) {
            /* The host index, in windows of buckets sized as HostIndexPlan sizes them. */
            long seen = messages, read_buckets = 0, entries_before = 0;
            in_index = 1;
            for (int first = 0; first < 256;) {
                double per_bucket = read_buckets == 0 ? (double)(seen > 0 ? seen : 1) / 256 * 1.5
                                                      : (double)entries_before / (double)read_buckets * 1.25 + 1;
                int count = (int)(budget / (per_bucket > 1 ? per_bucket : 1));
                if (count < 1) count = 1;
                if (first + count > 256) count = 256 - first;
                char *filters[256];
                for (int b = 0; b < count; b++) {
                    filters[b] = malloc(64);
                    snprintf(filters[b], 64, "%s/$hosts/%02x/+", prefix, first + b);
                }
                long before = messages;
                read_window(filters, count); /* (the bench's fleets fit; a split is not replayed here) */
                entries_before += messages - before;
                read_buckets += count;
                for (int b = 0; b < count; b++) free(filters[b]);
                first += count;
                windows++;
            }
            in_index = 0;
        }
        qsort(hosts, host_count, sizeof *hosts, by_level);
        size_t unique = 0;
        for (size_t i = 0; i < host_count; i++) {
            if (unique > 0 && !strcmp(hosts[unique - 1].level, hosts[i].level)) {
                if (hosts[i].count >= 0) hosts[unique - 1].count = hosts[i].count;
                continue;
            }
            hosts[unique++] = hosts[i];
        }
        host_count = unique;
    }
    long known = 0, known_topics = 0;
    for (size_t i = 0; i < host_count; i++)
        if (hosts[i].count >= 0) known++, known_topics += hosts[i].count;
    int estimate = known == 0 ? 16 : (int)((known_topics + known - 1) / known);
    /* Windows of whole hosts; the next one starts once the oldest one's SUBACK came (accmon's `list` does). */
    char **filters = malloc(3 * (host_count + 1) * sizeof *filters);
    for (size_t next = 0; next < host_count || open_count > 0;) {
        if (next < host_count && open_count < 2) {
            int count = 0, total = 0;
            do {
                int size = 1 + (hosts[next].count >= 0 ? hosts[next].count : estimate);
                if (count > 0 && total + size > budget) break;
                total += size;
                const char *families[] = {"status", "accessories/+/+", "claims/+/+"};
                for (int f = 0; f < 3; f++) {
                    filters[3 * count + f] = malloc(strlen(hosts[next].level) + prefix_length + 32);
                    sprintf(filters[3 * count + f], "%s/%s/%s", prefix, hosts[next].level, families[f]);
                }
                count++, next++;
            } while (next < host_count);
            open_window(filters, 3 * count);
            for (int i = 0; i < 3 * count; i++) free(filters[i]);
            windows++;
        }
        drive_window(next < host_count);
    }
    mosquitto_disconnect(client);
    printf("{\"seconds\":%.4f,\"windows\":%d,\"messages\":%ld,\"hosts\":%zu,\"accessories\":%ld}\n",
           (now_ns() - started) / 1e9, windows, messages, host_count, accessories);
    return 0;
}
