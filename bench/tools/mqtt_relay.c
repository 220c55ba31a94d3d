/* mqtt_relay: the MQTT bridge's floor with every hop the bridge has and none of its work. It subscribes to accmond
 * (hello, subscribe to all, as a plain client: no restore id, no acknowledgements) and, for each event line,
 * publishes two QoS 1 messages through libmosquitto (MQTT 5, TCP_NODELAY, its default in-flight window, driven
 * from one poll loop over both sockets), as accmon-mqtt does: the accessory's retained topic (the line itself on connect, an empty payload on disconnect) and
 * the line on the events topic. It does not parse JSON: the type and the connection id are found by scanning for
 * their keys in the canonical form accmond writes (keys sorted: an event line ends with `"type":"connect"}`).
 *
 *   mqtt_relay SOCKET PORT [--prefix P]
 *
 * Topics: `P/accessories/<connectionID>` and `P/events` (P: bench/relay). Prints "ready" on stdout once the
 * snapshot arrived; runs until SIGTERM.
 */
#define _GNU_SOURCE
#include <mosquitto.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static void fail(const char *what, const char *why) {
    fprintf(stderr, "mqtt_relay: %s: %s\n", what, why);
    exit(1);
}

static void send_line(int fd, const char *line) {
    size_t length = strlen(line);
    if (write(fd, line, length) != (ssize_t)length) fail("accmond", "write failed");
}

/* The digits after "connectionID": in line, or -1. */
static long connection_of(const char *line, size_t length) {
    const char *key = memmem(line, length, "\"connectionID\":", 15);
    return key ? strtol(key + 15, NULL, 10) : -1;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: mqtt_relay SOCKET PORT [--prefix P]\n");
        return 64;
    }
    const char *prefix = argc >= 5 && strcmp(argv[3], "--prefix") == 0 ? argv[4] : "bench/relay";
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    strncpy(address.sun_path, argv[1], sizeof address.sun_path - 1);
    if (connect(fd, (struct sockaddr *)&address, sizeof address) != 0) fail("accmond", "cannot connect");

    mosquitto_lib_init();
    struct mosquitto *client = mosquitto_new(NULL, true, NULL);
    if (!client) fail("mosquitto_new", "out of memory");
    mosquitto_int_option(client, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V5);
    mosquitto_int_option(client, MOSQ_OPT_TCP_NODELAY, 1);
    if (mosquitto_connect(client, "127.0.0.1", atoi(argv[2]), 60) != MOSQ_ERR_SUCCESS) fail("broker", "cannot connect");

    send_line(fd, "{\"type\":\"hello\",\"id\":1,\"versions\":[1],\"client\":\"mqtt-relay\"}\n"
                  "{\"type\":\"subscribe\",\"id\":2}\n");
    char events_topic[256], topic[256];
    snprintf(events_topic, sizeof events_topic, "%s/events", prefix);
    size_t capacity = 1 << 20, held = 0;
    char *buffer = malloc(capacity);
    int live = 0;
    for (;;) {
        struct pollfd waits[2] = {{.fd = fd, .events = POLLIN},
                                  {.fd = mosquitto_socket(client),
                                   .events = POLLIN | (mosquitto_want_write(client) ? POLLOUT : 0)}};
        if (poll(waits, 2, 1000) < 0) continue;
        if (waits[1].revents & (POLLIN | POLLHUP | POLLERR)) mosquitto_loop_read(client, 1);
        if (waits[1].revents & POLLOUT) mosquitto_loop_write(client, 1);
        mosquitto_loop_misc(client);
        if (!(waits[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        if (held == capacity) buffer = realloc(buffer, capacity *= 2);
        ssize_t got = read(fd, buffer + held, capacity - held > 65536 ? 65536 : capacity - held);
        if (got <= 0) break;
        held += (size_t)got;
        char *start = buffer, *end;
        while ((end = memchr(start, '\n', held - (size_t)(start - buffer)))) {
            size_t length = (size_t)(end - start);
            if (!live) {
                if (memmem(start, length, "\"type\":\"snapshot\"", 17)) {
                    live = 1;
                    printf("ready\n");
                    fflush(stdout);
                }
            } else {
                /* Keys are sorted: an event line ends with its type. */
                int connect = length > 17 && memcmp(end - 17, "\"type\":\"connect\"}", 17) == 0;
                int disconnect = length > 20 && memcmp(end - 20, "\"type\":\"disconnect\"}", 20) == 0;
                if (connect || disconnect) {
                    snprintf(topic, sizeof topic, "%s/accessories/%ld", prefix, connection_of(start, length));
                    mosquitto_publish_v5(client, NULL, topic, connect ? (int)length : 0, start, 1, true, NULL);
                    mosquitto_publish_v5(client, NULL, events_topic, (int)length, start, 1, false, NULL);
                }
            }
            start = end + 1;
        }
        held -= (size_t)(start - buffer);
        memmove(buffer, start, held);
    }
    return 0;
}
