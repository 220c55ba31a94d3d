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
    /// The claims on its connections, by the connection id of their claim topics (also of connections not shown:
    /// a claim topic may come before its accessory's, or outlive it for a moment).
    public var claims: [UInt64: FleetClaim] = [:]
    /// When its online status's lease runs out unless renewed, on the reader's monotonic clock (nanoseconds): when
    /// the status arrived plus what was left of its message expiry (or its whole lease, when the broker gave none);
    /// `nil` for a status that is no lease, or a read that does not follow leases.
    public var leaseEnds: UInt64?
    /// Whether its lease ran out unrenewed: its bridge, or the broker between it and this reader, is gone without a
    /// will. The last status stays known, but the host is not shown online.
    public var stale = false
    /// The connections shown that a read of the host again did not find, while the host's count says it holds more
    /// than the read found: kept, not shown as gone, until the broker deletes their topics or the host's count says
    /// they are gone (docs/MQTT.md §5).
    public var unconfirmed: Set<UInt64> = []

    /// `online`, `offline`, `stale` (an online status whose lease ran out), or `unknown` for a host with no status
    /// message (none published, or the broker expired it).
    public var stateName: String { stale ? "stale" : status?.state.rawValue ?? "unknown" }

    /// The accessories in connection order.
    public var sortedAccessories: [Accessory] { accessories.keys.sorted().map { accessories[$0]! } }

    /// The claim on an accessory shown, when it is claimed.
    public func claim(of accessory: Accessory) -> FleetClaim? { claims[accessory.connectionID.rawValue] }
}

extension FleetHost {
    /// A host known by its topic level only, with nothing yet.
    public init(level: String) {
        self.init(level: level, name: FleetTopics.decodeLevel(level))
    }
}

/// A change of the fleet's state, as a watcher sees it.
///
/// An accessory whose claim changed (taken, released, another holder) is a disconnection of the accessory with its
/// old claim and a connection of it with its new one, one after the other in the same list of changes.
public enum FleetChange: Sendable, Hashable {
    /// An accessory shown, with its claim when it is claimed.
    case connected(host: String, Accessory, claim: FleetClaim? = nil)
    case disconnected(host: String, Accessory, claim: FleetClaim? = nil)
    /// A host's status changed (`nil`: its status message was deleted); without its counts. `stale`: its lease ran
    /// out (the status is the last one known).
    case status(host: String, HostStatus?, stale: Bool = false)
    /// An accessory shown that a read of its host again did not find: perhaps gone, not confirmed (docs/MQTT.md §5).
    case unconfirmed(host: String, Accessory)
    /// An unconfirmed accessory found again.
    case confirmed(host: String, Accessory)
}

/// The fleet's state, folded from retained messages on its topics. Pure: no I/O.
public struct FleetState: Sendable, Hashable {
    public let topics: FleetTopics
    /// The hosts by topic level.
    public private(set) var hosts: [String: FleetHost] = [:]
    /// How many messages on fleet topics could not be read (not a status, an accessory object or a claim).
    public private(set) var unreadable = 0

    public init(topics: FleetTopics) { self.topics = topics }

    /// The hosts sorted by name.
    public var sortedHosts: [FleetHost] { hosts.values.sorted { ($0.name, $0.level) < ($1.name, $1.level) } }

    /// Applies one message (an empty payload deletes the retained message); returns what changed.
    public mutating func apply(topic: String, payload: [UInt8]) -> [FleetChange] {
        guard let parsed = topics.parse(topic) else { return [] }
        return apply(parsed, payload: payload)
    }

    /// Applies one message on a topic already parsed; returns what changed (nothing unless `reporting`: a read that
    /// tells no watcher skips making the changes). A status that differs only in its counts is kept without a change:
    /// watchers are not told about counts.
    ///
    /// - Parameters:
    ///   - expiry: A status message's MQTT 5 message expiry as the broker delivered it: what is left of its lease.
    ///   - now: When the message arrived, on the monotonic clock; `nil` for a read that does not follow leases.
    public mutating func apply(
        _ topic: FleetTopics.Topic, payload: [UInt8], reporting: Bool = true, expiry: UInt32? = nil,
        at now: UInt64? = nil
    ) -> [FleetChange] {
        switch topic {
        case .status(let level):
            let status = payload.isEmpty ? nil : HostStatus.decode(payload)
            if !payload.isEmpty && status == nil { unreadable += 1 }
            if hosts[level] == nil { hosts[level] = FleetHost(level: level) }
            let previous = hosts[level]!.status
            let wasStale = hosts[level]!.stale
            hosts[level]!.leaseEnds = now.flatMap { now in
                status?.leaseSeconds.map { now + UInt64(expiry.map(Int.init) ?? $0) * 1_000_000_000 }
            }
            hosts[level]!.stale = false
            guard previous != status || wasStale else { return [] }
            hosts[level]!.status = status
            // The host's count says the unconfirmed accessories are gone: they are.
            let gone = Self.settleUnconfirmed(in: &hosts[level]!, reporting: reporting)
            guard reporting, previous?.withoutCounts != status?.withoutCounts || wasStale else { return gone }
            return gone + [.status(host: hosts[level]!.name, status?.withoutCounts)]
        case .accessory(let level, _, let connection):
            let accessory = payload.isEmpty ? nil : Self.accessory(payload)
            if !payload.isEmpty && accessory == nil { unreadable += 1 }
            guard accessory != nil || hosts[level] != nil else { return [] }
            // One lookup of the host: changed in place.
            return Self.set(
                connection, to: accessory,
                in: &hosts[level, default: FleetHost(level: level)],
                reporting: reporting)
        case .claim(let level, _, let connection):
            let claim = payload.isEmpty ? nil : FleetClaim.decode(payload)
            if !payload.isEmpty && claim == nil { unreadable += 1 }
            guard claim != nil || hosts[level] != nil else { return [] }
            return Self.setClaim(
                connection, to: claim,
                in: &hosts[level, default: FleetHost(level: level)],
                reporting: reporting)
        case .indexEntry:
            return []
        }
    }

    /// Sets one connection of a host; returns what changed.
    private static func set(
        _ connection: UInt64, to accessory: Accessory?, in host: inout FleetHost, reporting: Bool
    ) -> [FleetChange] {
        let previous =
            if let accessory {
                host.accessories.updateValue(accessory, forKey: connection)
            } else {
                host.accessories.removeValue(forKey: connection)
            }
        let wasUnconfirmed = host.unconfirmed.remove(connection) != nil
        guard reporting else { return [] }
        switch (previous, accessory) {
        case (nil, nil): return []
        case (let previous?, let accessory?) where previous == accessory:
            return wasUnconfirmed ? [.confirmed(host: host.name, accessory)] : []
        default:
            let claim = host.claims[connection]
            var changes: [FleetChange] = []
            if let previous { changes.append(.disconnected(host: host.name, previous, claim: claim)) }
            if let accessory { changes.append(.connected(host: host.name, accessory, claim: claim)) }
            return changes
        }
    }

    /// Sets the claim on one connection of a host; returns what changed: for an accessory shown, its disconnection
    /// with the old claim and its connection with the new one.
    private static func setClaim(
        _ connection: UInt64, to claim: FleetClaim?, in host: inout FleetHost, reporting: Bool
    ) -> [FleetChange] {
        let previous =
            if let claim {
                host.claims.updateValue(claim, forKey: connection)
            } else {
                host.claims.removeValue(forKey: connection)
            }
        guard reporting, previous != claim, let accessory = host.accessories[connection] else { return [] }
        return [
            .disconnected(host: host.name, accessory, claim: previous),
            .connected(host: host.name, accessory, claim: claim),
        ]
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

    /// Takes a read of one host again while following: as ``replaceHost(level:with:)``, except that an accessory
    /// shown that the read did not find stays, ``FleetHost/unconfirmed``, when the host's count (its status's, or the
    /// one shown when the read found no status) says it holds more than the read found: a cluster node that does not
    /// serve every retained message, or a dropped read, is no disconnection (docs/MQTT.md §5). A status the read did
    /// not find is kept while its lease runs (its deletion, or the lease's end, says more).
    public mutating func takeRead(level: String, read: FleetHost?) -> [FleetChange] {
        guard let shown = hosts[level] else { return replaceHost(level: level, with: read) }
        var merged = read ?? FleetHost(level: level)
        if merged.status == nil, shown.status != nil, !shown.stale {
            merged.status = shown.status
            merged.leaseEnds = shown.leaseEnds
        }
        let found = read?.accessories.count ?? 0
        let whole = merged.status?.retainedCount(.accessories).map { found >= $0 } ?? (read != nil)
        var newlyUnconfirmed: [Accessory] = []
        if !whole {
            for (connection, accessory) in shown.accessories where merged.accessories[connection] == nil {
                merged.accessories[connection] = accessory
                if merged.claims[connection] == nil { merged.claims[connection] = shown.claims[connection] }
                merged.unconfirmed.insert(connection)
                if !shown.unconfirmed.contains(connection) { newlyUnconfirmed.append(accessory) }
            }
        }
        let foundAgain = shown.unconfirmed.filter { read?.accessories[$0] != nil }.sorted()
        var changes = replaceHost(level: level, with: merged)
        changes += foundAgain.compactMap { merged.accessories[$0].map { .confirmed(host: merged.name, $0) } }
        changes += newlyUnconfirmed.sorted { $0.connectionID.rawValue < $1.connectionID.rawValue }.map {
            .unconfirmed(host: merged.name, $0)
        }
        return changes
    }

    /// Drops a host's unconfirmed accessories once its status counts exactly the others: the host says they are gone.
    private static func settleUnconfirmed(in host: inout FleetHost, reporting: Bool) -> [FleetChange] {
        guard !host.unconfirmed.isEmpty, let counted = host.status?.retainedCount(.accessories),
            counted == host.accessories.count - host.unconfirmed.count
        else { return [] }
        var changes: [FleetChange] = []
        for connection in host.unconfirmed.sorted() {
            guard let accessory = host.accessories.removeValue(forKey: connection) else { continue }
            if reporting { changes.append(.disconnected(host: host.name, accessory, claim: host.claims[connection])) }
        }
        host.unconfirmed = []
        return changes
    }

    /// Replaces the claims of one host shown, as a fresh read of its claim topics found them; returns what a watcher
    /// must be told.
    public mutating func replaceClaims(level: String, with claims: [UInt64: FleetClaim]) -> [FleetChange] {
        guard var host = hosts[level], host.claims != claims else { return [] }
        host.claims = claims
        return replaceHost(level: level, with: host)
    }

    /// Sets what is known of one host (`nil`: forgets it), without working out what changed.
    public mutating func setHost(level: String, to host: FleetHost?) {
        hosts[level] = host
    }

    /// The hosts whose lease ran out by `now` and that are not shown stale yet.
    public func leasesRunOut(now: UInt64) -> [String] {
        hosts.values.filter { !$0.stale && ($0.leaseEnds ?? .max) <= now }.map(\.level).sorted()
    }

    /// When the next lease of a host not shown stale runs out.
    public var nextLeaseEnd: UInt64? { hosts.values.filter { !$0.stale }.compactMap(\.leaseEnds).min() }

    /// Shows the host at `level` as stale: its lease ran out unrenewed. Returns what a watcher must be told.
    public mutating func markStale(level: String) -> [FleetChange] {
        guard let host = hosts[level], !host.stale else { return [] }
        hosts[level]!.stale = true
        return [.status(host: host.name, host.status?.withoutCounts, stale: true)]
    }

    /// Takes the status of `fresh` (a read of the host's status alone) for the host at `level`, with its lease;
    /// returns what a watcher must be told.
    public mutating func takeStatus(level: String, from fresh: FleetHost) -> [FleetChange] {
        guard var host = hosts[level] else { return [] }
        let told = host.status?.withoutCounts != fresh.status?.withoutCounts || host.stale
        host.status = fresh.status
        host.leaseEnds = fresh.leaseEnds
        host.stale = false
        hosts[level] = host
        return told ? [.status(host: host.name, fresh.status?.withoutCounts)] : []
    }

    /// Sets the accessories of the host at `level` (a host with none yet known is added when there are some), decoded
    /// apart from the rest of the read (``AccessoryDecoder``), with how many payloads were not accessory objects.
    mutating func setAccessories(level: String, to accessories: [UInt64: Accessory], unreadable: Int) {
        self.unreadable += unreadable
        if hosts[level] == nil {
            guard !accessories.isEmpty else { return }
            hosts[level] = FleetHost(level: level)
        }
        hosts[level]!.accessories = accessories
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
                let claim = old!.claims[connection]
                if new?.accessories[connection] != before || new?.claims[connection] != claim {
                    gone.append(.disconnected(host: name, before, claim: claim))
                }
            }
            let staleChanged = (old?.stale ?? false) != (new?.stale ?? false)
            if old?.status?.withoutCounts != new?.status?.withoutCounts || staleChanged {
                came.append(.status(host: name, new?.status?.withoutCounts, stale: new?.stale ?? false))
            }
            for connection in (new?.accessories.keys.sorted() ?? []) {
                let after = new!.accessories[connection]!
                let claim = new!.claims[connection]
                if old?.accessories[connection] != after || old?.claims[connection] != claim {
                    came.append(.connected(host: name, after, claim: claim))
                }
            }
        }
        return gone + came
    }

    /// The accessory object in `payload`, or `nil` when it is not one: the bridge's canonical form read directly,
    /// anything else through JSONDecoder.
    static func accessory(_ payload: [UInt8]) -> Accessory? {
        payload.withUnsafeBufferPointer { accessory($0) }
    }

    /// ``accessory(_:)`` on bytes in place.
    static func accessory(_ payload: UnsafeBufferPointer<UInt8>) -> Accessory? {
        if let accessory = EventLineReader.accessory(payload) { return accessory }
        return try? JSONDecoder().decode(Accessory.self, from: Data(payload))  // try?: not an accessory is nil
    }
}
