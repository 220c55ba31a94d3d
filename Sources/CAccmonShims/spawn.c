#define _GNU_SOURCE
#include "CAccmonShims.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

// Between fork and exec only async-signal-safe calls: the parent may have threads (the client's reader).
pid_t CAccmonShims_spawnTiedChild(const char *path, char *const argv[], char *const envp[], int deathSignal,
                                  int passedDescriptor) {
    int report[2];
    if (pipe2(report, O_CLOEXEC) != 0) return -1;
    pid_t parent = getpid();
    pid_t child = fork();
    if (child < 0) {
        int saved = errno;
        close(report[0]);
        close(report[1]);
        errno = saved;
        return -1;
    }
    if (child == 0) {
        close(report[0]);
        if (prctl(PR_SET_PDEATHSIG, deathSignal) != 0) goto failed;
        // The parent died between fork and prctl: the death signal would never come.
        if (getppid() != parent) _exit(127);
        sigset_t none;
        sigemptyset(&none);
        for (int signal = 1; signal < NSIG; signal++) {
            if (signal == SIGKILL || signal == SIGSTOP) continue;
            struct sigaction action = {.sa_handler = SIG_DFL};
            sigaction(signal, &action, NULL);
        }
        sigprocmask(SIG_SETMASK, &none, NULL);
        // The descriptor handed to the command, as its 3 (dup2 clears close-on-exec; already 3: cleared by hand).
        if (passedDescriptor >= 0) {
            if (passedDescriptor == 3) {
                if (fcntl(3, F_SETFD, 0) != 0) goto failed;
            } else if (dup2(passedDescriptor, 3) != 3) {
                goto failed;
            }
        }
        execve(path, argv, envp);
    failed:;
        int error = errno;
        (void)!write(report[1], &error, sizeof error);
        _exit(127);
    }
    close(report[1]);
    int error = 0;
    ssize_t got;
    do {
        got = read(report[0], &error, sizeof error);
    } while (got < 0 && errno == EINTR);
    close(report[0]);
    if (got == (ssize_t)sizeof error) {
        int status;
        while (waitpid(child, &status, 0) < 0 && errno == EINTR) {}
        errno = error;
        return -1;
    }
    return child;
}
