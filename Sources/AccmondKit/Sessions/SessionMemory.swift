import AccmonProtocol

/// What the daemon remembers of a client session that registered a restore identifier, so that it can hand the
/// session back after the client or the daemon restarts. Pure.
///
/// The memory is the client's view as of its last acknowledgement (its filter and the accessories it knew as
/// connected) plus the events since then, coalesced against that view: so replaying them after the view gives the
/// client the truth with the fewest events, and the replay never holds more than 2 × the number of distinct
/// accessories.
public struct SessionMemory: Sendable {
    /// The subscription filter.
    public var filter: AccessoryFilter
    /// Whether the subscription asked for claims (`claim-update` messages), which a restored session keeps.
    public var claims = false
    /// The last sequence number the client acknowledged.
    public private(set) var acknowledged: UInt64
    /// The accessories the client knew as connected as of ``acknowledged``, by connection.
    public private(set) var known: [ConnectionID: Accessory]
    /// The events after ``acknowledged`` that pass the filter, coalesced; each carries its encoded line.
    public private(set) var replay = CoalescingQueue<[UInt8]>()

    /// Starts remembering a subscription that began with `snapshot`.
    public init(filter: AccessoryFilter, snapshot: Snapshot) {
        self.filter = filter
        acknowledged = snapshot.sequence
        known = Dictionary(snapshot.accessories.map { ($0.connectionID, $0) }) { first, _ in first }
    }

    /// Restores a memory saved earlier; `replay` lists the events after `acknowledged` with their lines.
    public init(
        filter: AccessoryFilter, acknowledged: UInt64, known: [Accessory],
        replay: [(event: AccessoryEvent, line: [UInt8])]
    ) {
        self.filter = filter
        self.acknowledged = acknowledged
        self.known = Dictionary(known.map { ($0.connectionID, $0) }) { first, _ in first }
        for (event, line) in replay { record(event, line: line) }
    }

    /// Records an event the session's filter passed (delivered or not).
    public mutating func record(_ event: AccessoryEvent, line: [UInt8]) {
        guard event.sequence > acknowledged else { return }
        replay.enqueue(event, payload: line)
    }

    /// The client consumed everything up to `sequence`: fold those events into the known view.
    public mutating func acknowledge(_ sequence: UInt64) {
        guard sequence > acknowledged else { return }
        while let next = replay.first, next.event.sequence <= sequence {
            _ = replay.popFirst()
            switch next.event.change {
            case .connect: known[next.event.accessory.connectionID] = next.event.accessory
            case .disconnect: known[next.event.accessory.connectionID] = nil
            }
        }
        acknowledged = sequence
    }

    /// What is handed back first on restore.
    public var restoreState: RestoreState {
        RestoreState(
            filter: filter, acknowledged: acknowledged,
            accessories: known.values.sorted { $0.connectionID < $1.connectionID })
    }
}
