// Linux headers that Swift's Glibc module does not export, and small helpers over macros.
#ifndef CACCMON_SHIMS_H
#define CACCMON_SHIMS_H

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <grp.h>
#include <pwd.h>

/// accept4(2) with no address; flags as for accept4.
int CAccmonShims_accept(int fd, int flags);

/// SO_PEERCRED: the peer's pid, uid and gid. Returns 0, or -1 with errno set.
int CAccmonShims_peerCredentials(int fd, pid_t *pid, uid_t *uid, gid_t *gid);

/// SO_PEERGROUPS: the peer's supplementary groups at connect time. `*count` is the capacity in, the number out.
/// Returns 0, or -1 with errno set (ERANGE: `*count` holds the number needed).
int CAccmonShims_peerGroups(int fd, gid_t *groups, int *count);

/// Names the calling thread (pthread_setname_np; at most 15 bytes).
void CAccmonShims_nameThread(const char *name);

#endif
