/* What the bench's C tools share: the monotonic clock in nanoseconds, and dying with the system's reason. */
#ifndef ACCMON_BENCH_COMMON_H
#define ACCMON_BENCH_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static inline void die(const char *what) { perror(what); exit(1); }

#endif
