#define _GNU_SOURCE
#include "CAccmonShims.h"
#include <pthread.h>
#include <string.h>

void CAccmonShims_nameThread(const char *name) {
    char shortName[16];
    strncpy(shortName, name, sizeof shortName - 1);
    shortName[sizeof shortName - 1] = 0;
    pthread_setname_np(pthread_self(), shortName);
}

int CAccmonShims_accept(int fd, int flags) {
    return accept4(fd, NULL, NULL, flags);
}

int CAccmonShims_peerCredentials(int fd, pid_t *pid, uid_t *uid, gid_t *gid) {
    struct ucred credentials;
    socklen_t length = sizeof credentials;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) return -1;
    *pid = credentials.pid;
    *uid = credentials.uid;
    *gid = credentials.gid;
    return 0;
}

int CAccmonShims_peerGroups(int fd, gid_t *groups, int *count) {
    socklen_t length = (socklen_t)(*count * sizeof(gid_t));
    int result = getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &length);
    *count = (int)(length / sizeof(gid_t));
    return result;
}
