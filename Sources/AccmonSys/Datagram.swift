import CAccmonShims
import Glibc

/// Who sent a datagram, as the kernel tells its receiver.
public struct DatagramSender: Sendable, Hashable {
    /// On a netlink socket: the multicast groups it was sent to (0: a unicast). 0 on other sockets.
    public var netlinkGroups: UInt32
    /// On a netlink socket: the sending socket's port (0: the kernel). 0 on other sockets.
    public var netlinkPortID: UInt32
    /// The sender's uid from its `SCM_CREDENTIALS`; `nil` when none came (the socket needs `SO_PASSCRED`).
    public var uid: UInt32?

    /// Creates a sender.
    public init(netlinkGroups: UInt32, netlinkPortID: UInt32, uid: UInt32?) {
        self.netlinkGroups = netlinkGroups
        self.netlinkPortID = netlinkPortID
        self.uid = uid
    }
}

/// Datagram sockets.
public enum Datagram {
    /// Reads one datagram into `buffer` without blocking, with its sender; `nil` when none is pending.
    /// - Throws: `EMSGSIZE` when the datagram was longer than `buffer` (the rest is lost), or the error of
    ///   `recvmsg(2)`, such as `ENOBUFS` on a netlink socket that overflowed.
    public static func receive(
        from socket: FileDescriptor, into buffer: UnsafeMutableRawBufferPointer
    ) throws(Errno) -> (length: Int, sender: DatagramSender)? {
        var sender = CAccmonShims_NetlinkSender()
        var length: Int
        repeat {
            length = CAccmonShims_receiveNetlinkDatagram(socket.rawValue, buffer.baseAddress, buffer.count, &sender)
        } while length < 0 && errno == EINTR
        guard length >= 0 else {
            if errno == EAGAIN { return nil }
            throw Errno.current
        }
        if sender.truncated != 0 { throw Errno(rawValue: EMSGSIZE) }
        return (
            length,
            DatagramSender(
                netlinkGroups: sender.groups, netlinkPortID: sender.portID,
                uid: sender.hasCredentials != 0 ? UInt32(sender.uid) : nil)
        )
    }
}
