/* mqtt_pairs: the MQTT bridge's floor, the same hops with no work: events published to a broker as accmon-mqtt
 * publishes them, two QoS 1 messages per event (the accessory's retained topic, then a line on the events topic),
 * through libmosquitto with MQTT 5 and TCP_NODELAY, as the bridge's client is set up.
 *
 *   mqtt_pairs PORT COUNT [--prefix P] [--payload BYTES]
 *
 * Event i publishes `P/accessories/<i % 1000>` (retained; every other event an empty payload, which deletes it, as a
 * disconnect does) and `P/events` ("<i> " and BYTES of filler). Everything is handed to libmosquitto at once, which
 * keeps its default in-flight window and queues the rest, and the loop runs until every PUBACK is back. Prints one
 * JSON line {"events":N,"messages":M,"seconds":S}; a subscriber of P/events measures the rate as it reads.
 */
#define _GNU_SOURCE
#include <mosquitto.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long acknowledged;

static void on_publish(struct mosquitto *client, void *context, int mid) {
    (void)client, (void)context, (void)mid;
    acknowledged++;
}

static void fail(const char *what, int rc) {
    fprintf(stderr, "mqtt_pairs: %s: %s\n", what, mosquitto_strerror(rc));
    exit(1);
}

static double now_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: mqtt_pairs PORT COUNT [--prefix P] [--payload BYTES]\n");
        return 64;
    }
    int port = atoi(argv[1]);
    long count = atol(argv[2]);
    const char *prefix = "bench/floor";
    int payload_bytes = 450;
    for (int index = 3; index + 1 < argc; index += 2) {
        if (strcmp(argv[index], "--prefix") == 0) prefix = argv[index + 1];
        else if (strcmp(argv[index], "--payload") == 0) payload_bytes = atoi(argv[index + 1]);
    }
    mosquitto_lib_init();
    struct mosquitto *client = mosquitto_new(NULL, true, NULL);
    if (!client) fail("mosquitto_new", MOSQ_ERR_NOMEM);
    mosquitto_int_option(client, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V5);
    mosquitto_int_option(client, MOSQ_OPT_TCP_NODELAY, 1);
    mosquitto_publish_callback_set(client, on_publish);
    int rc = mosquitto_connect(client, "127.0.0.1", port, 60);
    if (rc != MOSQ_ERR_SUCCESS) fail("connect", rc);

    char *filler = malloc((size_t)payload_bytes + 1);
    memset(filler, 'x', (size_t)payload_bytes);
    filler[payload_bytes] = 0;
    char topic[256], payload[64 + 4096];
    double started = now_seconds();
    for (long index = 0; index < count; index++) {
        snprintf(topic, sizeof topic, "%s/accessories/%ld", prefix, index % 1000);
        int length = index % 2 == 0 ? payload_bytes : 0;
        rc = mosquitto_publish_v5(client, NULL, topic, length, filler, 1, true, NULL);
        if (rc != MOSQ_ERR_SUCCESS) fail("publish", rc);
        snprintf(topic, sizeof topic, "%s/events", prefix);
        length = snprintf(payload, sizeof payload, "%ld %.*s", index, payload_bytes > 4000 ? 4000 : payload_bytes,
                          filler);
        rc = mosquitto_publish_v5(client, NULL, topic, length, payload, 1, false, NULL);
        if (rc != MOSQ_ERR_SUCCESS) fail("publish", rc);
        if (index % 64 == 63) mosquitto_loop(client, 0, 1); /* keep the socket moving while handing over */
    }
    while (acknowledged < 2 * count) {
        rc = mosquitto_loop(client, 1000, 1);
        if (rc != MOSQ_ERR_SUCCESS) fail("loop", rc);
    }
    printf("{\"events\":%ld,\"messages\":%ld,\"seconds\":%.6f}\n", count, 2 * count, now_seconds() - started);
    mosquitto_disconnect(client);
    mosquitto_destroy(client);
    mosquitto_lib_cleanup();
    return 0;
}
