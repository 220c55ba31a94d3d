/* clockstamp: prints the CLOCK_MONOTONIC time (ns) at which it runs, then exits: the command the claims bench has
 * `accmon claim` run, so that "claim to command running" is timed by the command itself. */
#include <stdio.h>
#include <time.h>

int main(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    printf("%llu\n", (unsigned long long)t.tv_sec * 1000000000ull + (unsigned long long)t.tv_nsec);
    return 0;
}
