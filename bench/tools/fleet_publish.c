/* fleet_publish: the retained state of a synthetic fleet, published straight to a broker in the shape accmon-mqtt
 * publishes (docs/MQTT.md §3), and accessories toggled at a rate afterwards.
 *
 *   fleet_publish PORT HOSTS ACCESSORIES [--prefix P] [--legacy EVERY] [--churn RATE] [--first F]
 *
 * For host i of HOSTS (named lab-00000, lab-00001, ..., from lab-F with --first F: a site's share of a fleet): its status `P/<host>/status` (online, with
 * "retained":{"accessories":ACCESSORIES}), its entry in the host index `P/$hosts/<bucket>/<host>`, and ACCESSORIES
 * accessory topics `P/<host>/accessories/<accessoryID>/<connectionID>` holding a serial accessory object of about
 * 480 bytes as accmond writes it. With --legacy EVERY, every EVERY-th host is published as a bridge older than the
 * host index publishes it: a status without "retained" and no index entry. Everything is retained, QoS 0, then one
 * QoS 1 message whose PUBACK says the broker has handled all of it. Prints one JSON line
 * {"messages":N,"bytes":B,"seconds":S}.
 *
 * With --churn RATE it then toggles accessories until SIGTERM or SIGINT, RATE a second: a random accessory of a
 * random host is deleted (an empty retained message) or published again, its event line goes to `P/<host>/events`,
 * and the host's status is published again with its new count, as the bridge does. Prints {"churned":N} at the end.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <mosquitto.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "bench_common.h"

static struct mosquitto *client;
static const char *prefix = "accmon";
static int hosts, accessories, legacy_every, first;
static unsigned char *present; /* hosts * accessories flags: the accessory is connected */
static int barrier_mid = -1, barrier_done;
static volatile sig_atomic_t stopping;
static uint64_t sequence;

static void fail(const char *what, int rc) {
    fprintf(stderr, "fleet_publish: %s: %s\n", what, mosquitto_strerror(rc));
    exit(1);
}

/* The host index's bucket of a host level: FNV-1a (32 bits) of its bytes, the low 8 bits as two hex digits
 * (Sources/AccmonMQTT/HostIndex.swift). */
static unsigned bucket(const char *level) {
    uint32_t hash = 2166136261u;
    for (const unsigned char *p = (const unsigned char *)level; *p; p++) hash = (hash ^ *p) * 16777619u;
    return hash & 0xff;
}

static int is_legacy(int host) { return legacy_every > 0 && host % legacy_every == legacy_every - 1; }

static int count_present(int host) {
    int count = 0;
    for (int a = 0; a < accessories; a++) count += present[(size_t)host * accessories + a];
    return count;
}

static void drive(int timeout_ms) {
    struct pollfd wait = {.fd = mosquitto_socket(client), .events = POLLIN};
    if (mosquitto_want_write(client)) wait.events |= POLLOUT;
    if (poll(&wait, 1, timeout_ms) < 0 && errno != EINTR) fail("poll", MOSQ_ERR_ERRNO);
    int rc = MOSQ_ERR_SUCCESS;
    if (wait.revents & (POLLIN | POLLHUP | POLLERR)) rc = mosquitto_loop_read(client, 1);
    if (rc == MOSQ_ERR_SUCCESS && (wait.revents & POLLOUT)) rc = mosquitto_loop_write(client, 1);
    if (rc == MOSQ_ERR_SUCCESS) rc = mosquitto_loop_misc(client);
    if (rc != MOSQ_ERR_SUCCESS) fail("connection", rc);
}

static size_t publish(const char *topic, const char *payload, int retained) {
    int rc = mosquitto_publish(client, NULL, topic, (int)strlen(payload), payload, 0, retained);
    if (rc != MOSQ_ERR_SUCCESS) fail(topic, rc);
    return strlen(topic) + strlen(payload);
}

static void accessory_topic(char *out, size_t size, int host, int a) {
    snprintf(out, size, "%s/lab-%05d/accessories/serial:1209:%04x:serial=S%05d-%03d:if=00/%d", prefix, first + host,
             a + 1, first + host, a, a + 1);
}

static void accessory_object(char *out, size_t size, int host, int a) {
    snprintf(out, size,
             "{\"accessoryID\":\"serial:1209:%04x:serial=S%05d-%03d:if=00\",\"connectionID\":%d,"
             "\"descriptorsSHA256\":\"%08x%056d\",\"deviceNodes\":[\"/dev/ttyUSB%d\"],\"firmwareRevision\":\"1.00\","
             "\"hardwareRevision\":\"\",\"interfaceNumber\":\"00\",\"kind\":\"serial\",\"manufacturer\":\"pid.codes\","
             "\"modelNumber\":\"\",\"name\":\"Bench serial %d\",\"portPath\":\"1-1.%d\",\"productID\":\"%04x\","
             "\"protocolStrings\":[],\"serialNumber\":\"S%05d-%03d\",\"sysfsPath\":\"/sys/devices/pci0000:00/"
             "0000:00:14.0/usb1/1-1/1-1.%d/1-1.%d:1.0/ttyUSB%d/tty/ttyUSB%d\",\"vendorID\":\"1209\"}",
             a + 1, first + host, a, a + 1, (first + host) * 1000 + a, 0, a, a, a + 1, a + 1, first + host, a, a + 1,
             a + 1, a, a);
}

static size_t publish_status(int host) {
    char topic[256], payload[512], retained[64] = "";
    if (!is_legacy(host)) snprintf(retained, sizeof retained, "\"retained\":{\"accessories\":%d},", count_present(host));
    snprintf(topic, sizeof topic, "%s/lab-%05d/status", prefix, first + host);
    snprintf(payload, sizeof payload,
             "{\"bridge\":\"0.1.0\",\"host\":\"lab-%05d\",\"machineID\":\"%032x\",%s\"runID\":\"%032x\","
             "\"since\":1796144465.26,\"state\":\"online\"}",
             first + host, first + host + 1, retained, first + host + 7);
    return publish(topic, payload, 1);
}

static size_t publish_host(int host) {
    char topic[512], payload[1024], level[32];
    size_t bytes = publish_status(host);
    snprintf(level, sizeof level, "lab-%05d", first + host);
    if (!is_legacy(host)) {
        snprintf(topic, sizeof topic, "%s/$hosts/%02x/%s", prefix, bucket(level), level);
        snprintf(payload, sizeof payload, "{\"host\":\"%s\"}", level);
        bytes += publish(topic, payload, 1);
    }
    for (int a = 0; a < accessories; a++) {
        accessory_topic(topic, sizeof topic, host, a);
        accessory_object(payload, sizeof payload, host, a);
        bytes += publish(topic, payload, 1);
    }
    return bytes;
}

static void on_publish(struct mosquitto *m, void *data, int mid) {
    (void)m, (void)data;
    if (mid == barrier_mid) barrier_done = 1;
}

/* Waits until the broker has handled everything published so far: a QoS 1 message after it is acknowledged. */
static void barrier(void) {
    char topic[256];
    snprintf(topic, sizeof topic, "%s/$bench/barrier", prefix);
    barrier_done = 0;
    int rc = mosquitto_publish(client, &barrier_mid, topic, 1, "x", 1, 0);
    if (rc != MOSQ_ERR_SUCCESS) fail("barrier", rc);
    while (!barrier_done) drive(100);
}

static void toggle(unsigned *seed) {
    int host = (int)(rand_r(seed) % (unsigned)hosts), a = (int)(rand_r(seed) % (unsigned)accessories);
    unsigned char *flag = &present[(size_t)host * accessories + a];
    char topic[512], object[1024], line[1400];
    *flag = !*flag;
    accessory_topic(topic, sizeof topic, host, a);
    accessory_object(object, sizeof object, host, a);
    publish(topic, *flag ? object : "", 1);
    snprintf(line, sizeof line, "{\"accessory\":%s,\"seq\":%llu,\"type\":\"%s\"}", object,
             (unsigned long long)++sequence, *flag ? "connect" : "disconnect");
    snprintf(topic, sizeof topic, "%s/lab-%05d/events", prefix, first + host);
    publish(topic, line, 0);
    publish_status(host);
}

static void on_signal(int signal) { (void)signal, stopping = 1; }

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: fleet_publish PORT HOSTS ACCESSORIES [--prefix P] [--legacy EVERY] [--churn RATE] "
                        "[--first F]\n");
        return 64;
    }
    int port = atoi(argv[1]);
    hosts = atoi(argv[2]);
    accessories = atoi(argv[3]);
    double churn = 0;
    for (int i = 4; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--prefix")) prefix = argv[i + 1];
        else if (!strcmp(argv[i], "--legacy")) legacy_every = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--churn")) churn = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--first")) first = atoi(argv[i + 1]);
        else { fprintf(stderr, "fleet_publish: unknown option %s\n", argv[i]); return 64; }
    }
    present = malloc((size_t)hosts * (size_t)(accessories > 0 ? accessories : 1));
    memset(present, 1, (size_t)hosts * (size_t)(accessories > 0 ? accessories : 1));
    mosquitto_lib_init();
    char id[64];
    snprintf(id, sizeof id, "fleet-publish-%d", (int)getpid());
    client = mosquitto_new(id, true, NULL);
    mosquitto_int_option(client, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V5);
    mosquitto_publish_callback_set(client, on_publish);
    int rc = mosquitto_connect(client, "127.0.0.1", port, 60);
    if (rc != MOSQ_ERR_SUCCESS) fail("connect", rc);

    uint64_t started = now_ns();
    size_t bytes = 0, messages = 0;
    for (int host = 0; host < hosts; host++) {
        bytes += publish_host(host);
        messages += 1 + (size_t)accessories + (is_legacy(host) ? 0 : 1);
        while (mosquitto_want_write(client)) drive(100); /* bounded memory: one host's messages queued at a time */
    }
    barrier();
    printf("{\"messages\":%zu,\"bytes\":%zu,\"seconds\":%.3f}\n", messages, bytes, (now_ns() - started) / 1e9);
    fflush(stdout);
    if (churn <= 0 || hosts == 0 || accessories == 0) return 0;

    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    unsigned seed = 42;
    uint64_t interval = (uint64_t)(1e9 / churn), next = now_ns();
    unsigned long churned = 0;
    while (!stopping) {
        if (now_ns() >= next) {
            toggle(&seed);
            churned++;
            next += interval;
        }
        drive(0);
        if (!mosquitto_want_write(client) && now_ns() < next) {
            uint64_t pause = next - now_ns();
            struct timespec t = {.tv_sec = (time_t)(pause / 1000000000ull), .tv_nsec = (long)(pause % 1000000000ull)};
            nanosleep(&t, NULL);
        }
    }
    barrier();
    printf("{\"churned\":%lu}\n", churned);
    return 0;
}
