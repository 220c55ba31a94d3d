/* fanout: the fan-out bench's two ends.
 *
 *   fanout measure SOCKET SUBSCRIBERS EVENTS ROUNDS
 *     Connects SUBSCRIBERS sockets that each say hello and subscribe (the accmon protocol, NDJSON), and one driver
 *     socket that sends `simulate connect` requests (each a new accessory). Then:
 *       ROUNDS single events, one at a time: the time from the request's send until the first and until the last
 *       subscriber has read the event;
 *       EVENTS requests back to back: deliveries per second, SUBSCRIBERS * EVENTS / (last read - first send);
 *     and the server's CPU time per event in each of the two (the server's pid from SO_PEERCRED, the CPU time from
 *     /proc/PID/task/TID/schedstat). Prints one JSON line. The same program measures accmond and the minimal sender
 *     below, in the same way.
 *
 *   fanout serve SOCKET LINE_BYTES
 *     The minimal sender, the physical limit: listens on SOCKET; a connection that sends a line with "subscribe" is
 *     a subscriber (it gets a snapshot line); for every line with "simulate" it gets `ok`, and one LINE_BYTES line
 *     (the size of accmond's event line) is queued for every subscriber. At the end of each epoll turn every
 *     subscriber with queued bytes gets one non-blocking send(2) of all of them; what does not fit waits for EPOLLOUT.
 *     That is what accmond does (encode once, same bytes for all, batched writes), minus everything else.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include "bench_common.h"

static void raise_fd_limit(void) {
    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
        limit.rlim_cur = limit.rlim_max;
        setrlimit(RLIMIT_NOFILE, &limit);
    }
}

static struct sockaddr_un address_of(const char *path) {
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    strncpy(address.sun_path, path, sizeof address.sun_path - 1);
    return address;
}

static void send_all(int fd, const char *data, size_t length) {
    while (length > 0) {
        ssize_t n = send(fd, data, length, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN) { usleep(100); continue; }
            die("send");
        }
        data += n;
        length -= (size_t)n;
    }
}

struct batch_job {
    int fd;
    const char *data;
    size_t length;
};

static void *write_batch(void *argument) {
    struct batch_job *job = argument;
    send_all(job->fd, job->data, job->length);
    return NULL;
}

static int compare_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static double percentile_us(uint64_t *values, int count, double fraction) {
    if (count == 0) return 0;
    qsort(values, (size_t)count, sizeof *values, compare_u64);
    int index = (int)(fraction * count);
    if (index >= count) index = count - 1;
    return (double)values[index] / 1000.0;
}

/* The CPU time (ns) the process `pid` has run, all its threads: the first field of each task's schedstat. */
static uint64_t cpu_ns_of(pid_t pid) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *tasks = opendir(path);
    if (!tasks) die("opendir /proc/PID/task");
    uint64_t total = 0;
    struct dirent *task;
    while ((task = readdir(tasks))) {
        if (task->d_name[0] == '.') continue;
        char stat_path[300];
        snprintf(stat_path, sizeof stat_path, "/proc/%d/task/%s/schedstat", (int)pid, task->d_name);
        FILE *file = fopen(stat_path, "r");
        if (!file) continue; /* the thread ended */
        unsigned long long ns = 0;
        if (fscanf(file, "%llu", &ns) == 1) total += ns;
        fclose(file);
    }
    closedir(tasks);
    return total;
}

/* ---------------------------------------------------------------------------------------------------------------- */
/* measure */

struct subscriber {
    int fd;
    int subscribed;   /* the snapshot line was read */
    long events;      /* lines read after the snapshot */
    size_t line_bytes;/* length of the first event line, newline included */
    size_t current;   /* bytes of the line being read */
    char pending[64]; /* start of the current line before the snapshot, to recognise it */
};

static int measure(const char *path, int count, long events, int rounds) {
    raise_fd_limit();
    struct subscriber *subscribers = calloc((size_t)count, sizeof *subscribers);
    int epoll = epoll_create1(EPOLL_CLOEXEC);
    struct sockaddr_un address = address_of(path);
    const char *hello = "{\"type\":\"hello\",\"id\":1,\"versions\":[1],\"client\":\"fanout\"}\n"
                        "{\"type\":\"subscribe\",\"id\":2}\n";
    for (int i = 0; i < count; i++) {
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) die("socket");
        if (connect(fd, (struct sockaddr *)&address, sizeof address) < 0) die("connect");
        send_all(fd, hello, strlen(hello));
        fcntl(fd, F_SETFL, O_NONBLOCK);
        subscribers[i].fd = fd;
        struct epoll_event interest = {.events = EPOLLIN, .data.u64 = (uint64_t)i};
        if (epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &interest) < 0) die("epoll_ctl");
    }
    int driver = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (connect(driver, (struct sockaddr *)&address, sizeof address) < 0) die("connect driver");
    const char *driver_hello = "{\"type\":\"hello\",\"id\":1,\"versions\":[1],\"client\":\"fanout-driver\"}\n";
    send_all(driver, driver_hello, strlen(driver_hello));
    /* The server's process, whose CPU time each phase measures. */
    struct ucred server;
    socklen_t server_length = sizeof server;
    if (getsockopt(driver, SOL_SOCKET, SO_PEERCRED, &server, &server_length) < 0) die("SO_PEERCRED");
    struct epoll_event driver_interest = {.events = EPOLLIN, .data.u64 = UINT64_MAX};
    epoll_ctl(epoll, EPOLL_CTL_ADD, driver, &driver_interest);

    static char buffer[1 << 16];
    struct epoll_event ready[512];
    int subscribed = 0;
    long target = 0;        /* events every subscriber must have */
    int complete = 0;       /* subscribers with `target` events */
    uint64_t first_read = 0, last_read = 0;
    /* Reads whatever is ready; updates counts; returns when `until` says so (or after a timeout). */
#define PUMP(condition, timeout_seconds)                                                                           \
    do {                                                                                                           \
        uint64_t give_up = now_ns() + (uint64_t)(timeout_seconds) * 1000000000ull;                                 \
        while (!(condition)) {                                                                                     \
            if (now_ns() > give_up) { fprintf(stderr, "fanout: timed out\n"); exit(3); }                           \
            int n = epoll_wait(epoll, ready, 512, 100);                                                            \
            uint64_t at = now_ns();                                                                                \
            for (int r = 0; r < n; r++) {                                                                          \
                uint64_t token = ready[r].data.u64;                                                                \
                if (token == UINT64_MAX) {                                                                         \
                    (void)!read(driver, buffer, sizeof buffer);                                                    \
                    continue;                                                                                      \
                }                                                                                                  \
                struct subscriber *s = &subscribers[token];                                                        \
                for (;;) {                                                                                         \
                    ssize_t got = read(s->fd, buffer, sizeof buffer);                                              \
                    if (got <= 0) {                                                                                \
                        if (got == 0) { fprintf(stderr, "fanout: subscriber %d closed\n", (int)token); exit(3); }  \
                        break;                                                                                     \
                    }                                                                                              \
                    long before = s->events;                                                                       \
                    for (ssize_t k = 0; k < got; k++) {                                                            \
                        if (!s->subscribed && s->current < sizeof s->pending) s->pending[s->current] = buffer[k];  \
                        s->current++;                                                                              \
                        if (buffer[k] != '\n') continue;                                                           \
                        if (!s->subscribed) {                                                                      \
                            if (memmem(s->pending, s->current < sizeof s->pending ? s->current : sizeof s->pending, \
                                       "snapshot", 8)) {                                                           \
                                s->subscribed = 1;                                                                 \
                                subscribed++;                                                                      \
                            }                                                                                      \
                        } else {                                                                                   \
                            if (!s->line_bytes) s->line_bytes = s->current;                                        \
                            s->events++;                                                                           \
                        }                                                                                          \
                        s->current = 0;                                                                            \
                    }                                                                                              \
                    if (s->events > before) {                                                                      \
                        if (!first_read) first_read = at;                                                          \
                        if (before < target && s->events >= target) { complete++; last_read = at; }                \
                    }                                                                                              \
                }                                                                                                  \
            }                                                                                                      \
        }                                                                                                          \
    } while (0)

    PUMP(subscribed == count, 60);
    char request[512];
    long sent = 0;
    uint64_t *firsts = calloc((size_t)rounds + 1, sizeof(uint64_t)), *lasts = calloc((size_t)rounds + 1, sizeof(uint64_t));
    uint64_t cpu_before_rounds = cpu_ns_of(server.pid);
    for (int round = 0; round < rounds; round++) {
        int length = snprintf(request, sizeof request,
                              "{\"type\":\"simulate\",\"id\":%ld,\"action\":\"connect\",\"accessory\":{\"kind\":\"usb\","
                              "\"vendorID\":\"1209\",\"productID\":\"0001\",\"serialNumber\":\"F%09ld\","
                              "\"name\":\"fanout device\"}}\n", sent + 10, sent);
        target = sent + 1;
        complete = 0;
        first_read = last_read = 0;
        uint64_t start = now_ns();
        send_all(driver, request, (size_t)length);
        sent++;
        PUMP(complete == count, 30);
        firsts[round] = first_read - start;
        lasts[round] = last_read - start;
        usleep(2000);
    }
    uint64_t cpu_rounds = cpu_ns_of(server.pid) - cpu_before_rounds;
    /* Back to back: a thread writes every request (blocking) while this one reads the replies and the events. */
    static char batch[1 << 24];
    size_t used = 0;
    for (long k = 0; k < events && used + 512 < sizeof batch; k++) {
        used += (size_t)snprintf(batch + used, sizeof batch - used,
                                 "{\"type\":\"simulate\",\"id\":%ld,\"action\":\"connect\",\"accessory\":{\"kind\":"
                                 "\"usb\",\"vendorID\":\"1209\",\"productID\":\"0001\",\"serialNumber\":"
                                 "\"F%09ld\",\"name\":\"fanout device\"}}\n", sent + 10, sent);
        sent++;
    }
    target = sent;
    complete = 0;
    first_read = last_read = 0;
    struct batch_job job = {driver, batch, used};
    pthread_t writer;
    uint64_t cpu_before_burst = cpu_ns_of(server.pid);
    uint64_t start = now_ns();
    pthread_create(&writer, NULL, write_batch, &job);
    PUMP(complete == count, 120);
    pthread_join(writer, NULL);
    uint64_t cpu_burst = cpu_ns_of(server.pid) - cpu_before_burst;
    double seconds = (double)(last_read - start) / 1e9;
    double p50_last = percentile_us(lasts, rounds, 0.5), p99_last = percentile_us(lasts, rounds, 0.99);
    double p50_first = percentile_us(firsts, rounds, 0.5);
    printf("{\"subscribers\":%d,\"events\":%ld,\"rounds\":%d,\"deliveries_per_s\":%.0f,\"events_per_s\":%.0f,"
           "\"burst_seconds\":%.4f,\"first_subscriber_p50_us\":%.1f,\"last_subscriber_p50_us\":%.1f,"
           "\"last_subscriber_p99_us\":%.1f,\"event_bytes\":%zu,\"server_cpu_us_per_single_event\":%.1f,"
           "\"server_cpu_us_per_burst_event\":%.2f}\n",
           count, events, rounds, (double)count * (double)events / seconds, (double)events / seconds, seconds,
           p50_first, p50_last, p99_last, subscribers[0].line_bytes, (double)cpu_rounds / 1000.0 / rounds,
           (double)cpu_burst / 1000.0 / (double)events);
    return 0;
}

/* ---------------------------------------------------------------------------------------------------------------- */
/* serve */

struct client {
    int fd;
    int subscriber;
    int writable_wanted;
    char *out;
    size_t out_used, out_size, out_head;
    char in[4096];
    size_t in_used;
};

static void append(struct client *c, const char *data, size_t length) {
    if (c->out_used + length > c->out_size) {
        if (c->out_head > 0) {
            memmove(c->out, c->out + c->out_head, c->out_used - c->out_head);
            c->out_used -= c->out_head;
            c->out_head = 0;
        }
        if (c->out_used + length > c->out_size) {
            c->out_size = (c->out_used + length) * 2;
            c->out = realloc(c->out, c->out_size);
        }
    }
    memcpy(c->out + c->out_used, data, length);
    c->out_used += length;
}

static int serve(const char *path, size_t line_bytes) {
    raise_fd_limit();
    char *line = malloc(line_bytes);
    memset(line, 'x', line_bytes);
    memcpy(line, "{\"type\":\"connect\",\"accessory\":{\"name\":\"", 39);
    line[line_bytes - 3] = '"';
    line[line_bytes - 2] = '}';
    line[line_bytes - 1] = '\n';
    int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    struct sockaddr_un address = address_of(path);
    unlink(path);
    if (bind(listener, (struct sockaddr *)&address, sizeof address) < 0) die("bind");
    if (listen(listener, 128) < 0) die("listen");
    int epoll = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event interest = {.events = EPOLLIN, .data.u64 = UINT64_MAX};
    epoll_ctl(epoll, EPOLL_CTL_ADD, listener, &interest);
    int capacity = 65536;
    struct client **clients = calloc((size_t)capacity, sizeof *clients);
    int *dirty = calloc((size_t)capacity, sizeof *dirty);
    int *subscribers = calloc((size_t)capacity, sizeof *subscribers);
    int subscriber_count = 0;
    int dirty_count = 0;
    char *is_dirty = calloc((size_t)capacity, 1);
    struct epoll_event ready[512];
    static char buffer[1 << 16];
    for (;;) {
        int n = epoll_wait(epoll, ready, 512, -1);
        for (int r = 0; r < n; r++) {
            uint64_t token = ready[r].data.u64;
            if (token == UINT64_MAX) {
                int fd;
                while ((fd = accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
                    if (fd >= capacity) { close(fd); continue; }
                    struct client *c = calloc(1, sizeof *c);
                    c->fd = fd;
                    clients[fd] = c;
                    struct epoll_event client_interest = {.events = EPOLLIN, .data.u64 = (uint64_t)fd};
                    epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &client_interest);
                }
                continue;
            }
            struct client *c = clients[token];
            if (!c) continue;
            if (ready[r].events & EPOLLOUT && !is_dirty[c->fd]) { is_dirty[c->fd] = 1; dirty[dirty_count++] = c->fd; }
            if (!(ready[r].events & (EPOLLIN | EPOLLHUP))) continue;
            ssize_t got = read(c->fd, buffer, sizeof buffer);
            if (got == 0 || (got < 0 && errno != EAGAIN)) {
                for (int i = 0; i < subscriber_count; i++)
                    if (subscribers[i] == c->fd) subscribers[i] = subscribers[--subscriber_count];
                epoll_ctl(epoll, EPOLL_CTL_DEL, c->fd, NULL);
                close(c->fd);
                clients[token] = NULL;
                is_dirty[token] = 0;
                free(c->out);
                free(c);
                continue;
            }
            if (got < 0) continue;
            for (ssize_t k = 0; k < got; k++) {
                if (c->in_used < sizeof c->in) c->in[c->in_used++] = buffer[k];
                if (buffer[k] != '\n') continue;
                if (memmem(c->in, c->in_used, "\"simulate\"", 10)) {
                    append(c, "{\"type\":\"ok\"}\n", 14);
                    for (int i = 0; i < subscriber_count; i++) {
                        int fd = subscribers[i];
                        struct client *s = clients[fd];
                        if (!s) continue;
                        append(s, line, line_bytes);
                        if (!is_dirty[fd]) { is_dirty[fd] = 1; dirty[dirty_count++] = fd; }
                    }
                } else if (memmem(c->in, c->in_used, "\"subscribe\"", 11)) {
                    if (!c->subscriber) subscribers[subscriber_count++] = c->fd;
                    c->subscriber = 1;
                    append(c, "{\"type\":\"snapshot\",\"id\":2,\"seq\":0,\"accessories\":[]}\n", 52);
                } else if (memmem(c->in, c->in_used, "\"hello\"", 7)) {
                    append(c, "{\"type\":\"hello\",\"id\":1,\"version\":1}\n", 36);
                }
                c->in_used = 0;
            }
            if (!is_dirty[c->fd]) { is_dirty[c->fd] = 1; dirty[dirty_count++] = c->fd; }
        }
        for (int d = 0; d < dirty_count; d++) {
            int fd = dirty[d];
            is_dirty[fd] = 0;
            struct client *c = clients[fd];
            if (!c) continue;
            while (c->out_head < c->out_used) {
                ssize_t sent = send(fd, c->out + c->out_head, c->out_used - c->out_head, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (sent <= 0) break;
                c->out_head += (size_t)sent;
            }
            if (c->out_head == c->out_used) c->out_head = c->out_used = 0;
            int want = c->out_used > c->out_head;
            if (want != c->writable_wanted) {
                struct epoll_event change = {.events = EPOLLIN | (want ? EPOLLOUT : 0), .data.u64 = (uint64_t)fd};
                epoll_ctl(epoll, EPOLL_CTL_MOD, fd, &change);
                c->writable_wanted = want;
            }
        }
        dirty_count = 0;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 6 && !strcmp(argv[1], "measure")) return measure(argv[2], atoi(argv[3]), atol(argv[4]), atoi(argv[5]));
    if (argc == 4 && !strcmp(argv[1], "serve")) return serve(argv[2], (size_t)atol(argv[3]));
    fprintf(stderr, "usage: fanout measure SOCKET SUBSCRIBERS EVENTS ROUNDS | fanout serve SOCKET LINE_BYTES\n");
    return 2;
}
