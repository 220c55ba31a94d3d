import AccmonProtocol

/// The daemon's truth: which accessories are connected now, their connection ids, and the global sequence number.
///
/// Pure logic. Event sources name each device by a source key (a sysfs path for udev); the registry turns source
/// reports into connect and disconnect events, ignoring duplicates so that no phantom or duplicated event escapes.
public struct Registry: Sendable {
    /// The sequence number of the last event issued; 0 before the first.
    public private(set) var sequence: UInt64
    private var nextConnectionID: UInt64
    private var connected: [String: Accessory] = [:]

    /// Creates a registry holding `connected` (by source key), whose next event and connection get numbers after
    /// the given ones.
    public init(lastSequence: UInt64 = 0, lastConnectionID: UInt64 = 0, connected: [String: Accessory] = [:]) {
        sequence = lastSequence
        nextConnectionID = lastConnectionID + 1
        self.connected = connected
    }

    /// The connected accessories by source key.
    public var connectedByKey: [String: Accessory] { connected }

    /// Disconnects every accessory whose key starts with `keyPrefix` and is not in `keys`.
    public mutating func reconcile(keyPrefix: String, present keys: Set<String>) -> [AccessoryEvent] {
        let gone = connected.keys.filter { $0.hasPrefix(keyPrefix) && !keys.contains($0) }
        return gone.sorted { connected[$0]!.connectionID < connected[$1]!.connectionID }.flatMap { detach(key: $0) }
    }

    /// The number of accessories connected now.
    public var count: Int { connected.count }

    /// Records that the device under `key` is present with these properties.
    ///
    /// - Returns: a connect event for a new connection; nothing when the same accessory is already connected under
    ///   this key (its properties are updated in place, its connection id kept); a disconnect then a connect when a
    ///   different accessory replaced it without a detach.
    public mutating func attach(key: String, _ accessory: Accessory) -> [AccessoryEvent] {
        // Stored under the next connection id at once: a new key, the usual case, is then hashed only once.
        var new = accessory
        new.connectionID = ConnectionID(nextConnectionID)
        guard let current = connected.updateValue(new, forKey: key) else {
            nextConnectionID += 1
            return [issue(.connect, new)]
        }
        if current.accessoryID == accessory.accessoryID && current.kind == accessory.kind {
            new.connectionID = current.connectionID
            connected[key] = new
            return []
        }
        nextConnectionID += 1
        return [issue(.disconnect, current), issue(.connect, new)]
    }

    /// Records that the device under `key` is gone.
    /// - Returns: its disconnect event, or nothing when it was not connected.
    public mutating func detach(key: String) -> [AccessoryEvent] {
        guard let accessory = connected.removeValue(forKey: key) else { return [] }
        return [issue(.disconnect, accessory)]
    }

    /// The accessory connected under `key`.
    public func accessory(under key: String) -> Accessory? { connected[key] }

    /// The source key of a connection, if it is connected.
    public func key(of connectionID: ConnectionID) -> String? {
        connected.first { $0.value.connectionID == connectionID }?.key
    }

    /// The connected accessories that pass `filter`, in connection order, as of ``sequence``.
    public func snapshot(matching filter: AccessoryFilter = .all) -> Snapshot {
        let accessories = connected.values.filter(filter.matches).sorted { $0.connectionID < $1.connectionID }
        return Snapshot(sequence: sequence, accessories: accessories)
    }

    /// An event for a connection that stays connected but became visible (`connect`) or invisible (`disconnect`) to
    /// some clients, after a manifest reload: it takes the next sequence number and changes nothing else.
    public mutating func visibilityEvent(_ change: AccessoryEvent.Change, _ accessory: Accessory) -> AccessoryEvent {
        issue(change, accessory)
    }

    /// The highest connection id issued so far.
    public var lastConnectionID: UInt64 { nextConnectionID - 1 }

    private mutating func issue(_ change: AccessoryEvent.Change, _ accessory: Accessory) -> AccessoryEvent {
        sequence += 1
        return AccessoryEvent(change, sequence: sequence, accessory: accessory)
    }
}
