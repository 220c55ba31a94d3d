// Linux headers that Swift's Glibc module does not export, and small helpers over macros.
#ifndef CACCMON_SHIMS_H
#define CACCMON_SHIMS_H

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <stdint.h>
#include <grp.h>
#include <pwd.h>
#include <sys/xattr.h>
#include <sys/inotify.h>

/// accept4(2) with no address; flags as for accept4.
int CAccmonShims_accept(int fd, int flags);

/// SO_PEERCRED: the peer's pid, uid and gid. Returns 0, or -1 with errno set.
int CAccmonShims_peerCredentials(int fd, pid_t *pid, uid_t *uid, gid_t *gid);

/// SO_PEERGROUPS: the peer's supplementary groups at connect time. `*count` is the capacity in, the number out.
/// Returns 0, or -1 with errno set (ERANGE: `*count` holds the number needed).
int CAccmonShims_peerGroups(int fd, gid_t *groups, int *count);

/// Who sent a datagram received on a netlink socket, as recvmsg(2) says: the sender's netlink address and its
/// SCM_CREDENTIALS (the socket needs SO_PASSCRED).
struct CAccmonShims_NetlinkSender {
    uint32_t groups;       ///< nl_groups: the multicast groups it was sent to (0: unicast)
    uint32_t portID;       ///< nl_pid: the sending socket's port (0: the kernel)
    int hasCredentials;    ///< whether an SCM_CREDENTIALS message came with it
    uid_t uid;             ///< the sender's uid, when hasCredentials
    int truncated;         ///< MSG_TRUNC: the datagram was longer than the buffer
};

/// recvmsg(2) of one datagram into `buffer`, without blocking, with the sender's address and credentials in
/// `*sender`. Returns the datagram's length, or -1 with errno set (EAGAIN: none pending).
ssize_t CAccmonShims_receiveNetlinkDatagram(int fd, void *buffer, size_t size, struct CAccmonShims_NetlinkSender *sender);

/// Names the calling thread (pthread_setname_np; at most 15 bytes).
void CAccmonShims_nameThread(const char *name);

/// Starts `path` with `argv` and `envp` in a child that gets `deathSignal` when the calling thread's process dies
/// (PR_SET_PDEATHSIG), with every signal's disposition and the signal mask at their defaults. Returns the child's
/// pid, or -1 with errno set: the fork's error, or the child's exec error (reported through a close-on-exec pipe).
/// `passedDescriptor` (-1: none) becomes the child's descriptor 3, inherited across the exec.
pid_t CAccmonShims_spawnTiedChild(const char *path, char *const argv[], char *const envp[], int deathSignal,
                                  int passedDescriptor);

/// Opens `path` below the directory `directoryFD` as an `O_PATH | O_NOFOLLOW | O_CLOEXEC` descriptor through
/// openat2(2) with RESOLVE_BENEATH, RESOLVE_NO_SYMLINKS and RESOLVE_NO_MAGICLINKS (and RESOLVE_NO_XDEV when
/// `sameMount`): no component may be a symbolic link, `..` may not leave the directory, and with `sameMount` no
/// component may cross a mount point. Returns the descriptor, or -1 with errno set (ENOSYS: a kernel before 5.6).
int CAccmonShims_openPathBeneath(int directoryFD, const char *path, int sameMount);

/// Opens `path` as an `O_PATH | O_CLOEXEC` directory descriptor (`O_DIRECTORY`), following symbolic links.
int CAccmonShims_openDirectoryPath(const char *path);

/// fchownat(fd, "", uid, gid, AT_EMPTY_PATH): changes the owner of the file an `O_PATH` descriptor refers to.
int CAccmonShims_changeOwner(int fd, uid_t uid, gid_t gid);

/// ioctl(fd, TIOCVHANGUP): hangs up the terminal, as vhangup(2) does, for every descriptor open on it (needs
/// CAP_SYS_ADMIN). Returns 0, or -1 with errno set.
int CAccmonShims_hangUpTerminal(int fd);

/// The `O_PATH` flag, which Swift's Glibc leaves out (it needs _GNU_SOURCE).
int CAccmonShims_pathFlag(void);

/// What statx(2) says of a file's identity: its type, the file system (`st_dev`), inode and device number.
struct CAccmonShims_FileIdentity {
    uint32_t mode;
    uint64_t fileSystem;
    uint64_t inode;
    uint64_t deviceNumber;
};

/// statx(directoryFD, path, AT_STATX_DONT_SYNC | AT_NO_AUTOMOUNT, STATX_TYPE | STATX_INO) following a final link
/// (a /proc/PID/fd/N magic link, to the file it names): never asks a network file system for fresh attributes and
/// never triggers an automount. Returns 0, or -1 with errno set.
int CAccmonShims_identityWithoutSync(int directoryFD, const char *path, struct CAccmonShims_FileIdentity *identity);

/// sendmsg(2) of `length` bytes with the descriptor `descriptor` attached (SCM_RIGHTS), MSG_NOSIGNAL. Returns the bytes
/// sent, or -1 with errno set.
ssize_t CAccmonShims_sendWithDescriptor(int socket, const void *bytes, size_t length, int descriptor);

/// recvmsg(2) into `buffer`, taking at most one descriptor a message carries (SCM_RIGHTS, MSG_CMSG_CLOEXEC) into
/// `*descriptor` (-1 when none; any more are closed). Returns the bytes read, or -1 with errno set.
ssize_t CAccmonShims_receiveWithDescriptor(int socket, void *buffer, size_t size, int *descriptor);

/// mallopt(M_TOP_PAD, bytes), which Swift's Glibc leaves out (malloc.h): how much more than it needs each malloc
/// heap grows by. Returns 1 on success, 0 on error.
int CAccmonShims_setHeapTopPad(int bytes);

#endif
