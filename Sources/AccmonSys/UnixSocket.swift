import CAccmonShims
import Glibc

/// The credentials of a Unix-socket peer, from `SO_PEERCRED`.
public struct PeerCredentials: Sendable, Hashable {
    public var pid: pid_t
    public var uid: uid_t
    public var gid: gid_t

    public init(pid: pid_t, uid: uid_t, gid: gid_t) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
    }
}

/// An error from a socket operation, naming the operation and the path.
public struct SocketError: Error, Sendable, CustomStringConvertible {
    /// The operation that failed, such as `connect`.
    public var operation: String
    /// The socket path.
    public var path: String
    /// The system error.
    public var errno: Errno

    public var description: String { "\(operation): '\(path)': \(errno)" }
}

/// Unix stream sockets: listen, accept, connect.
public enum UnixSocket {
    /// The longest socket path `sockaddr_un` holds.
    public static let maximumPathLength = 107

    /// Creates a listening socket at `path`, replacing a stale socket file there (never another kind of file).
    public static func listen(path: String, backlog: Int32 = 128) throws(SocketError) -> FileDescriptor {
        var address = try address(for: path, operation: "bind")
        var info = stat()
        if lstat(path, &info) == 0 {
            guard info.st_mode & S_IFMT == S_IFSOCK else {
                throw SocketError(operation: "bind", path: path, errno: Errno(rawValue: EEXIST))
            }
            if let probe = try? connect(path: path) {  // try?: a refused connect means the socket is stale
                probe.close()
                throw SocketError(operation: "bind", path: path, errno: .addressInUse)
            }
            unlink(path)
        }
        let fd = try wrap("socket", path) {
            socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        }
        do {
            _ = try wrap("bind", path) {
                withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                    }
                }
            }
            _ = try wrap("listen", path) { Glibc.listen(fd, backlog) }
        } catch {
            Glibc.close(fd)
            throw error
        }
        return FileDescriptor(rawValue: fd)
    }

    /// Connects to the socket at `path` (blocking descriptor).
    public static func connect(path: String) throws(SocketError) -> FileDescriptor {
        var address = try address(for: path, operation: "connect")
        let fd = try wrap("socket", path) {
            socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        }
        do {
            _ = try wrap("connect", path) {
                withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                    }
                }
            }
        } catch {
            Glibc.close(fd)
            throw error
        }
        return FileDescriptor(rawValue: fd)
    }

    /// Accepts a connection as a non-blocking, close-on-exec descriptor; `nil` when none is pending.
    public static func accept(_ listener: FileDescriptor) throws(Errno) -> FileDescriptor? {
        do throws(Errno) {
            let fd = try valueOrErrno {
                CAccmonShims_accept(listener.rawValue, Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue))
            }
            return FileDescriptor(rawValue: fd)
        } catch  where error == .wouldBlock || error.rawValue == ECONNABORTED {
            return nil
        }
    }

    /// The peer's pid, uid and gid.
    public static func peerCredentials(_ fd: FileDescriptor) throws(Errno) -> PeerCredentials {
        var credentials = PeerCredentials(pid: 0, uid: 0, gid: 0)
        _ = try valueOrErrno {
            CAccmonShims_peerCredentials(fd.rawValue, &credentials.pid, &credentials.uid, &credentials.gid)
        }
        return credentials
    }

    /// The peer's supplementary groups at connect time (`SO_PEERGROUPS`).
    public static func peerGroups(_ fd: FileDescriptor) throws(Errno) -> [gid_t] {
        var capacity: Int32 = 64
        while true {
            var groups = [gid_t](repeating: 0, count: Int(capacity))
            var count = capacity
            if CAccmonShims_peerGroups(fd.rawValue, &groups, &count) == 0 { return Array(groups.prefix(Int(count))) }
            let error = Errno.current
            guard error.rawValue == ERANGE, count > capacity else { throw error }
            capacity = count
        }
    }

    /// Makes a blocking send give up after `seconds` (`SO_SNDTIMEO`: it then fails with `EAGAIN`), so that a peer
    /// that stops reading cannot hold the sender forever.
    public static func setSendTimeout(_ fd: FileDescriptor, seconds: Int) {
        var value = timeval(tv_sec: seconds, tv_usec: 0)
        _ = setsockopt(fd.rawValue, SOL_SOCKET, SO_SNDTIMEO, &value, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Sets the kernel send buffer size (`SO_SNDBUF`).
    public static func setSendBufferSize(_ fd: FileDescriptor, _ bytes: Int32) {
        var value = bytes
        _ = setsockopt(fd.rawValue, SOL_SOCKET, SO_SNDBUF, &value, socklen_t(MemoryLayout<Int32>.size))
    }

    private static func address(for path: String, operation: String) throws(SocketError) -> sockaddr_un {
        let bytes = Array(path.utf8)
        guard !bytes.isEmpty, bytes.count <= maximumPathLength else {
            throw SocketError(operation: operation, path: path, errno: Errno(rawValue: ENAMETOOLONG))
        }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
        }
        return address
    }

    private static func wrap(_ operation: String, _ path: String, _ body: () -> Int32) throws(SocketError) -> Int32 {
        do {
            return try valueOrErrno(body)
        } catch {
            throw SocketError(operation: operation, path: path, errno: error)
        }
    }
}

extension UnixSocket {
    /// Removes the socket file at `path`, and only a socket: a file of another type that took its place stays.
    public static func removeSocketFile(at path: String) {
        var info = stat()
        if lstat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFSOCK { unlink(path) }
    }
}
