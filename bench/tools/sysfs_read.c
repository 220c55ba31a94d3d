/* sysfs_read: the cost of reading one sysfs attribute as accmond reads it (`openat` relative to the device's
 * directory, one `pread`, `close`), repeated.
 *
 *   sysfs_read DIRECTORY ATTRIBUTE COUNT
 *
 * Prints one JSON line: the path, the count and the mean microseconds per read. Run under umockdev's preload on a
 * testbed device, it measures what the stream bench's attribute reads cost there; on a real sysfs file, what they
 * cost without the preload.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: sysfs_read DIRECTORY ATTRIBUTE COUNT\n");
        return 2;
    }
    long count = atol(argv[3]);
    char buffer[4096];
    int directory = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (directory < 0) { perror(argv[1]); return 1; }
    double start = now();
    for (long i = 0; i < count; i++) {
        int file = openat(directory, argv[2], O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (file < 0) { perror(argv[2]); return 1; }
        if (pread(file, buffer, sizeof buffer, 0) < 0) { perror("pread"); return 1; }
        close(file);
    }
    printf("{\"path\":\"%s/%s\",\"reads\":%ld,\"us_per_read\":%.3f}\n", argv[1], argv[2], count,
           (now() - start) / (double)count * 1e6);
    return 0;
}
