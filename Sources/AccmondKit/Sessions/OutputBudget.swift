/// The bytes all clients' outbound buffers hold together, against ``DaemonLimits/totalOutputBytes``: one client
/// that reads nothing fills only its own buffer, but many could fill memory; past the budget, the clients holding
/// more than their share take no more until the total is back under it.
///
/// Its counters are `@exclusivity(unchecked)` as ``Session``'s hot properties are, for the same reason: every event
/// adds to ``total`` once per session, from the loop's thread only, in accesses that call nothing.
final class OutputBudget {
    let limit: Int
    /// Bytes buffered for all clients.
    @exclusivity(unchecked) private(set) var total = 0
    /// Live sessions sharing the budget.
    @exclusivity(unchecked) var sessions = 0

    init(limit: Int) { self.limit = limit }

    /// A session's buffer grew (positive) or shrank (negative) by `delta` bytes.
    func add(_ delta: Int) { total += delta }

    /// Whether the clients hold the whole budget or more.
    var isExceeded: Bool { total >= limit }

    /// One client's share of the budget.
    var share: Int { limit / max(1, sessions) }

    /// Whether a client holding `bytes` may take more now: always while the budget is not exceeded, else only a
    /// client holding less than its share (one that reads).
    func allows(holding bytes: Int) -> Bool { !isExceeded || bytes < share }
}
