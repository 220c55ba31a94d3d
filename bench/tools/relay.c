/* relay: the least a broker between udev and an app can do, as a latency baseline with accmond's number of hops.
 *
 *   relay serve SOCKET   follows libudev's monitor ("udev" netlink group, subsystem usb) and, for each usb_device
 *                        add or remove, sends one line "connect|disconnect B<ID_SERIAL_SHORT> <devpath>" to every
 *                        client connected to the Unix stream socket SOCKET. No sysfs reads, no manifest, no JSON.
 *   relay watch SOCKET   connects to SOCKET and copies what arrives to standard output, one write per read.
 *
 *   relay serve SOCKET --descriptors
 *                        the same, and for each add first reads the device's sysfs `descriptors` (openat of its path,
 *                        pread, close, as accmond reads it) and appends their SHA-256 (libcrypto's SHA256_Init/Update/
 *                        Final, as accmond hashes them) to the line: the least an add costs a broker that announces
 *                        the descriptors' hash, as accmond does, and what it adds to the add path's latency.
 *
 * So an event goes uevent -> relay -> watcher -> stamp, the hops of uevent -> accmond -> accmon watch -> stamp,
 * where `udevadm monitor` has uevent -> udevadm -> stamp. The bench runs it in a latency phase of its own. */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <errno.h>
#include <fcntl.h>
#include <libudev.h>
#include <openssl/sha.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define MAX_CLIENTS 16

static int unix_socket(const char *path, int listening) {
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof address.sun_path) {
        fprintf(stderr, "relay: socket path too long\n");
        exit(2);
    }
    strcpy(address.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int failed = listening ? (unlink(path), bind(fd, (struct sockaddr *)&address, sizeof address) || listen(fd, 8))
                           : connect(fd, (struct sockaddr *)&address, sizeof address);
    if (fd < 0 || failed) {
        fprintf(stderr, "relay: %s: %s\n", path, strerror(errno));
        exit(1);
    }
    return fd;
}

/* The hex SHA-256 of the device's `descriptors` into `hex` (65 bytes); empty when they cannot be read. */
static void descriptors_hash(const char *devpath, char *hex) {
    char path[1024];
    unsigned char bytes[4096], digest[SHA256_DIGEST_LENGTH];
    hex[0] = 0;
    if (snprintf(path, sizeof path, "/sys%s/descriptors", devpath) >= (int)sizeof path) return;
    int fd = openat(AT_FDCWD, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return;
    ssize_t count = pread(fd, bytes, sizeof bytes, 0);
    close(fd);
    if (count <= 0) return;
    SHA256_CTX context;
    if (!SHA256_Init(&context) || !SHA256_Update(&context, bytes, (size_t)count) || !SHA256_Final(digest, &context))
        return;
    for (int i = 0; i < SHA256_DIGEST_LENGTH; i++) sprintf(hex + 2 * i, "%02x", digest[i]);
}

static int serve(const char *path, int read_descriptors) {
    struct udev *udev = udev_new();
    struct udev_monitor *monitor = udev ? udev_monitor_new_from_netlink(udev, "udev") : NULL;
    if (!monitor || udev_monitor_filter_add_match_subsystem_devtype(monitor, "usb", "usb_device") < 0 ||
        udev_monitor_enable_receiving(monitor) < 0) {
        fprintf(stderr, "relay: cannot open the udev monitor\n");
        return 1;
    }
    int listener = unix_socket(path, 1);
    int clients[MAX_CLIENTS], count = 0;
    struct pollfd watched[2] = {{.fd = udev_monitor_get_fd(monitor), .events = POLLIN}, {.fd = listener, .events = POLLIN}};
    for (;;) {
        if (poll(watched, 2, -1) < 0 && errno != EINTR) return 1;
        if (watched[1].revents & POLLIN) {
            int client = accept(listener, NULL, NULL);
            if (client >= 0 && count < MAX_CLIENTS) {
                clients[count++] = client;
                (void)send(client, "subscribed\n", 11, MSG_NOSIGNAL); /* the bench waits for a first line */
            }
        }
        struct udev_device *device;
        while ((watched[0].revents & POLLIN) && (device = udev_monitor_receive_device(monitor)) != NULL) {
            const char *action = udev_device_get_action(device);
            const char *serial = udev_device_get_property_value(device, "ID_SERIAL_SHORT");
            int plugged = action && strcmp(action, "add") == 0, unplugged = action && strcmp(action, "remove") == 0;
            if ((plugged || unplugged) && serial) {
                char line[512], hash[2 * SHA256_DIGEST_LENGTH + 1] = "";
                if (plugged && read_descriptors) descriptors_hash(udev_device_get_devpath(device), hash);
                int length = snprintf(line, sizeof line, "%s %s %s%s%s\n", plugged ? "connect" : "disconnect", serial,
                                      udev_device_get_devpath(device), hash[0] ? " " : "", hash);
                for (int i = 0; i < count; i++) (void)send(clients[i], line, (size_t)length, MSG_NOSIGNAL | MSG_DONTWAIT);
            }
            udev_device_unref(device);
        }
    }
}

static int watch(const char *path) {
    int fd = unix_socket(path, 0);
    char buffer[1 << 16];
    ssize_t n;
    while ((n = read(fd, buffer, sizeof buffer)) > 0) {
        if (write(1, buffer, (size_t)n) != n) return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "serve") == 0) return serve(argv[2], 0);
    if (argc == 4 && strcmp(argv[1], "serve") == 0 && strcmp(argv[3], "--descriptors") == 0) return serve(argv[2], 1);
    if (argc == 3 && strcmp(argv[1], "watch") == 0) return watch(argv[2]);
    fprintf(stderr, "usage: relay serve SOCKET [--descriptors] | relay watch SOCKET\n");
    return 2;
}
