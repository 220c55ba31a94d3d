import AccmonMQTT
import Synchronization

/// What the bridge answers a reader's census with (docs/MQTT.md §5), set by the bridge's loop and read by the claim
/// gateway's, which answers on its own connection: a census request never waits behind a burst of events, and the
/// event connection carries no subscription but its own topics.
public final class CensusBoard: Sendable {
    struct Entry: Sendable, Hashable {
        /// The online status as last published, with its count; `nil` while the broker is not synchronized.
        var status: HostStatus?
        var accessories = 0
        var digest = ""
    }

    private let entry = Mutex(Entry())

    public init() {}

    func set(_ new: Entry) { entry.withLock { $0 = new } }

    /// The answer for `host`, when the bridge is synchronized with the broker.
    func answer(host: String) -> Census.Answer? {
        let current = entry.withLock { $0 }
        guard let status = current.status else { return nil }
        return Census.Answer(host: host, accessories: current.accessories, digest: current.digest, status: status)
    }
}
