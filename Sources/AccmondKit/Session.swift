import AccmonCore
import AccmonSys

/// One client connection, owned by the broker loop.
///
/// A session starts unsubscribed: nothing is sent to it but replies until it subscribes.
final class Session {
    /// The daemon-wide session number, also its poller token.
    let number: UInt64
    let descriptor: FileDescriptor
    /// The peer's credentials at connect time, when the kernel gave them.
    let peer: PeerCredentials?
    var clientName = ""
    var protocolVersion = WireFormat.supportedVersions.upperBound
    var greeted = false
    /// The subscription's filter; `nil` while not subscribed.
    var subscription: AccessoryFilter?
    var framer = LineFramer()
    var outbound: OutboundQueue
    /// Whether the poller watches for writability (set while output waits).
    var watchingWritable = false

    init(number: UInt64, descriptor: FileDescriptor, peer: PeerCredentials?, outboundLimit: Int) {
        self.number = number
        self.descriptor = descriptor
        self.peer = peer
        self.outbound = OutboundQueue(limit: outboundLimit)
    }

    /// The id the protocol shows, such as `s-7`.
    var sessionID: String { "s-\(number)" }

    /// Log metadata naming the client.
    var metadata: [String: String] {
        var metadata = ["session": sessionID]
        if let peer {
            metadata["client.pid"] = String(peer.pid)
            metadata["client.uid"] = String(peer.uid)
        }
        if !clientName.isEmpty { metadata["client.name"] = clientName }
        return metadata
    }
}
