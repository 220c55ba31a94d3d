import AccmonClient
import AccmonDevices
import AccmonProtocol
import AccmonSys
import AccmonTestSupport
import Foundation
import Glibc
import Synchronization
import Testing

@testable import AccmonLogging
@testable import AccmondKit

/// A datagram socket standing in for systemd's notification socket (`NOTIFY_SOCKET`) or the journal's socket: a
/// thread of its own reads every datagram accmond sends as it comes (as systemd would: a full queue would block the
/// sender), for assertions.
final class DatagramCollector: Sendable {
    let path: String
    private let descriptor: Int32
    private let received = Mutex<[(at: UInt64, text: String)]>([])
    private let closing = Atomic<Bool>(false)
    private let readerDone: BlockingSignal

    init(path: String) throws {
        self.path = path
        let descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        self.descriptor = descriptor
        guard descriptor >= 0 else { throw Binaries.LocateError(description: "socket: \(Errno.current)") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard bound == 0 else { throw Binaries.LocateError(description: "bind: \(path): \(Errno.current)") }
        // A receive timeout lets the reader notice `close()`.
        var timeout = timeval(tv_sec: 0, tv_usec: 20_000)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        readerDone = try BlockingSignal()
        try startThread(name: "test-collector") { [self] in
            var buffer = [UInt8](repeating: 0, count: 1 << 16)
            while !closing.load(ordering: .relaxed) {
                let count = recv(descriptor, &buffer, buffer.count, 0)
                if count > 0 {
                    let text = String(decoding: buffer[0..<count], as: UTF8.self)
                    let now = monotonicNanoseconds()
                    received.withLock { $0.append((now, text)) }
                }
            }
            readerDone.signal()
        }
    }

    deinit {
        closing.store(true, ordering: .relaxed)
        readerDone.wait()
        Glibc.close(descriptor)
    }

    /// Every datagram received so far, in order.
    var messages: [String] { received.withLock { $0.map(\.text) } }

    /// Every datagram received so far with its arrival time (monotonic nanoseconds).
    var timedMessages: [(at: UInt64, text: String)] { received.withLock { $0 } }

    /// Waits until some datagram satisfies `condition`; returns it, or `nil` after `timeout`.
    func waitFor(timeout: Duration = .seconds(10), _ condition: @escaping (String) -> Bool) async -> String? {
        var found: String?
        _ = await eventually(timeout: timeout, interval: .milliseconds(2)) {
            found = messages.first(where: condition)
            return found != nil
        }
        return found
    }
}

/// The assignments of one sd_notify datagram (`READY=1\nSTATUS=…`), or of one journal entry in its simple form.
func assignments(_ datagram: String) -> [String: String] {
    var fields: [String: String] = [:]
    for line in datagram.split(separator: "\n") {
        guard let equals = line.firstIndex(of: "=") else { continue }
        fields[String(line[..<equals])] = String(line[line.index(after: equals)...])
    }
    return fields
}
