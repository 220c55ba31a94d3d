/// The census answers a claim gateway owes, each due at the moment its request's window drew
/// (``Census/Request/answerDelay(using:)``); what the answer says is read from the census board when it is sent.
struct CensusAnswerQueue {
    struct Owed: Equatable {
        var due: UInt64
        var responseTopic: String
        var correlation: [UInt8]?
    }

    /// At most this many answers owed at once: a reader that floods requests is answered for its last ones, and the
    /// gateway's memory does not grow with them.
    static let capacity = 64

    private(set) var owed: [Owed] = []

    /// Owes an answer on `responseTopic` at `due`; one owed on the same topic (an earlier request of that reader) is
    /// replaced, and past ``capacity`` the oldest owed is dropped.
    mutating func owe(responseTopic: String, correlation: [UInt8]?, due: UInt64) {
        owed.removeAll { $0.responseTopic == responseTopic }
        if owed.count >= Self.capacity { owed.removeFirst() }
        owed.append(Owed(due: due, responseTopic: responseTopic, correlation: correlation))
    }

    /// When the next answer is due.
    var nextDue: UInt64? { owed.lazy.map(\.due).min() }

    /// Takes the answers due at `now`, earliest first.
    mutating func takeDue(now: UInt64) -> [Owed] {
        let due = owed.filter { $0.due <= now }.sorted { $0.due < $1.due }
        guard !due.isEmpty else { return [] }
        owed.removeAll { $0.due <= now }
        return due
    }
}
