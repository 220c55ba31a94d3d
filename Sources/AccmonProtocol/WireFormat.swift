/// Constants of the wire protocol: newline-delimited JSON over a Unix stream socket.
public enum WireFormat {
    /// The protocol versions this build speaks, oldest first.
    public static let supportedVersions: ClosedRange<Int> = 1...1
    /// The longest line either side accepts, in bytes, newline excluded.
    public static let maximumLineLength = 65_536
    /// The default socket path; clients honour the `ACCMON_SOCKET` environment variable first.
    public static let defaultSocketPath = "/run/accmon/accmon.sock"
    /// The environment variable that overrides the socket path for clients.
    public static let socketEnvironmentVariable = "ACCMON_SOCKET"

    /// Picks the highest version both sides speak, or `nil`.
    public static func negotiate(clientVersions: [Int]) -> Int? {
        clientVersions.filter { supportedVersions.contains($0) }.max()
    }
}

/// Splits a byte stream into lines, enforcing ``WireFormat/maximumLineLength``.
///
/// An over-long line is reported once and skipped up to its newline, so the stream resynchronises.
public struct LineFramer: Sendable {
    /// One unit the framer yields.
    public enum Item: Sendable, Hashable {
        /// A complete line without its newline.
        case line([UInt8])
        /// A line that exceeded the limit; its bytes were dropped.
        case overlong
    }

    private var pending: [UInt8] = []
    private var discarding = false
    private let limit: Int

    /// Creates a framer with the given limit.
    public init(limit: Int = WireFormat.maximumLineLength) { self.limit = limit }

    /// Appends received bytes and returns the items now complete.
    public mutating func append(_ bytes: some Collection<UInt8>) -> [Item] {
        var items: [Item] = []
        append(bytes, to: &items)
        return items
    }

    /// Appends received bytes, and the items now complete to `items`: a reader that queues its lines gives its queue,
    /// and no array is made per read.
    public mutating func append(_ bytes: some Collection<UInt8>, to items: inout [Item]) {
        append(bytes, toSink: &items)
    }

    /// Appends received bytes, and the lines now complete to `queue` (their bytes in one buffer).
    public mutating func append(_ bytes: some Collection<UInt8>, to queue: inout LineQueue) {
        append(bytes, toSink: &queue)
    }

    private mutating func append(_ bytes: some Collection<UInt8>, toSink items: inout some LineSink) {
        // Framing runs on every byte received: scan contiguous memory (an array slice from a read buffer, in practice)
        // rather than through the generic collection, which is not specialized across modules and costs as much as
        // decoding the JSON.
        if bytes.withContiguousStorageIfAvailable({ append(contiguous: $0, to: &items) }) == nil {
            Array(bytes).withUnsafeBufferPointer { append(contiguous: $0, to: &items) }
        }
    }

    private mutating func append(contiguous bytes: UnsafeBufferPointer<UInt8>, to items: inout some LineSink) {
        var start = 0
        while start != bytes.count {
            let newline = ByteScan.firstIndex(of: 0x0A, in: bytes, from: start)
            let chunk = UnsafeBufferPointer(rebasing: bytes[start..<(newline ?? bytes.count)])
            if discarding {
                if newline != nil { discarding = false }
            } else if pending.count + chunk.count > limit {
                pending.removeAll(keepingCapacity: false)
                items.appendOverlong()
                discarding = newline == nil
            } else if newline != nil && pending.isEmpty {
                items.appendLine(chunk)  // the usual case, a whole line in one read: copied once
            } else {
                pending.append(contentsOf: chunk)
                if newline != nil {
                    pending.withUnsafeBufferPointer { items.appendLine($0) }
                    pending = []
                }
            }
            guard let newline else { break }
            start = newline + 1
        }
    }

    /// Bytes buffered for a line not yet complete.
    public var bufferedCount: Int { pending.count }
}

/// Where ``LineFramer`` puts the items it completes.
protocol LineSink {
    mutating func appendLine(_ line: UnsafeBufferPointer<UInt8>)
    mutating func appendOverlong()
}

extension Array: LineSink where Element == LineFramer.Item {
    mutating func appendLine(_ line: UnsafeBufferPointer<UInt8>) { append(.line([UInt8](line))) }
    mutating func appendOverlong() { append(.overlong) }
}
