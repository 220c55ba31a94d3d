import AccmonSys
import FoundationEssentials
import Glibc

/// A reply line of a line protocol (the helper's, the opener scanner's): its version and the id of the request it
/// answers (none when it answers a line that could not be read).
protocol LineReply: Decodable {
    var v: Int { get }
    var id: UInt64? { get }
}

/// A blocking client of a newline-delimited JSON protocol over a Unix stream socket, one request at a time: the
/// transport under ``NodeHelperLink`` and ``OpenerScanLink``.
///
/// It connects on the first call, and again after a failure: a server that restarted (both are socket-activated) is
/// reached again without the caller doing anything; a request whose send fails on a connection that worked before
/// (the server restarted since) is sent again on a new one. A call that cannot be sent, or whose reply does not
/// come within ``timeout``, fails with `unavailable`; whether the server acted is then unknown.
///
/// - Important: not thread-safe, and every call blocks up to ``timeout``: use it from one thread of its own.
final class LineLink {
    let socketPath: String
    let timeout: Duration
    /// Who is at the other end, for messages: `accmon-nodes`.
    let peer: String
    /// What a reply line may hold at most.
    let maximumReplyBytes: Int
    private var connection: FileDescriptor?
    private var buffer: [UInt8] = []
    /// The descriptor the last reply carried, until taken.
    private var passed: FileDescriptor?
    /// The connections made so far.
    private(set) var connections = 0

    init(socketPath: String, timeout: Duration, peer: String, maximumReplyBytes: Int) {
        self.socketPath = socketPath
        self.timeout = timeout
        self.peer = peer
        self.maximumReplyBytes = maximumReplyBytes
    }

    deinit { connection?.close() }

    func close() {
        connection?.close()
        connection = nil
        buffer = []
        passed?.close()
        passed = nil
    }

    /// The descriptor the last reply carried (`SCM_RIGHTS`), if any; the caller owns it now.
    func takeDescriptor() -> FileDescriptor? {
        defer { passed = nil }
        return passed
    }

    /// Sends `line` (newline included) and returns the reply to request `id`.
    func call<Reply: LineReply>(_ line: [UInt8], id: UInt64, version: Int, as type: Reply.Type) throws(NodeError)
        -> Reply
    {
        passed?.close()  // a reply's descriptor no one took
        passed = nil
        do throws(NodeError) {
            let reused = connection != nil
            var fd = try connected()
            do throws(Errno) {
                try fd.sendAll(line)
            } catch {
                // A server that refuses a client says why and closes at once: its reply may be here already.
                if !reused, let refusal = try? readReply(to: id, version: version, as: type, on: fd, within: .zero) {
                    return refusal  // try?: none came
                }
                // A connection that was fine before and fails on send (EPIPE): the server restarted since. The
                // request never reached it: send it on a new connection, once.
                guard reused else { throw unavailable("send: \(error)") }
                close()
                fd = try connected()
                do throws(Errno) {
                    try fd.sendAll(line)
                } catch {
                    throw unavailable("send: \(error)")
                }
            }
            return try readReply(to: id, version: version, as: type, on: fd, within: timeout)
        } catch {
            close()
            throw error
        }
    }

    private func connected() throws(NodeError) -> FileDescriptor {
        if let connection { return connection }
        do throws(SocketError) {
            let fd = try UnixSocket.connect(path: socketPath)
            connection = fd
            connections += 1
            return fd
        } catch {
            let hint = error.errno == .permissionDenied ? " (only its allowed user may connect)" : ""
            throw unavailable("connect: \(error.errno)\(hint)")
        }
    }

    private func readReply<Reply: LineReply>(
        to id: UInt64, version: Int, as type: Reply.Type, on fd: FileDescriptor, within limit: Duration
    ) throws(NodeError) -> Reply {
        let clock = ContinuousClock()
        let deadline = clock.now + limit
        while true {
            if let newline = buffer.firstIndex(of: 0x0A) {
                let line = buffer[..<newline]
                buffer.removeSubrange(...newline)
                let reply: Reply
                do {
                    reply = try JSONDecoder().decode(Reply.self, from: Data(line))
                } catch {
                    throw unavailable("a reply that is not the protocol's: \(error)")
                }
                guard reply.v == version else { throw unavailable("protocol version \(reply.v), not \(version)") }
                // A reply with no id answers a line the server could not read: this one.
                guard reply.id == id || reply.id == nil else {
                    throw unavailable("a reply to request \(reply.id.map(String.init) ?? "?"), not \(id)")
                }
                return reply
            }
            guard buffer.count <= maximumReplyBytes else {
                throw unavailable("a reply longer than \(maximumReplyBytes) bytes")
            }
            let left = deadline - clock.now
            guard left > .zero || limit == .zero else { throw unavailable("no reply within \(limit)") }
            let (seconds, attoseconds) = left.components
            let milliseconds =
                limit == .zero ? 0 : Int32(clamping: seconds * 1000 + attoseconds / 1_000_000_000_000_000 + 1)
            var chunk = [UInt8](repeating: 0, count: 65_536)
            var count = 0
            do throws(Errno) {
                guard try waitForReadable([fd], timeoutMilliseconds: milliseconds).ready[0] else {
                    if limit == .zero { throw Errno.wouldBlock }
                    continue
                }
                var failure: Errno?
                var descriptor = passed
                chunk.withUnsafeMutableBytes { raw in
                    do throws(Errno) {
                        count = try fd.receive(into: raw, descriptor: &descriptor)
                    } catch {
                        failure = error
                    }
                }
                passed = descriptor
                if let failure { throw failure }
            } catch {
                throw unavailable("read: \(error)")
            }
            guard count > 0 else { throw unavailable("\(peer) closed the connection") }
            buffer += chunk[..<count]
        }
    }

    func unavailable(_ reason: String) -> NodeError { NodeError(.unavailable, peer, socketPath, reason) }
}
