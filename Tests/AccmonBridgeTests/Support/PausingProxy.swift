import AccmonTestSupport
import Foundation
import Glibc
import Synchronization

/// A TCP proxy on a free local port to a broker's port, which stops passing the broker's bytes to the client once the
/// client sent a given string (a SUBSCRIBE's filter): the broker's sends to that client then block, as they do for a
/// client that stopped reading, while the client waits. ``resume()`` passes them on again. Only the first connection
/// that sends the string is held; later ones pass freely. ``holdClientBytes()`` stops passing the clients' bytes
/// instead, and ``dropConnections()`` closes the connections without passing what was held: a link that lost what
/// was in flight. ``stop()`` closes it and every connection.
final class PausingProxy: Sendable {
    let port: Int
    private let listener: Int32
    private let trigger: [UInt8]?
    private let state = Mutex(State())

    private struct State {
        var armed = true
        var paused = false
        var clientBytesHeld = false
        var stopped = false
        var descriptors: [Int32] = []
    }

    init(to target: Int, pausingAfter trigger: String? = nil) throws {
        self.trigger = trigger.map { Array($0.utf8) }
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.listener = listener
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw -> Int32 in
                guard bind(listener, raw, length) == 0, listen(listener, 16) == 0 else { return -1 }
                return getsockname(listener, raw, &length)
            }
        }
        guard bound == 0 else { throw Binaries.LocateError(description: "proxy: \(String(cString: strerror(errno)))") }
        port = Int(UInt16(bigEndian: address.sin_port))
        Thread.detachNewThread { [self] in
            while true {
                let client = accept(listener, nil, nil)
                guard client >= 0 else { return }  // closed by stop()
                let broker = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
                guard canConnect(broker, port: target) else {
                    close(client)
                    close(broker)
                    continue
                }
                state.withLock { $0.descriptors += [client, broker] }
                Thread.detachNewThread { self.pump(from: client, to: broker, watching: true) }
                Thread.detachNewThread { self.pump(from: broker, to: client, watching: false) }
            }
        }
    }

    /// Passes the broker's bytes on again.
    func resume() { state.withLock { $0.paused = false } }

    /// Stops passing the clients' bytes to the broker (they wait, unread).
    func holdClientBytes() { state.withLock { $0.clientBytesHeld = true } }

    /// Closes every connection without passing on what the proxy holds; new connections pass freely.
    func dropConnections() {
        let descriptors = state.withLock { state in
            defer {
                state.descriptors = []
                state.clientBytesHeld = false
                state.paused = false
            }
            return state.descriptors
        }
        for descriptor in descriptors { shutdown(descriptor, Int32(SHUT_RDWR)) }
    }

    /// Whether the proxy holds the broker's bytes now.
    var isPaused: Bool { state.withLock { $0.paused } }

    /// Copies bytes until either side closes; the broker's side waits while paused.
    private func pump(from source: Int32, to sink: Int32, watching: Bool) {
        var buffer = [UInt8](repeating: 0, count: 65536)
        var seen: [UInt8] = []
        while true {
            let count = read(source, &buffer, buffer.count)
            if count <= 0 { break }
            // Held: what was read waits here; dropped meanwhile: it is not passed on.
            while state.withLock({ ($0.paused && !watching || $0.clientBytesHeld && watching) && !$0.stopped }) {
                usleep(10_000)
            }
            if !state.withLock({ $0.descriptors.contains(source) }) { break }
            var sent = 0
            while sent < count {
                let written = buffer.withUnsafeBytes { write(sink, $0.baseAddress! + sent, count - sent) }
                if written <= 0 { break }
                sent += written
            }
            if watching, let trigger {
                seen = Array((seen + buffer[0..<count]).suffix(trigger.count + count))
                if seen.firstRange(of: trigger) != nil {
                    state.withLock { state in
                        if state.armed {
                            state.armed = false
                            state.paused = true
                        }
                    }
                }
            }
        }
        shutdown(sink, Int32(SHUT_WR))
    }

    /// Closes the listener and every connection; the proxy's threads end.
    func stop() {
        let descriptors = state.withLock { state in
            state.stopped = true
            return state.descriptors
        }
        for descriptor in descriptors { shutdown(descriptor, Int32(SHUT_RDWR)) }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }
}

/// Connects `descriptor` to 127.0.0.1:`port`.
private func canConnect(_ descriptor: Int32, port: Int) -> Bool {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    return withUnsafePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
        }
    }
}
