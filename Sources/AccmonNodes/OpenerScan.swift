import AccmonSys
import FoundationEssentials

/// Who finds the processes that have nodes open: ``LocalOpenerScanner`` (``ProcessScan`` in this process: accmond's
/// simulated nodes, tests), or ``OpenerScanLink`` to the scanner `accmon-nodes --scan-openers`, the one unit that
/// holds `CAP_SYS_PTRACE` and `CAP_DAC_READ_SEARCH` and can write nothing (the helper's).
public protocol OpenerScanner {
    /// The openers of each of `files` (their identity: file system, inode, device number, type).
    func scan(_ files: [FileStatus]) throws(NodeError) -> ProcessScan.Result
}

/// ``ProcessScan`` in this process: it sees what this process's privileges let it see.
public struct LocalOpenerScanner: OpenerScanner {
    public var timeLimit: Duration

    public init(timeLimit: Duration = ProcessScan.defaultTimeLimit) { self.timeLimit = timeLimit }

    public func scan(_ files: [FileStatus]) throws(NodeError) -> ProcessScan.Result {
        ProcessScan.openers(ofEach: files, timeLimit: timeLimit)
    }
}

/// The scanner's protocol: newline-delimited JSON over its Unix socket (`/run/accmon-nodes-scan.sock`), one request
/// per line, each answered by one reply with its `id`:
///
///     {"v":1,"id":1,"op":"scan","files":[{"fileSystem":5,"inode":812,"deviceNumber":48133,"characterDevice":true}]}
///     {"v":1,"id":1,"ok":true,"scan":{"openers":[[{"pid":4711,"uid":1000,"command":"minicom"}]],"complete":true}}
///
/// A file is named by its identity, not a path: the scanner opens no path of the caller's.
public enum OpenerScanProtocol {
    public static let version = 1
    /// At most this many files per request (the helper holds at most 4096 nodes).
    public static let maximumFiles = 4096
    public static let maximumRequestBytes = 1 << 20
    public static let maximumReplyBytes = 32 << 20
}

/// A file to find the openers of.
public struct ScannedFile: Sendable, Hashable, Codable {
    public var fileSystem: UInt64
    public var inode: UInt64
    public var deviceNumber: UInt64
    public var characterDevice: Bool

    public init(_ status: FileStatus) {
        fileSystem = status.fileSystem
        inode = status.inode
        deviceNumber = status.deviceNumber
        characterDevice = status.kind == .characterDevice
    }

    public var status: FileStatus {
        FileStatus(
            kind: characterDevice ? .characterDevice : .regular, permissions: 0, owner: 0, size: 0,
            fileSystem: fileSystem, inode: inode, deviceNumber: characterDevice ? deviceNumber : 0)
    }
}

public struct OpenerScanRequest: Sendable, Hashable, Codable {
    public var v = OpenerScanProtocol.version
    public var id: UInt64
    public var op = "scan"
    public var files: [ScannedFile]

    public init(id: UInt64, files: [ScannedFile]) {
        self.id = id
        self.files = files
    }

    /// A request line read: the request, or the reply that says why it is not one.
    public enum Decoded: Sendable, Hashable {
        case request(OpenerScanRequest)
        case refused(OpenerScanReply)
    }

    /// Reads a request line (without its newline).
    public static func decode(_ line: [UInt8]) -> Decoded {
        struct Envelope: Decodable {
            var v: Int?
            var id: UInt64?
            var op: String?
        }
        func refuse(_ id: UInt64?, _ reason: String) -> Decoded {
            .refused(.failure(id: id, NodeError(.badRequest, "request", "scan", reason)))
        }
        guard let envelope = try? JSONDecoder().decode(Envelope.self, from: Data(line)) else {  // try?: said below
            return refuse(nil, "not a JSON object with v, id and op")
        }
        guard envelope.v == OpenerScanProtocol.version else {
            return refuse(envelope.id, "version \(envelope.v.map(String.init) ?? "missing"), not 1")
        }
        guard let id = envelope.id, envelope.op == "scan" else { return refuse(envelope.id, "needs an id and op scan") }
        let request: OpenerScanRequest
        do {
            request = try JSONDecoder().decode(OpenerScanRequest.self, from: Data(line))
        } catch {
            return refuse(id, "malformed: \(error)")
        }
        guard request.files.count <= OpenerScanProtocol.maximumFiles else {
            return refuse(id, "more than \(OpenerScanProtocol.maximumFiles) files")
        }
        return .request(request)
    }

    public var line: [UInt8] { NodeReply.encodeLine(self) }
}

public struct OpenerScanReply: Sendable, Hashable, Codable, LineReply {
    public var v = OpenerScanProtocol.version
    public var id: UInt64?
    public var ok = true
    public var error: NodeError?
    public var scan: ProcessScan.Result?

    public init(id: UInt64?, scan: ProcessScan.Result) {
        self.id = id
        self.scan = scan
    }

    public static func failure(id: UInt64?, _ error: NodeError) -> OpenerScanReply {
        var reply = OpenerScanReply(id: id, scan: ProcessScan.Result(openers: [], complete: false))
        reply.ok = false
        reply.error = error
        reply.scan = Optional.none
        return reply
    }

    public var line: [UInt8] { NodeReply.encodeLine(self) }
}

/// The helper's side of the opener scanner: a blocking client of its socket, one request at a time.
///
/// - Important: not thread-safe, and every call blocks up to its timeout: the keeper's thread only.
public final class OpenerScanLink: OpenerScanner {
    private let link: LineLink
    private var nextID: UInt64 = 1

    /// - Parameter timeout: longer than the scanner's own time limit, which it stops at.
    public init(socketPath: String, timeout: Duration = .seconds(5)) {
        link = LineLink(
            socketPath: socketPath, timeout: timeout, peer: "accmon-nodes --scan-openers",
            maximumReplyBytes: OpenerScanProtocol.maximumReplyBytes)
    }

    public func scan(_ files: [FileStatus]) throws(NodeError) -> ProcessScan.Result {
        let request = OpenerScanRequest(id: nextID, files: files.map(ScannedFile.init))
        nextID += 1
        let reply = try link.call(
            request.line, id: request.id, version: OpenerScanProtocol.version, as: OpenerScanReply.self)
        guard reply.ok, let scan = reply.scan, scan.openers.count == files.count else {
            throw reply.error ?? link.unavailable("a reply without the openers of every file")
        }
        return scan
    }
}
