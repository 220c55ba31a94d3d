public import AccmonProtocol
import FoundationEssentials

/// One host as the fleet's retained topics show it.
public struct FleetHost: Sendable, Hashable {
    /// The host's topic level, as it appears in topics (percent-encoded).
    public var level: String
    /// The host name (the level decoded).
    public var name: String
    /// Its status message, `nil` when there is none (or it was unreadable).
    public var status: HostStatus?
    /// Its connected accessories, by the connection id of their topics.
    public var accessories: [UInt64: Accessory] = [:]

    /// `online`, `offline`, or `unknown` for a host with no status message.
    public var stateName: String { status?.state.rawValue ?? "unknown" }

    /// The accessories in connection order.
    public var sortedAccessories: [Accessory] { accessories.keys.sorted().map { accessories[$0]! } }
}

/// A change of the fleet's state, as a watcher sees it.
public enum FleetChange: Sendable, Hashable {
    case connected(host: String, Accessory)
    case disconnected(host: String, Accessory)
    /// A host's status changed (`nil`: its status message was deleted); without its counts.
    case status(host: String, HostStatus?)
}

/// The fleet's state, folded from retained messages on its topics. Pure: no I/O.
public struct FleetState: Sendable, Hashable {
    public let topics: FleetTopics
    /// The hosts by topic level.
    public private(set) var hosts: [String: FleetHost] = [:]
    /// How many messages on fleet topics could not be read (not a status, not an accessory object).
    public private(set) var unreadable = 0

    public init(topics: FleetTopics) { self.topics = topics }

    /// The hosts sorted by name.
    public var sortedHosts: [FleetHost] { hosts.values.sorted { ($0.name, $0.level) < ($1.name, $1.level) } }

    /// Applies one message (an empty payload deletes the retained message); returns what changed.
    public mutating func apply(topic: String, payload: [UInt8]) -> [FleetChange] {
        guard let parsed = topics.parse(topic) else { return [] }
        return apply(parsed, payload: payload)
    }

    /// Applies one message on a topic already parsed; returns what changed. A status that differs only in its counts
    /// is kept without a change: watchers are not told about counts.
    public mutating func apply(_ topic: FleetTopics.Topic, payload: [UInt8]) -> [FleetChange] {
        switch topic {
        case .status(let level):
            let status = payload.isEmpty ? nil : HostStatus.decode(payload)
            if !payload.isEmpty && status == nil { unreadable += 1 }
            if hosts[level] == nil { hosts[level] = FleetHost(level: level, name: FleetTopics.decodeLevel(level)) }
            let previous = hosts[level]!.status
            guard previous != status else { return [] }
            hosts[level]!.status = status
            guard previous?.withoutCounts != status?.withoutCounts else { return [] }
            return [.status(host: hosts[level]!.name, status?.withoutCounts)]
        case .accessory(let level, _, let connection):
            let accessory = payload.isEmpty ? nil : Self.accessory(payload)
            if !payload.isEmpty && accessory == nil { unreadable += 1 }
            guard accessory != nil || hosts[level] != nil else { return [] }
            // One lookup of the host: changed in place.
            return Self.set(
                connection, to: accessory,
                in: &hosts[level, default: FleetHost(level: level, name: FleetTopics.decodeLevel(level))])
        case .indexEntry:
            return []
        }
    }

    /// Sets one connection of a host; returns what changed.
    private static func set(_ connection: UInt64, to accessory: Accessory?, in host: inout FleetHost) -> [FleetChange] {
        let previous =
            if let accessory {
                host.accessories.updateValue(accessory, forKey: connection)
            } else {
                host.accessories.removeValue(forKey: connection)
            }
        switch (previous, accessory) {
        case (nil, nil): return []
        case (let previous?, let accessory?) where previous == accessory: return []
        default:
            var changes: [FleetChange] = []
            if let previous { changes.append(.disconnected(host: host.name, previous)) }
            if let accessory { changes.append(.connected(host: host.name, accessory)) }
            return changes
        }
    }

    /// Replaces what is known of one host (`nil`: forgets it), as a fresh read found it; returns what a watcher must
    /// be told, as ``changes(to:)`` would.
    public mutating func replaceHost(level: String, with host: FleetHost?) -> [FleetChange] {
        var old = FleetState(topics: topics)
        var new = FleetState(topics: topics)
        old.hosts[level] = hosts[level]
        new.hosts[level] = host
        hosts[level] = host
        return old.changes(to: new)
    }

    /// Sets what is known of one host (`nil`: forgets it), without working out what changed.
    public mutating func setHost(level: String, to host: FleetHost?) {
        hosts[level] = host
    }

    /// What a watcher who saw this state must be told so that it sees `newer`: disconnections first, then status
    /// changes and connections.
    public func changes(to newer: FleetState) -> [FleetChange] {
        var gone: [FleetChange] = []
        var came: [FleetChange] = []
        for level in Set(hosts.keys).union(newer.hosts.keys).sorted() {
            let old = hosts[level]
            let new = newer.hosts[level]
            let name = new?.name ?? old?.name ?? FleetTopics.decodeLevel(level)
            for connection in (old?.accessories.keys.sorted() ?? []) {
                let before = old!.accessories[connection]!
                if new?.accessories[connection] != before { gone.append(.disconnected(host: name, before)) }
            }
            if old?.status?.withoutCounts != new?.status?.withoutCounts {
                came.append(.status(host: name, new?.status?.withoutCounts))
            }
            for connection in (new?.accessories.keys.sorted() ?? []) {
                let after = new!.accessories[connection]!
                if old?.accessories[connection] != after { came.append(.connected(host: name, after)) }
            }
        }
        return gone + came
    }

    /// The accessory object in `payload`, or `nil` when it is not one: the bridge's canonical form read directly,
    /// anything else through JSONDecoder.
    static func accessory(_ payload: [UInt8]) -> Accessory? {
        if let accessory = EventLineReader.accessory(payload) { return accessory }
        return try? JSONDecoder().decode(Accessory.self, from: Data(payload))  // try?: not an accessory is nil
    }
}
