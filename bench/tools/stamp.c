/* stamp: copies standard input to standard output, each line prefixed with the CLOCK_MONOTONIC time (ns) at which
 * the read that completed it returned. The bench puts it behind `accmon watch --json`, `udevadm monitor` and the
 * AccmonClient bench app, so that every receiver's lines are timed the same way. Exits at end of input. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int main(void) {
    static char in[1 << 16], line[1 << 20];
    static char out_buffer[1 << 20];
    setvbuf(stdout, out_buffer, _IOFBF, sizeof out_buffer);
    size_t used = 0;
    for (;;) {
        ssize_t n = read(0, in, sizeof in);
        if (n <= 0) break;
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        unsigned long long ns = (unsigned long long)t.tv_sec * 1000000000ull + (unsigned long long)t.tv_nsec;
        for (ssize_t i = 0; i < n; i++) {
            if (in[i] == '\n') {
                printf("%llu %.*s\n", ns, (int)used, line);
                used = 0;
            } else if (used < sizeof line) {
                line[used++] = in[i];
            }
        }
        fflush(stdout); /* one write per read: the bench follows the file while the receiver runs */
    }
    if (used) printf("%llu %.*s\n", 0ull, (int)used, line);
    fflush(stdout);
    return 0;
}
