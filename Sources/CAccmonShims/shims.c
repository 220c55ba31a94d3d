#define _GNU_SOURCE
#include "CAccmonShims.h"
#include <linux/netlink.h>
#include <malloc.h>
#include <pthread.h>
#include <string.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

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

ssize_t CAccmonShims_receiveNetlinkDatagram(int fd, void *buffer, size_t size, struct CAccmonShims_NetlinkSender *sender) {
    struct sockaddr_nl address;
    union {
        struct cmsghdr header;
        char bytes[CMSG_SPACE(sizeof(struct ucred))];
    } control;
    struct iovec vector = {.iov_base = buffer, .iov_len = size};
    struct msghdr message = {
        .msg_name = &address, .msg_namelen = sizeof address, .msg_iov = &vector, .msg_iovlen = 1,
        .msg_control = &control, .msg_controllen = sizeof control,
    };
    memset(&address, 0, sizeof address);
    memset(sender, 0, sizeof *sender);
    ssize_t length = recvmsg(fd, &message, MSG_DONTWAIT);
    if (length < 0) return -1;
    sender->groups = address.nl_groups;
    sender->portID = address.nl_pid;
    sender->truncated = (message.msg_flags & MSG_TRUNC) != 0;
    for (struct cmsghdr *header = CMSG_FIRSTHDR(&message); header; header = CMSG_NXTHDR(&message, header)) {
        if (header->cmsg_level == SOL_SOCKET && header->cmsg_type == SCM_CREDENTIALS
            && header->cmsg_len >= CMSG_LEN(sizeof(struct ucred))) {
            struct ucred credentials;
            memcpy(&credentials, CMSG_DATA(header), sizeof credentials);
            sender->hasCredentials = 1;
            sender->uid = credentials.uid;
        }
    }
    return length;
}

int CAccmonShims_openPathBeneath(int directoryFD, const char *path, int sameMount) {
    struct open_how how;
    memset(&how, 0, sizeof how);
    how.flags = O_PATH | O_NOFOLLOW | O_CLOEXEC;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | (sameMount ? RESOLVE_NO_XDEV : 0);
    return (int)syscall(SYS_openat2, directoryFD, path, &how, sizeof how);
}

int CAccmonShims_openDirectoryPath(const char *path) {
    return open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
}

int CAccmonShims_changeOwner(int fd, uid_t uid, gid_t gid) {
    return fchownat(fd, "", uid, gid, AT_EMPTY_PATH);
}

int CAccmonShims_hangUpTerminal(int fd) {
    return ioctl(fd, TIOCVHANGUP);
}

int CAccmonShims_pathFlag(void) {
    return O_PATH;
}

int CAccmonShims_setHeapTopPad(int bytes) {
    return mallopt(M_TOP_PAD, bytes);
}

int CAccmonShims_identityWithoutSync(int directoryFD, const char *path, struct CAccmonShims_FileIdentity *identity) {
    struct statx info;
    if (statx(directoryFD, path, AT_STATX_DONT_SYNC | AT_NO_AUTOMOUNT, STATX_TYPE | STATX_INO, &info) != 0) {
        return -1;
    }
    identity->mode = info.stx_mode;
    identity->fileSystem = makedev(info.stx_dev_major, info.stx_dev_minor);
    identity->inode = info.stx_ino;
    identity->deviceNumber = makedev(info.stx_rdev_major, info.stx_rdev_minor);
    return 0;
}

ssize_t CAccmonShims_sendWithDescriptor(int socket, const void *bytes, size_t length, int descriptor) {
    struct iovec vector = {.iov_base = (void *)bytes, .iov_len = length};
    union {
        char buffer[CMSG_SPACE(sizeof(int))];
        struct cmsghdr header;
    } control;
    memset(&control, 0, sizeof control);
    struct msghdr message = {.msg_iov = &vector, .msg_iovlen = 1, .msg_control = control.buffer,
                             .msg_controllen = sizeof control.buffer};
    struct cmsghdr *header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(header), &descriptor, sizeof(int));
    return sendmsg(socket, &message, MSG_NOSIGNAL);
}

ssize_t CAccmonShims_receiveWithDescriptor(int socket, void *buffer, size_t size, int *descriptor) {
    struct iovec vector = {.iov_base = buffer, .iov_len = size};
    union {
        char buffer[CMSG_SPACE(sizeof(int) * 4)];
        struct cmsghdr header;
    } control;
    struct msghdr message = {.msg_iov = &vector, .msg_iovlen = 1, .msg_control = control.buffer,
                             .msg_controllen = sizeof control.buffer};
    *descriptor = -1;
    ssize_t received = recvmsg(socket, &message, MSG_CMSG_CLOEXEC);
    if (received < 0) return received;
    for (struct cmsghdr *header = CMSG_FIRSTHDR(&message); header; header = CMSG_NXTHDR(&message, header)) {
        if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
        size_t count = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t index = 0; index < count; index++) {
            int passed;
            memcpy(&passed, CMSG_DATA(header) + index * sizeof(int), sizeof(int));
            if (*descriptor < 0) *descriptor = passed;
            else close(passed);
        }
    }
    return received;
}
