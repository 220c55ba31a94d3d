public import AccmonLogging
public import AccmonNodes
public import AccmonSys
import Glibc

/// The helper's loop: one thread, `poll` over a signalfd (SIGTERM, SIGINT), the listening socket, the keeper's
/// change watch and the clients. A client is accepted only when the kernel's credentials of its socket
/// (`SO_PEERCRED`) name the allowed user; anyone else gets one `not-permitted` reply and is closed. Each request
/// line gets its reply before the next line is read (``NodeHelperProtocol``).
public final class NodeHelperServer {
    /// At most this many clients at once (accmond needs one; a restarted accmond's new one may meet the old).
    public static let maximumClients = 8

    private struct Client {
        var descriptor: FileDescriptor
        var peer: PeerCredentials
        var buffer: [UInt8] = []
    }

    private let listener: FileDescriptor
    private let keeper: NodeKeeper
    private let allowedUID: uid_t
    private let allowedUser: String
    private let logger: Logger
    private var clients: [Client] = []

    /// - Parameters:
    ///   - listener: a listening Unix stream socket (from the service manager, or bound by the helper).
    ///   - allowedUID: the only user whose clients are served (accmond's).
    ///   - allowedUser: that user, for messages: `accmond (uid 105)`.
    public init(listener: FileDescriptor, keeper: NodeKeeper, allowedUID: uid_t, allowedUser: String, logger: Logger) {
        self.listener = listener
        self.keeper = keeper
        self.allowedUID = allowedUID
        self.allowedUser = allowedUser
        self.logger = logger
    }

    /// Serves until SIGTERM or SIGINT, which must be blocked (``SignalDescriptor/block(_:)``) before any thread
    /// starts.
    public func run() throws(Errno) {
        let signals = try SignalDescriptor([SIGTERM, SIGINT])
        defer { signals.descriptor.close() }
        // What changed while no helper ran (an ACL entry added meanwhile, a udev rewrite) is seen by no watch:
        // every held node is compared with what its claim applied, and applied again where it differs.
        reapply()
        reportWarnings()
        while true {
            let watch = keeper.changeDescriptor
            let fixed = [signals.descriptor, listener] + (watch.map { [$0] } ?? [])
            let ready = try waitForReadable(fixed + clients.map(\.descriptor), timeoutMilliseconds: -1).ready
            if ready[0], let signal = signals.next() {
                logger.info(.stopping, "signal \(signal): stopping (held nodes stay held, their records kept)")
                for client in clients { client.descriptor.close() }
                return
            }
            let polled = clients.count
            // From the last, so that removing a closed client keeps the others' indices; before accepting, which
            // appends.
            for index in (0..<polled).reversed() where ready[fixed.count + index] { serve(index) }
            if watch != nil && ready[2] { reapply() }
            if ready[1] { accept() }
            reportWarnings()
        }
    }

    private func accept() {
        let descriptor: FileDescriptor
        do throws(Errno) {
            guard let accepted = try UnixSocket.accept(listener) else { return }
            descriptor = accepted
            try descriptor.setNonBlocking(false)
            // A client that stops reading its replies is closed after 5 s rather than holding the helper.
            UnixSocket.setSendTimeout(descriptor, seconds: 5)
        } catch {
            logger.warning(.transportFailure, "accept: \(error)")
            if error == .processOutOfDescriptors || error == .systemOutOfDescriptors { usleep(100_000) }
            return
        }
        let peer: PeerCredentials
        do throws(Errno) {
            peer = try UnixSocket.peerCredentials(descriptor)
        } catch {
            logger.warning(.nodeRefusal, "a client whose credentials cannot be read: \(error)")
            descriptor.close()
            return
        }
        let who = "uid \(peer.uid) (pid \(peer.pid))"
        guard peer.uid == allowedUID else {
            refuse(descriptor, who, "only \(allowedUser) may use this helper")
            return
        }
        guard clients.count < Self.maximumClients else {
            refuse(descriptor, who, "\(Self.maximumClients) clients are connected already")
            return
        }
        logger.debug(.clientConnected, "client \(who) connected", ["client.pid": "\(peer.pid)"])
        clients.append(Client(descriptor: descriptor, peer: peer))
    }

    private func refuse(_ descriptor: FileDescriptor, _ who: String, _ reason: String) {
        let error = NodeError(.notPermitted, "accmon-nodes", who, reason)
        logger.warning(.nodeRefusal, "refused a client: \(error)")
        try? descriptor.sendAll(NodeReply.failure(id: nil, error).line)  // try?: it is closed either way
        descriptor.close()
    }

    private func serve(_ index: Int) {
        var chunk = [UInt8](repeating: 0, count: 65_536)
        var received = 0
        var failure: Errno?
        chunk.withUnsafeMutableBytes { raw in
            do throws(Errno) { received = try clients[index].descriptor.receive(into: raw) } catch { failure = error }
        }
        guard failure == nil, received > 0 else { return close(index, failure.map { "read: \($0)" }) }
        clients[index].buffer += chunk[..<received]
        while let newline = clients[index].buffer.firstIndex(of: 0x0A) {
            let line = Array(clients[index].buffer[..<newline])
            clients[index].buffer.removeSubrange(...newline)
            let reply = answer(line, from: clients[index].peer)
            do throws(Errno) {
                try clients[index].descriptor.sendAll(reply.line)
            } catch {
                return close(index, "write: \(error)")
            }
        }
        if clients[index].buffer.count > NodeHelperProtocol.maximumRequestBytes {
            let error = NodeError(
                .badRequest, "request", "line", "longer than \(NodeHelperProtocol.maximumRequestBytes) bytes")
            try? clients[index].descriptor.sendAll(NodeReply.failure(id: nil, error).line)  // try?: closed anyway
            close(index, "\(error)")
        }
    }

    private func close(_ index: Int, _ reason: String?) {
        let client = clients.remove(at: index)
        client.descriptor.close()
        logger.debug(
            .clientDisconnected,
            "client uid \(client.peer.uid) (pid \(client.peer.pid)) disconnected"
                + (reason.map { ": \($0)" } ?? ""))
    }

    private func answer(_ line: [UInt8], from peer: PeerCredentials) -> NodeReply {
        let request: NodeRequest
        switch NodeRequest.decode(line) {
        case .refused(let reply):
            logger.warning(.nodeRefusal, "a request of pid \(peer.pid): \(reply.error.map { "\($0)" } ?? "?")")
            return reply
        case .request(let decoded): request = decoded
        }
        let reply = request.perform(on: keeper)
        let metadata = ["node.path": request.path ?? request.port ?? "", "client.pid": "\(peer.pid)"]
        if let error = reply.error {
            let level: LogLevel = error.code == .refused || error.code == .notMarked ? .warning : .notice
            logger.log(
                level, error.code == .refused || error.code == .notMarked ? .nodeRefusal : .nodeChange,
                "\(error)", metadata)
        } else if request.op != .held && request.op != .openers {
            logger.info(.nodeChange, summary(of: request, reply), metadata)
        }
        return reply
    }

    private func summary(of request: NodeRequest, _ reply: NodeReply) -> String {
        switch request.op {
        case .hold:
            let outcome = reply.hold
            let holder = request.holder.map { "\($0)" } ?? "?"
            return "hold: \(request.path ?? ""): \(outcome?.change.rawValue ?? "?") for \(holder): "
                + "\(outcome?.applied.description ?? "?") (restores \(outcome?.original.description ?? "?"))"
        case .release:
            let outcome = reply.release
            return "release: \(request.path ?? ""): \(outcome?.result.rawValue ?? "?")"
                + (outcome?.restored.map { " to \($0)" } ?? "")
                + (outcome?.udevChange == ReleaseOutcome.UdevChange.none
                    ? "" : ", udev change \(outcome?.udevChange.rawValue ?? "")")
        case .cut:
            return "cut: \(request.path ?? ""): \(reply.cut?.method.rawValue ?? "?")"
                + (reply.cut?.usbDevice.map { " (\($0))" } ?? "") + (reply.cut?.reason.map { ": \($0)" } ?? "")
        case .releaseAll: return "release-all: \(reply.results?.count ?? 0) nodes"
        case .markPort: return "mark-port: \(request.port ?? "")"
        case .unmarkPort: return "unmark-port: \(request.port ?? ""): udev change for \(reply.triggered ?? [])"
        case .held, .openers: return request.op.rawValue
        }
    }

    private func reapply() {
        for (path, result) in keeper.reapplyChanged() {
            switch result {
            case .success(let outcome):
                logger.info(
                    .nodeChange, "\(path): rewritten while held: applied again, restores \(outcome.original)",
                    ["node.path": path])
            case .failure(let error):
                logger.warning(
                    .nodeChange, "\(path): rewritten while held, and not applied again: \(error)",
                    ["node.path": path])
            }
        }
    }

    private func reportWarnings() {
        for warning in keeper.takeWarnings() { logger.warning(.state, warning) }
    }
}
