/* relay: the least a broker between udev and an app can do, as a latency baseline with accmond's number of hops.
 *
 *   relay serve SOCKET   follows libudev's monitor ("udev" netlink group, subsystem usb) and, for each usb_device
 *                        add or remove, sends one line "connect|disconnect B<ID_SERIAL_SHORT> <devpath>" to every
 *                        client connected to the Unix stream socket SOCKET. No sysfs reads, no manifest, no JSON.
 *   relay watch SOCKET   connects to SOCKET and copies what arrives to standard output, one write per read.
 *
 * So an event goes uevent -> relay -> watcher -> stamp, the hops of uevent -> accmond -> accmon watch -> stamp,
 * where `udevadm monitor` has uevent -> udevadm -> stamp. The bench runs it in a latency phase of its own. */
#include <errno.h>
#include <libudev.h>
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

static int serve(const char *path) {
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
                char line[512];
                int length = snprintf(line, sizeof line, "%s %s %s\n", plugged ? "connect" : "disconnect", serial,
                                      udev_device_get_devpath(device));
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
    if (argc == 3 && strcmp(argv[1], "serve") == 0) return serve(argv[2]);
    if (argc == 3 && strcmp(argv[1], "watch") == 0) return watch(argv[2]);
    fprintf(stderr, "usage: relay serve|watch SOCKET\n");
    return 2;
}
