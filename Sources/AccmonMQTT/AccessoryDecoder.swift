import AccmonProtocol
import Dispatch

/// Decodes the accessory objects of hosts read whole on a thread of its own, while the reader reads the next windows
/// (FleetSession+Decoding.swift).
final class AccessoryDecoder: @unchecked Sendable {
    /// One host's accessories, and the connection ids of its payloads that were not accessory objects.
    struct Host: Sendable {
        var accessories: [UInt64: Accessory] = [:]
        var unreadable: [UInt64] = []
    }

    /// Given each host decoded, on the decoder's thread.
    private let handOver: (@Sendable (FleetHost) -> Void)?
    private let queue = DispatchQueue(label: "accmon-fleet-decode")
    /// The hosts decoded, by level; touched only on `queue`.
    private var decoded: [String: Host] = [:]

    init(handOver: (@Sendable (FleetHost) -> Void)?) {
        self.handOver = handOver
    }

    /// Decodes the payloads at `payloads` (ranges of `bytes`, by connection id) as the accessories of the host at
    /// `level`, replacing what an earlier call gave for it; hands over `host` with them. Returns at once.
    func decode(level: String, host: FleetHost?, payloads: [UInt64: Range<Int>], in bytes: [UInt8]) {
        queue.async { [self] in
            var decoded = Host(accessories: Dictionary(minimumCapacity: payloads.count))
            bytes.withUnsafeBufferPointer { bytes in
                for (connection, range) in payloads {
                    if let accessory = FleetState.accessory(UnsafeBufferPointer(rebasing: bytes[range])) {
                        decoded.accessories[connection] = accessory
                    } else {
                        decoded.unreadable.append(connection)
                    }
                }
            }
            self.decoded[level] = decoded
            guard let handOver else { return }
            // As FleetState.setAccessories makes it.
            guard var host = host ?? (decoded.accessories.isEmpty ? nil : FleetHost(level: level)) else { return }
            host.accessories = decoded.accessories
            handOver(host)
        }
    }

    /// Waits until every host handed over is decoded; returns them and forgets them.
    func finish() -> [String: Host] {
        queue.sync {
            defer { decoded = [:] }
            return decoded
        }
    }
}
