/// Which of accmond's events the bridge may acknowledge: those whose publications, and every earlier one's, the broker
/// has acknowledged (QoS 1 PUBACK). Pure: no I/O.
///
/// Each entry is one unit of publication, in the order published: an event (its retained topic and its event line,
/// with its sequence number) or a barrier without a sequence number (the publications of a reconciliation, which the
/// events after it must not overtake). An entry is done when every message id it holds was confirmed; entries are
/// released in order, so one slow PUBACK holds back the acknowledgement of everything after it, never the reverse.
/// An entry with no message (every publication of it failed at once) is done from the start: an event that cannot be
/// published never blocks the ones behind it.
struct PublicationLedger<Kept> {
    private struct Entry {
        var sequence: UInt64?
        var outstanding: Int
        var kept: Kept?
    }

    private var entries: [Entry] = []
    /// The first entry not yet released.
    private var head = 0
    /// The number of entries released and dropped from the front of `entries`.
    private var dropped = 0
    /// The entry (counted from the first ever recorded) each outstanding message id belongs to.
    private var entryOfMessage: [Int32: Int] = [:]

    /// The entries not yet released.
    var count: Int { entries.count - head }

    /// Records a unit of publication: `messages` are the ids of its publications; `kept` is what to publish again if
    /// the connection is lost before it is done. With `incomplete`, a publication of it could not be sent on this
    /// connection: the entry is never done, and waits for ``removeAll()`` to hand it back.
    mutating func record(sequence: UInt64?, messages: [Int32], keeping kept: Kept?, incomplete: Bool = false) {
        let index = dropped + entries.count
        for message in messages { entryOfMessage[message] = index }
        entries.append(Entry(sequence: sequence, outstanding: messages.count + (incomplete ? 1 : 0), kept: kept))
    }

    /// Confirms message `id` (its PUBACK arrived); returns whether it was one of the ledger's.
    @discardableResult
    mutating func confirm(_ id: Int32) -> Bool {
        guard let index = entryOfMessage.removeValue(forKey: id) else { return false }
        entries[index - dropped].outstanding -= 1
        return true
    }

    /// Releases the done entries at the front; returns the highest sequence number among them, if any.
    mutating func releaseDone() -> UInt64? {
        var released: UInt64?
        while head < entries.count, entries[head].outstanding == 0 {
            if let sequence = entries[head].sequence { released = sequence }
            entries[head].kept = nil
            head += 1
        }
        if head >= 1024, head * 2 >= entries.count {
            entries.removeFirst(head)
            dropped += head
            head = 0
        }
        return released
    }

    /// Ends the ledger when the connection is lost: returns what every unreleased entry kept, in order (done ones
    /// included: they wait on an earlier one), and forgets every message id.
    mutating func removeAll() -> [Kept] {
        let kept = entries[head...].compactMap(\.kept)
        dropped += entries.count
        entries = []
        head = 0
        entryOfMessage = [:]
        return kept
    }
}
