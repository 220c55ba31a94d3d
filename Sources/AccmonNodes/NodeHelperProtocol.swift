public import AccmonSys
import FoundationEssentials

/// What `open` did: the node opened, and how; its descriptor travels with the reply line (`SCM_RIGHTS`).
public struct OpenOutcome: Sendable, Hashable, Codable {
    public var path: String
    public var readOnly: Bool
}

/// The protocol between accmond (``NodeHelperLink``) and the helper `accmon-nodes`: newline-delimited JSON over its
/// Unix socket, one request per line, every request answered by one reply line with the request's `id`, in order.
///
///     {"v":1,"id":1,"op":"hold","path":"/dev/ttyUSB0","holder":{"uid":1000,"gids":[20,1000],"grant":false}}
///     {"v":1,"id":1,"ok":true,"hold":{"path":"/dev/ttyUSB0","change":"applied",...}}
///     {"v":1,"id":2,"op":"release","path":"/dev/ttyUSB9"}
///     {"v":1,"id":2,"ok":false,"error":{"code":"not-held","context":"release","object":"/dev/ttyUSB9",...}}
///
/// Operations: `hold` (`path`, `holder`), `release` (`path`), `release-all`, `openers` (`path`), `cut` (`path`),
/// `mark-port` and `unmark-port` (`port`), `held`, `state` (`path`: its permissions without a claim), `open` (`path`,
/// `readOnly`: the held node's descriptor comes with the reply, `SCM_RIGHTS`). A reply carries `ok` and either the
/// operation's result under its name (`hold`, `release`, `results`, `openers`, `cut`, `triggered`, `held`, `state`)
/// or an `error` (``NodeError``). A
/// request of another version `v`, or one the helper cannot read, is answered with a `bad-request` error (its `id`
/// when it has one), and the connection stays open.
public enum NodeHelperProtocol {
    /// The version every line carries as `v`.
    public static let version = 1
    /// The longest request line the helper reads; a longer one ends the connection.
    public static let maximumRequestBytes = 64 << 10
    /// The longest reply line the link reads (a `held` of every node the helper may hold fits).
    public static let maximumReplyBytes = 32 << 20
}

/// One request line.
public struct NodeRequest: Sendable, Hashable, Codable {
    public enum Operation: String, Sendable, Hashable, Codable, CaseIterable {
        case hold, release, openers, cut, held, state
        case openForIO = "open"
        case releaseAll = "release-all"
        case markPort = "mark-port"
        case unmarkPort = "unmark-port"
    }

    public var v: Int = NodeHelperProtocol.version
    public var id: UInt64
    public var op: Operation
    public var path: String?
    public var holder: NodeHolder?
    public var port: String?
    /// `open`: read only (default: read and write).
    public var readOnly: Bool?

    public init(
        id: UInt64, op: Operation, path: String? = nil, holder: NodeHolder? = nil, port: String? = nil,
        readOnly: Bool? = nil
    ) {
        self.id = id
        self.op = op
        self.path = path
        self.holder = holder
        self.port = port
        self.readOnly = readOnly
    }

    /// A request line read: the request, or the reply that says why it cannot be served (`bad-request`).
    public enum Decoded: Sendable, Hashable {
        case request(NodeRequest)
        case refused(NodeReply)
    }

    private struct Envelope: Decodable {
        var v: Int?
        var id: UInt64?
        var op: String?
    }

    /// Reads a request line (without its newline).
    public static func decode(_ line: [UInt8]) -> Decoded {
        let data = Data(line)
        let envelope: Envelope
        do {
            envelope = try JSONDecoder().decode(Envelope.self, from: data)
        } catch {
            return .refused(
                .failure(id: nil, NodeError(.badRequest, "request", "line", "not a JSON object with v, id and op")))
        }
        func refuse(_ reason: String) -> Decoded {
            .refused(.failure(id: envelope.id, NodeError(.badRequest, "request", envelope.op ?? "?", reason)))
        }
        guard envelope.v == NodeHelperProtocol.version else {
            return refuse("version \(envelope.v.map(String.init) ?? "missing"), not \(NodeHelperProtocol.version)")
        }
        guard envelope.id != nil else { return refuse("no id") }
        guard let op = envelope.op, let operation = Operation(rawValue: op) else {
            return refuse("unknown operation (known: \(Operation.allCases.map(\.rawValue).joined(separator: ", ")))")
        }
        let request: NodeRequest
        do {
            request = try JSONDecoder().decode(NodeRequest.self, from: data)
        } catch {
            return refuse("malformed: \(error)")
        }
        switch operation {
        case .hold where request.path == nil || request.holder == nil: return refuse("hold needs path and holder")
        case .release, .openers, .cut, .openForIO, .state:
            if request.path == nil { return refuse("\(op) needs path") }
        case .markPort, .unmarkPort:
            if request.port == nil { return refuse("\(op) needs port") }
        default: break
        }
        return .request(request)
    }

    /// Performs the request on `control` and returns its reply.
    public func perform(on control: some NodeControl) -> NodeReply {
        let (reply, descriptor) = performPassing(on: control)
        descriptor?.close()
        return reply
    }

    /// Performs the request on `control` and returns its reply, and for `open` the descriptor to pass with it (the
    /// caller sends it, then closes it).
    public func performPassing(on control: some NodeControl) -> (reply: NodeReply, descriptor: FileDescriptor?) {
        var reply = NodeReply(id: id)
        var descriptor: FileDescriptor?
        do throws(NodeError) {
            switch op {
            case .openForIO:
                let readOnly = readOnly ?? false
                descriptor = try control.openForIO(path ?? "", readOnly: readOnly)
                reply.open = OpenOutcome(path: path ?? "", readOnly: readOnly)
            case .hold: reply.hold = try control.hold(path ?? "", holder: holder ?? NodeHolder(uid: 0, gids: []))
            case .release: reply.release = try control.release(path ?? "")
            case .releaseAll: reply.results = try control.releaseAll()
            case .openers: reply.openers = try control.openers(of: path ?? "")
            case .cut: reply.cut = try control.cut(path ?? "")
            case .markPort:
                try control.markPort(port ?? "")
                reply.triggered = []
            case .unmarkPort: reply.triggered = try control.unmarkPort(port ?? "")
            case .held: reply.held = try control.held()
            case .state: reply.state = try control.unclaimedState(of: path ?? "")
            }
        } catch {
            return (.failure(id: id, error), nil)
        }
        return (reply, descriptor)
    }

    /// The request as one line, newline included.
    public var line: [UInt8] { NodeReply.encodeLine(self) }
}

/// One reply line.
public struct NodeReply: Sendable, Hashable, Codable, LineReply {
    public var v: Int = NodeHelperProtocol.version
    public var id: UInt64?
    public var ok: Bool = true
    public var error: NodeError?
    public var hold: HoldOutcome?
    public var release: ReleaseOutcome?
    public var results: [ReleaseResult]?
    public var openers: [NodeOpener]?
    public var cut: CutOutcome?
    public var triggered: [String]?
    public var held: HeldState?
    public var open: OpenOutcome?
    public var state: NodeState?

    public init(id: UInt64?) { self.id = id }

    public static func failure(id: UInt64?, _ error: NodeError) -> NodeReply {
        var reply = NodeReply(id: id)
        reply.ok = false
        reply.error = error
        return reply
    }

    /// The reply as one line, newline included.
    public var line: [UInt8] { Self.encodeLine(self) }

    static func encodeLine(_ value: some Encodable) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // The values encoded here are plain structs of strings and numbers: encoding them cannot fail.
        guard let data = try? encoder.encode(value) else { preconditionFailure("a node message did not encode") }
        return Array(data) + [0x0A]
    }
}
