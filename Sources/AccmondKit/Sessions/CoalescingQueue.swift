import AccmonProtocol

/// The events waiting for a suspended client, coalesced so that their number stays bounded however long the storm.
///
/// Pure logic; every rule is here. The client is assumed to have seen everything delivered before the queue began.
/// For each connection:
/// - a connect, then the disconnect of the same connection: both vanish (the client never hears of it);
/// - the disconnect of a connection the client saw is kept, and a later connect of the same accessory (a new
///   connection) follows it: both are delivered, in that order.
///
/// So for each accessory the queue holds at most the disconnect of the connection the client last saw and the
/// connect of the current one: at most 2 × the number of distinct accessories, in the events' original order.
/// `Payload` travels with each event (the broker keeps the event's encoded line there, encoded once).
///
/// Its operations are inlinable, so that the daemon's module specializes them for its payload: unspecialized, a
/// generic call from another module cost thousands of instructions, and a storm enqueues each event once per
/// suspended client.
public struct CoalescingQueue<Payload: Sendable>: Sendable {
    /// One queued event and its payload.
    public struct Entry: Sendable {
        public var event: AccessoryEvent
        public var payload: Payload

        @inlinable init(event: AccessoryEvent, payload: Payload) {
            self.event = event
            self.payload = payload
        }
    }

    @usableFromInline var entries: [Entry?] = []
    @usableFromInline var head = 0
    /// Where the queued connect of each connection the client has not seen sits.
    @usableFromInline var unseenConnects: [ConnectionID: Int] = [:]
    /// Entries queued and not cancelled.
    @usableFromInline var liveCount = 0

    /// Creates an empty queue.
    @inlinable public init() {}

    /// Entries queued and not cancelled.
    @inlinable public var count: Int { liveCount }

    /// Whether nothing is queued.
    @inlinable public var isEmpty: Bool { liveCount == 0 }

    /// Queues `event`, cancelling it against the connect it undoes.
    @inlinable public mutating func enqueue(_ event: AccessoryEvent, payload: Payload) {
        let connection = event.accessory.connectionID
        switch event.change {
        case .connect:
            unseenConnects[connection] = entries.count
            entries.append(Entry(event: event, payload: payload))
            liveCount += 1
        case .disconnect:
            if let index = unseenConnects.removeValue(forKey: connection) {
                entries[index] = nil
                liveCount -= 1
                compactIfSparse()
            } else {
                entries.append(Entry(event: event, payload: payload))
                liveCount += 1
            }
        }
    }

    /// Removes and returns the oldest entry.
    @inlinable public mutating func popFirst() -> Entry? {
        while head < entries.count {
            let entry = entries[head]
            entries[head] = nil
            head += 1
            if let entry {
                liveCount -= 1
                if entry.event.change == .connect { unseenConnects[entry.event.accessory.connectionID] = nil }
                if head == entries.count { reset() }
                return entry
            }
        }
        reset()
        return nil
    }

    /// The oldest entry, left in place.
    @inlinable public var first: Entry? {
        // A plain loop, and at once when empty: the broker asks at every flush of every live session.
        guard liveCount > 0 else { return nil }
        for index in head..<entries.count {
            if let entry = entries[index] { return entry }
        }
        return nil
    }

    /// Removes every entry; returns them oldest first.
    @inlinable public mutating func removeAll() -> [Entry] {
        let all = entries[head...].compactMap { $0 }
        reset()
        return all
    }

    /// The queued entries, oldest first, left in place.
    public var contents: [Entry] { entries[head...].compactMap { $0 } }

    /// The queued events, oldest first.
    public var events: [AccessoryEvent] { entries[head...].compactMap { $0?.event } }

    @inlinable mutating func reset() {
        entries.removeAll(keepingCapacity: true)
        unseenConnects.removeAll(keepingCapacity: true)
        head = 0
        liveCount = 0
    }

    /// Keeps storage proportional to the live entries: cancelled slots are squeezed out once they are the majority.
    @inlinable mutating func compactIfSparse() {
        let slots = entries.count - head
        guard slots > 64, liveCount * 2 < slots else { return }
        let live = entries[head...].compactMap { $0 }
        entries = live.map { Optional($0) }
        head = 0
        unseenConnects.removeAll(keepingCapacity: true)
        for (index, entry) in live.enumerated() where entry.event.change == .connect {
            unseenConnects[entry.event.accessory.connectionID] = index
        }
    }
}
