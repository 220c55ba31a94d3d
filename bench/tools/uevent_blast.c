/* uevent_blast: a cheap sender of libudev-format "udev" monitor messages for umockdev testbeds.
 *
 * umockdev emulates each process's udev netlink socket with an AF_UNIX datagram socket bound at
 * $UMOCKDEV_DIR/event<fd>; its own sender (Testbed.uevent) looks each device up in the testbed and opens a
 * socket per message, ~120-150 us a message. This program connects once to each listener and sends prebuilt
 * messages: a "libudev" header (magic 0xfeedcafe in network order, subsystem/devtype MurmurHash2 hashes for the
 * listeners' socket filters) and a NUL-separated property block like the one udevd sends for a USB device with
 * accmon's udev rules installed (ACCMON_REMOVABLE, ACCMON_KIND and the accmon tag: what udev_rules.py shows them set).
 *
 * Event i of the stream (i counted from --first): device (i / 2) % K of the --devices list; "add" when i is even,
 * "remove" when odd; ID_SERIAL_SHORT is "B" + the index of the pair's add, zero-padded to 9 digits, and SEQNUM is
 * i + 1. A receiver that forwards the serial (accmond does) or the devpath and action (udevadm monitor) can thus be
 * matched to the send index; the send times stay here (--times), one column per listener.
 *
 * Usage: uevent_blast --devices FILE --count N [--first I] [--interval-us U] [--times FILE] [--sndbuf BYTES]
 *                     [--socket PATH]...
 *   --devices FILE   lines "DEVPATH DEVNAME" (DEVPATH without /sys, such as /devices/.../usb1/1-3)
 *   --socket PATH    a listener's socket (repeatable); default: every $UMOCKDEV_DIR/event[0-9]*
 *   --interval-us U  pace: event i is sent at start + i*U (absolute deadlines); 0 = back to back
 *   --times FILE     write "index t_listener1 t_listener2 ..." (CLOCK_MONOTONIC ns just before each send)
 * The listeners are sent each event in turn, in reversed order for odd events, so neither is favoured.
 * Prints one JSON line: events, listeners, seconds, send errors.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <glob.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include "bench_common.h"

#define MAX_LISTENERS 16
#define MAX_DEVICES 4096

struct header { /* the layout libudev's monitor expects; integers in network order where noted */
    char prefix[8];           /* "libudev\0" */
    uint32_t magic;           /* htonl(0xfeedcafe) */
    uint32_t header_size;     /* sizeof(struct header) */
    uint32_t properties_off;  /* where the property block starts */
    uint32_t properties_len;
    uint32_t subsystem_hash;  /* htonl(murmur2(subsystem)) */
    uint32_t devtype_hash;    /* htonl(murmur2(devtype)) */
    uint32_t tag_bloom_hi;    /* left 0: tag filters are not used */
    uint32_t tag_bloom_lo;
};

/* MurmurHash2, 32-bit, seed 0: the hash libudev puts in the header for its in-kernel filters. */
static uint32_t murmur2(const char *text) {
    const uint32_t m = 0x5bd1e995u;
    size_t length = strlen(text);
    uint32_t h = (uint32_t)length;
    const unsigned char *p = (const unsigned char *)text;
    while (length >= 4) {
        uint32_t k;
        memcpy(&k, p, 4);
        k *= m;
        k ^= k >> 24;
        k *= m;
        h = (h * m) ^ k;
        p += 4;
        length -= 4;
    }
    switch (length) {
    case 3: h ^= (uint32_t)p[2] << 16; /* fall through */
    case 2: h ^= (uint32_t)p[1] << 8;  /* fall through */
    case 1: h ^= p[0]; h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return h;
}

static size_t put(char *block, size_t used, size_t size, const char *key, const char *value) {
    int n = snprintf(block + used, size - used, "%s=%s", key, value);
    if (n < 0 || (size_t)n + 1 > size - used) { fprintf(stderr, "uevent_blast: property block too small\n"); exit(2); }
    return used + (size_t)n + 1; /* keep the NUL: it separates the properties */
}

int main(int argc, char **argv) {
    const char *devices_file = NULL, *times_file = NULL;
    const char *socket_paths[MAX_LISTENERS];
    int listeners = 0;
    long count = 0, first = 0, interval_us = 0, sndbuf = 512L << 20;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) { fprintf(stderr, "uevent_blast: %s needs a value\n", a); return 2; }
        if (!strcmp(a, "--devices")) devices_file = v;
        else if (!strcmp(a, "--count")) count = atol(v);
        else if (!strcmp(a, "--first")) first = atol(v);
        else if (!strcmp(a, "--interval-us")) interval_us = atol(v);
        else if (!strcmp(a, "--times")) times_file = v;
        else if (!strcmp(a, "--sndbuf")) sndbuf = atol(v);
        else if (!strcmp(a, "--socket")) { if (listeners < MAX_LISTENERS) socket_paths[listeners++] = v; }
        else { fprintf(stderr, "uevent_blast: unknown option %s\n", a); return 2; }
        i++;
    }
    if (!devices_file || count <= 0) { fprintf(stderr, "usage: see the comment at the top of uevent_blast.c\n"); return 2; }

    static char devpaths[MAX_DEVICES][256], devnames[MAX_DEVICES][64];
    int devices = 0;
    FILE *list = fopen(devices_file, "r");
    if (!list) die(devices_file);
    while (devices < MAX_DEVICES && fscanf(list, "%255s %63s", devpaths[devices], devnames[devices]) == 2) devices++;
    fclose(list);
    if (devices == 0) { fprintf(stderr, "uevent_blast: no devices in %s\n", devices_file); return 2; }

    glob_t found = {0};
    if (listeners == 0) {
        const char *root = getenv("UMOCKDEV_DIR");
        if (!root) { fprintf(stderr, "uevent_blast: no --socket and no UMOCKDEV_DIR\n"); return 2; }
        char pattern[4096];
        snprintf(pattern, sizeof pattern, "%s/event[0-9]*", root);
        if (glob(pattern, 0, NULL, &found) == 0)
            for (size_t i = 0; i < found.gl_pathc && listeners < MAX_LISTENERS; i++) socket_paths[listeners++] = found.gl_pathv[i];
    }
    if (listeners == 0) { fprintf(stderr, "uevent_blast: no listener sockets\n"); return 2; }

    int fds[MAX_LISTENERS];
    for (int l = 0; l < listeners; l++) {
        struct sockaddr_un address = {.sun_family = AF_UNIX};
        strncpy(address.sun_path, socket_paths[l], sizeof address.sun_path - 1);
        fds[l] = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fds[l] < 0) die("socket");
        /* Queued datagrams are charged to the sender's buffer: make it large enough for a whole burst. */
        int size = (int)(sndbuf > 0x3fffffff ? 0x3fffffff : sndbuf);
        if (setsockopt(fds[l], SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof size) < 0)
            setsockopt(fds[l], SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
        if (connect(fds[l], (struct sockaddr *)&address, sizeof address) < 0) die(socket_paths[l]);
    }

    uint64_t *times = times_file ? calloc((size_t)count * (size_t)listeners, sizeof(uint64_t)) : NULL;
    struct header header;
    memset(&header, 0, sizeof header);
    memcpy(header.prefix, "libudev", 8);
    header.magic = htonl(0xfeedcafeu);
    header.header_size = sizeof header;
    header.properties_off = sizeof header;
    header.subsystem_hash = htonl(murmur2("usb"));
    header.devtype_hash = htonl(murmur2("usb_device"));

    char block[2048];
    long errors = 0;
    uint64_t start = now_ns();
    for (long n = 0; n < count; n++) {
        long index = first + n;
        int device = (int)((index / 2) % devices);
        const char *action = index % 2 == 0 ? "add" : "remove";
        char serial[32], seqnum[32], number[16], minor[16], product[32], model_id[8], id_serial[64], path_tag[128];
        snprintf(serial, sizeof serial, "B%09ld", index - index % 2);
        snprintf(seqnum, sizeof seqnum, "%ld", index + 1);
        snprintf(number, sizeof number, "%03d", device % 125 + 2);
        snprintf(minor, sizeof minor, "%d", device % 125 + 1);
        snprintf(model_id, sizeof model_id, "%04x", 0xa000 + device);
        snprintf(product, sizeof product, "1209/%x/100", 0xa000 + device);
        snprintf(id_serial, sizeof id_serial, "accmon_Bench_Device_%s", serial);
        const char *port = strrchr(devpaths[device], '/');
        port = port ? port + 1 : devpaths[device];
        snprintf(path_tag, sizeof path_tag, "pci-0000_00_14_0-usb-0_%s", strchr(port, '-') ? strchr(port, '-') + 1 : port);
        size_t used = 0;
        used = put(block, used, sizeof block, "ACTION", action);
        used = put(block, used, sizeof block, "DEVPATH", devpaths[device]);
        used = put(block, used, sizeof block, "SUBSYSTEM", "usb");
        used = put(block, used, sizeof block, "DEVNAME", devnames[device]);
        used = put(block, used, sizeof block, "DEVTYPE", "usb_device");
        used = put(block, used, sizeof block, "DRIVER", "usb");
        used = put(block, used, sizeof block, "PRODUCT", product);
        used = put(block, used, sizeof block, "TYPE", "0/0/0");
        used = put(block, used, sizeof block, "BUSNUM", "001");
        used = put(block, used, sizeof block, "DEVNUM", number);
        used = put(block, used, sizeof block, "SEQNUM", seqnum);
        used = put(block, used, sizeof block, "USEC_INITIALIZED", "31415926");
        used = put(block, used, sizeof block, "ID_BUS", "usb");
        used = put(block, used, sizeof block, "ID_MODEL", "Bench_Device");
        used = put(block, used, sizeof block, "ID_MODEL_ENC", "Bench\\x20Device");
        used = put(block, used, sizeof block, "ID_MODEL_ID", model_id);
        used = put(block, used, sizeof block, "ID_SERIAL", id_serial);
        used = put(block, used, sizeof block, "ID_SERIAL_SHORT", serial);
        used = put(block, used, sizeof block, "ID_VENDOR", "accmon");
        used = put(block, used, sizeof block, "ID_VENDOR_ENC", "accmon");
        used = put(block, used, sizeof block, "ID_VENDOR_ID", "1209");
        used = put(block, used, sizeof block, "ID_REVISION", "0100");
        used = put(block, used, sizeof block, "ID_USB_INTERFACES", ":ff0000:");
        used = put(block, used, sizeof block, "ID_VENDOR_FROM_DATABASE", "Generic");
        used = put(block, used, sizeof block, "ID_PATH", path_tag);
        used = put(block, used, sizeof block, "ID_PATH_TAG", path_tag);
        used = put(block, used, sizeof block, "ID_FOR_SEAT", "usb-bench");
        used = put(block, used, sizeof block, "MAJOR", "189");
        used = put(block, used, sizeof block, "MINOR", minor);
        used = put(block, used, sizeof block, "ACCMON_REMOVABLE", "removable");
        used = put(block, used, sizeof block, "ACCMON_KIND", "usb");
        used = put(block, used, sizeof block, "TAGS", ":seat:accmon:");
        used = put(block, used, sizeof block, "CURRENT_TAGS", ":seat:accmon:");
        header.properties_len = (uint32_t)used;
        struct iovec parts[2] = {{&header, sizeof header}, {block, used}};
        struct msghdr message = {.msg_iov = parts, .msg_iovlen = 2};

        if (interval_us > 0) {
            uint64_t due = start + (uint64_t)n * (uint64_t)interval_us * 1000ull;
            struct timespec deadline = {.tv_sec = (time_t)(due / 1000000000ull), .tv_nsec = (long)(due % 1000000000ull)};
            while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, NULL) == EINTR) {}
        }
        for (int k = 0; k < listeners; k++) {
            int l = index % 2 == 0 ? k : listeners - 1 - k;
            if (times) times[(size_t)n * (size_t)listeners + (size_t)l] = now_ns();
            while (sendmsg(fds[l], &message, MSG_NOSIGNAL) < 0) {
                if (errno == EINTR) continue;
                errors++;
                break;
            }
        }
    }
    double seconds = (double)(now_ns() - start) / 1e9;
    if (times) {
        FILE *out = fopen(times_file, "w");
        if (!out) die(times_file);
        for (long n = 0; n < count; n++) {
            fprintf(out, "%ld", first + n);
            for (int l = 0; l < listeners; l++) fprintf(out, " %llu", (unsigned long long)times[(size_t)n * (size_t)listeners + (size_t)l]);
            fputc('\n', out);
        }
        fclose(out);
    }
    printf("{\"tool\":\"uevent_blast\",\"events\":%ld,\"listeners\":%d,\"seconds\":%.6f,\"send_errors\":%ld,\"message_bytes\":%zu}\n",
           count, listeners, seconds, errors, sizeof header + (size_t)header.properties_len);
    globfree(&found);
    return errors ? 1 : 0;
}
