public import AccmonLogging
public import AccmonNodes
public import AccmonSys

/// The node helper's requests (``NodeHelperProtocol``) on a ``NodeKeeper``, served by a ``LineServer``.
public final class NodeService: LineService {
    private let keeper: NodeKeeper
    private let logger: Logger

    public init(keeper: NodeKeeper, logger: Logger) {
        self.keeper = keeper
        self.logger = logger
    }

    public var maximumRequestBytes: Int { NodeHelperProtocol.maximumRequestBytes }
    public var watchedDescriptor: FileDescriptor? { keeper.changeDescriptor }

    /// What changed while no helper ran (an ACL entry added meanwhile, a udev rewrite) is seen by no watch: every
    /// held node is compared with what its claim applied, and applied again where it differs.
    public func start() { reapply() }

    public func watchedDescriptorIsReadable() { reapply() }

    public func refusal(_ error: NodeError) -> [UInt8] { NodeReply.failure(id: nil, error).line }

    public func endOfTurn() {
        for warning in keeper.takeWarnings() { logger.warning(.state, warning) }
    }

    public func answer(_ line: [UInt8], from peer: PeerCredentials) -> (line: [UInt8], descriptor: FileDescriptor?) {
        let request: NodeRequest
        switch NodeRequest.decode(line) {
        case .refused(let reply):
            logger.warning(.nodeRefusal, "a request of pid \(peer.pid): \(reply.error.map { "\($0)" } ?? "?")")
            return (reply.line, nil)
        case .request(let decoded): request = decoded
        }
        let (reply, descriptor) = request.performPassing(on: keeper)
        let metadata = ["node.path": request.path ?? request.port ?? "", "client.pid": "\(peer.pid)"]
        if let error = reply.error {
            let refused = error.code == .refused || error.code == .notMarked
            logger.log(refused ? .warning : .notice, refused ? .nodeRefusal : .nodeChange, "\(error)", metadata)
        } else if request.op != .held && request.op != .openers && request.op != .state {
            logger.info(.nodeChange, summary(of: request, reply), metadata)
        }
        return (reply.line, descriptor)
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
            let cut = reply.cut
            return "cut: \(request.path ?? ""): \(cut?.method.rawValue ?? "?")"
                + ((cut?.hubPort ?? cut?.usbDevice).map { " (\($0))" } ?? "") + (cut?.reason.map { ": \($0)" } ?? "")
        case .openForIO: return "open: \(request.path ?? ""): \(reply.open?.readOnly == true ? "read only" : "read and write")"
        case .releaseAll: return "release-all: \(reply.results?.count ?? 0) nodes"
        case .markPort: return "mark-port: \(request.port ?? "")"
        case .unmarkPort: return "unmark-port: \(request.port ?? ""): udev change for \(reply.triggered ?? [])"
        case .held, .openers, .state: return request.op.rawValue
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
}

/// The opener scanner's requests (``OpenerScanProtocol``): ``ProcessScan`` of the files named, served by a
/// ``LineServer`` in the one unit that may look at every process's descriptors.
public final class OpenerScanService: LineService {
    private let timeLimit: Duration
    private let logger: Logger

    public init(timeLimit: Duration = ProcessScan.defaultTimeLimit, logger: Logger) {
        self.timeLimit = timeLimit
        self.logger = logger
    }

    public var maximumRequestBytes: Int { OpenerScanProtocol.maximumRequestBytes }
    public var watchedDescriptor: FileDescriptor? { nil }
    public func start() {}
    public func watchedDescriptorIsReadable() {}
    public func endOfTurn() {}
    public func refusal(_ error: NodeError) -> [UInt8] { OpenerScanReply.failure(id: nil, error).line }

    public func answer(_ line: [UInt8], from peer: PeerCredentials) -> (line: [UInt8], descriptor: FileDescriptor?) {
        switch OpenerScanRequest.decode(line) {
        case .refused(let reply):
            logger.warning(.nodeRefusal, "a request of pid \(peer.pid): \(reply.error.map { "\($0)" } ?? "?")")
            return (reply.line, nil)
        case .request(let request):
            // The helper has each node open (O_PATH) while it asks: that is not an opener.
            let result = ProcessScan.openers(
                ofEach: request.files.map(\.status), excluding: [peer.pid], timeLimit: timeLimit)
            if !result.complete {
                logger.warning(.nodeChange, "scan of \(request.files.count) files stopped at its limit of \(timeLimit)")
            }
            return (OpenerScanReply(id: request.id, scan: result).line, nil)
        }
    }
}
