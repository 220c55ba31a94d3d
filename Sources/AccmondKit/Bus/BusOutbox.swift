import AccmonSys
import AccmonSystemd

/// What the bus thread has to send, in the order the loop posted it for each peer, taken one message per peer in
/// turn; pure.
///
/// The thread makes each message's values when it sends it (``BusBody``): a peer that floods calls whose replies are
/// large (`GetManagedObjects` of a big fleet) would otherwise keep the thread building its replies while another
/// peer's events wait behind them. Taken in turn, a flood delays the flooder. Order holds for each peer: a reply and
/// the signals after it reach that peer in the order the loop made them. A signal to several peers is one entry per
/// peer, sharing one set of values made once.
struct BusOutbox {
    /// One message to one peer.
    enum Entry {
        case reply(callID: UInt64, BusBody, descriptors: [FileDescriptor])
        case error(callID: UInt64, BusError)
        case signal(destination: String, path: String, interface: String, member: String, body: SharedBody)
    }

    /// A signal's arguments, written once however many peers it goes to: the first message sent with them is the
    /// template whose body the next ones copy (on the bus thread).
    final class SharedBody {
        let body: BusBody
        var template: BusMessage?
        init(_ body: BusBody) { self.body = body }
    }

    /// A peer's entries, oldest first from `head`.
    private struct Queue {
        var entries: [Entry] = []
        var head = 0
        var isEmpty: Bool { head == entries.count }
        mutating func removeFirst() -> Entry {
            defer {
                head += 1
                if head == entries.count {
                    entries.removeAll(keepingCapacity: true)
                    head = 0
                }
            }
            return entries[head]
        }
    }

    /// Each peer's entries, by the peer's unique name (a reply's by the call's sender).
    private var queues: [String: Queue] = [:]
    /// The peers with entries, in the order they take their turns.
    private var turns: [String] = []
    private var turn = 0
    /// Probes of peers, answered before any entry.
    private(set) var probes: [String] = []
    /// polkit checks to start, before any entry.
    private(set) var authorizations:
        [(id: UInt64, peer: String, action: String, details: [String: String], interactive: Bool)] = []

    var isEmpty: Bool { turns.isEmpty }
    /// Entries waiting, all peers together.
    private(set) var count = 0

    /// Takes what the loop posted, in order. `callers` names the peer each reply goes to.
    mutating func take(_ items: [BusOutbound], callers: (UInt64) -> String?) {
        for item in items {
            switch item {
            case .reply(let id, let body, let descriptors):
                guard let caller = callers(id) else {
                    for descriptor in descriptors { descriptor.close() }
                    continue
                }
                append(.reply(callID: id, body, descriptors: descriptors), to: caller)
            case .error(let id, let error):
                guard let caller = callers(id) else { continue }
                append(.error(callID: id, error), to: caller)
            case .signal(let targets, let interface, let member, let body):
                let shared = SharedBody(body)
                for target in targets {
                    append(
                        .signal(
                            destination: target.destination, path: target.path, interface: interface, member: member,
                            body: shared),
                        to: target.destination)
                }
            case .probePeers(let names):
                probes += names
            case .authorize(let id, let peer, let action, let details, let interactive):
                authorizations.append((id, peer, action, details, interactive))
            }
        }
    }

    /// The probes taken, emptied.
    mutating func takeProbes() -> [String] {
        defer { probes = [] }
        return probes
    }

    /// The polkit checks taken, emptied.
    mutating func takeAuthorizations()
        -> [(id: UInt64, peer: String, action: String, details: [String: String], interactive: Bool)]
    {
        defer { authorizations = [] }
        return authorizations
    }

    private mutating func append(_ entry: Entry, to peer: String) {
        if queues[peer] == nil {
            queues[peer] = Queue()
            turns.append(peer)
        }
        queues[peer]!.entries.append(entry)
        count += 1
    }

    /// The next entry: the oldest of the peer whose turn it is.
    mutating func next() -> Entry? {
        guard !turns.isEmpty else { return nil }
        if turn >= turns.count { turn = 0 }
        let peer = turns[turn]
        var queue = queues.removeValue(forKey: peer)!
        let entry = queue.removeFirst()
        count -= 1
        if queue.isEmpty {
            turns.remove(at: turn)
        } else {
            queues[peer] = queue
            turn += 1
        }
        return entry
    }

    /// Drops everything for peers gone with a lost connection (the descriptors replies were to pass are closed);
    /// returns the polkit checks not started, which the caller answers as unavailable.
    @discardableResult
    mutating func removeAll() -> [UInt64] {
        for queue in queues.values {
            for case .reply(_, _, let descriptors) in queue.entries[queue.head...] {
                for descriptor in descriptors { descriptor.close() }
            }
        }
        defer { authorizations = [] }
        let unstarted = authorizations.map(\.id)
        queues = [:]
        turns = []
        turn = 0
        probes = []
        count = 0
        return unstarted
    }
}
