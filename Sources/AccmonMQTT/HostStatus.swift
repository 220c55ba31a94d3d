import FoundationEssentials

/// What `<prefix>/<host>/status` holds (retained): whether the host's bridge is online, and which run of which
/// machine said so.
///
/// The bridge publishes `online` when it connects, and `offline` with `reason` `stopped` when it stops; the broker
/// publishes the bridge's will, `offline` with `reason` `connection-lost`, when the bridge's connection dies without a
/// goodbye. The machine id tells apart two machines that publish under the same host name; the run id tells a late
/// will of an earlier run from the word of the run that is live.
///
/// `retained` counts the host's retained topics by family (`{"accessories": 12}`): the bridge keeps it exact as
/// accessories come and go, so that a reader can size its reads and tell a message the broker dropped. The will
/// carries no count (it is fixed when the bridge connects), nor does the status of a bridge older than the count:
/// readers then read that host the slower safe way. Readers ignore fields and families they do not know.
///
/// `lease` (seconds) says that an online status is a lease: published with that MQTT 5 message expiry and renewed
/// before it runs out, so that the broker deletes it when the bridge, or the broker between it and the reader, is gone
/// without a will. A reader shows a host whose lease ran out as `stale`, never as online (docs/MQTT.md §3).
public struct HostStatus: Codable, Sendable, Hashable {
    public enum State: String, Codable, Sendable, Hashable {
        case online, offline
    }

    public var state: State
    /// The host name the bridge publishes under.
    public var host: String
    /// The machine's id (`/etc/machine-id`).
    public var machineID: String
    /// A random id of the bridge's run (process), new at every start.
    public var runID: String
    /// When the run started, in seconds since the epoch.
    public var since: Double
    /// The bridge's version.
    public var bridge: String
    /// For `offline`: `stopped` (a clean stop) or `connection-lost` (the will).
    public var reason: String?
    /// The number of the host's retained topics of each family (``FleetTopics/RetainedFamily``), by its name; `nil`
    /// when the publisher does not count them.
    public var retained: [String: Int]?
    /// For `online`: the seconds the status lives unless renewed (its MQTT 5 message expiry); `nil` for a status
    /// that is not a lease (offline, or a bridge older than the lease).
    public var lease: Int?

    public init(
        state: State, host: String, machineID: String, runID: String, since: Double, bridge: String,
        reason: String? = nil, retained: [String: Int]? = nil, lease: Int? = nil
    ) {
        self.state = state
        self.host = host
        self.machineID = machineID
        self.runID = runID
        self.since = since
        self.bridge = bridge
        self.reason = reason
        self.retained = retained
        self.lease = lease
    }

    /// The same run's status in another state (with the same counts); an offline status is no lease.
    public func with(_ state: State, reason: String? = nil) -> HostStatus {
        var copy = self
        copy.state = state
        copy.reason = reason
        if state == .offline { copy.lease = nil }
        return copy
    }

    /// The lease of an online status, when it is one (a positive number of seconds).
    public var leaseSeconds: Int? {
        guard state == .online, let lease, lease > 0 else { return nil }
        return lease
    }

    /// The number of the host's retained topics of `family`, when the status says it.
    public func retainedCount(_ family: FleetTopics.RetainedFamily) -> Int? {
        retained?[family.rawValue].flatMap { $0 >= 0 ? $0 : nil }
    }

    /// The status without its counts: what a watcher is told about (a count changes with every accessory).
    public var withoutCounts: HostStatus {
        var copy = self
        copy.retained = nil
        return copy
    }

    /// The retained payload: compact JSON with sorted keys.
    public var payload: [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        do {
            return Array(try encoder.encode(self))
        } catch {
            preconditionFailure("HostStatus encoding failed: \(error)")  // strings and a number: cannot fail
        }
    }

    /// The status in `payload`, or `nil` when it is not one (someone else wrote the topic): the bridge's form read
    /// directly (``HostStatusReader``), anything else through JSONDecoder.
    public static func decode(_ payload: [UInt8]) -> HostStatus? {
        if let status = HostStatusReader.status(payload) { return status }
        // try?: not a status is nil, by contract.
        return try? JSONDecoder().decode(HostStatus.self, from: Data(payload))
    }
}
