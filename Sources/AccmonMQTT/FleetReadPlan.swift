import Glibc

/// Which hosts a fleet read shows (`--host`).
public enum FleetSelection: Sendable, Hashable {
    /// Every host.
    case all
    /// One host, by name: read without listing the fleet.
    case named(String)
    /// The hosts whose name matches a shell wildcard pattern (fnmatch(3)).
    case matching(String)

    /// The selection of `--host PATTERN`: a pattern without wildcards (`*`, `?`, `[`, `\`) names one host.
    public init(pattern: String?) {
        guard let pattern else {
            self = .all
            return
        }
        self = pattern.contains(where: { "*?[\\".contains($0) }) ? .matching(pattern) : .named(pattern)
    }

    /// Whether the host with this name is shown.
    public func includes(hostName: String) -> Bool {
        switch self {
        case .all: true
        case .named(let name): name == hostName
        case .matching(let pattern): fnmatch(pattern, hostName, 0) == 0
        }
    }

    /// Whether the host at this topic level is shown.
    public func includes(hostLevel: String) -> Bool {
        if case .all = self { return true }
        return includes(hostName: FleetTopics.decodeLevel(hostLevel))
    }
}

/// The hosts a reader still has to read, and how it groups them into windows the broker can deliver whole. Pure: no
/// I/O.
///
/// A window holds whole hosts, in the order they were added, whose expected messages (the status, and the accessory
/// topics its count announces, or an estimate when it has no count) fit the budget; a host bigger than the budget
/// gets a window of its own. After the window's end marker the reader reports each host's outcome
/// (``finish(_:complete:found:)``): a host whose topics match its count is done, and so is every host of a window in
/// which nothing can have been dropped; the others are read again in smaller windows, and a host read alone three times
/// without a whole read or a matching count is given up (shown as read, with a warning).
struct FleetReadPlan {
    struct Host: Sendable, Hashable {
        var level: String
        /// The accessory topics its status counts, when it does.
        var expected: Int?
        var attempts = 0
        /// The most hosts a window holding this one may hold: halved at each failed read.
        var windowCap = Int.max
    }

    enum Verdict: Sendable, Hashable {
        /// Read whole: show it.
        case done
        /// Possibly missing messages: read again.
        case again
        /// Read alone three times without a whole read: show what was read, and warn.
        case givenUp(received: Int, expected: Int?)
    }

    /// The estimate of a host without a count, until some host is known.
    static let defaultEstimate = 16
    static let maximumAttempts = 3

    /// The messages a window may expect.
    var budget: Int
    private var queue: [Host] = []
    private var head = 0
    private var knownTopics = 0
    private var knownHosts = 0

    init(budget: Int) { self.budget = max(1, budget) }

    var isEmpty: Bool { head == queue.count }
    var pendingCount: Int { queue.count - head }

    /// Adds a host to read.
    mutating func add(level: String, expected: Int?) {
        queue.append(Host(level: level, expected: expected))
        if let expected { learn(expected) }
    }

    /// The mean number of accessory topics of the hosts known so far, for the hosts without a count.
    var estimate: Int { knownHosts == 0 ? Self.defaultEstimate : (knownTopics + knownHosts - 1) / knownHosts }

    /// The messages a window expects for `host`: its status and its accessory topics.
    func size(of host: Host) -> Int { 1 + (host.expected ?? estimate) }

    /// Whether the next window is within the budget (not a host bigger than it, alone).
    var nextWindowFits: Bool { !isEmpty && size(of: queue[head]) <= budget }

    /// The next window: hosts from the front of the queue while they fit the budget (at least one).
    mutating func nextWindow() -> [Host] {
        guard !isEmpty else { return [] }
        var window = [queue[head]]
        var total = size(of: queue[head])
        var cap = queue[head].windowCap
        head += 1
        while head < queue.count {
            let next = queue[head]
            let sized = size(of: next)
            guard total + sized <= budget, window.count < min(cap, next.windowCap) else { break }
            window.append(next)
            total += sized
            cap = min(cap, next.windowCap)
            head += 1
        }
        if head > 1024, head * 2 > queue.count {
            queue.removeFirst(head)
            head = 0
        }
        return window
    }

    /// Decides each host of a finished window. `complete`: nothing can have been dropped in it (fewer packets than
    /// the broker queues, and the first end marker came back). `found` gives, for a host level, the accessory topics
    /// read and the count its status read in the same window says.
    mutating func finish(
        _ window: [Host], complete: Bool, found: (String) -> (received: Int, counted: Int?)
    ) -> [(level: String, verdict: Verdict)] {
        var verdicts: [(level: String, verdict: Verdict)] = []
        var again: [Host] = []
        for var host in window {
            let (received, counted) = found(host.level)
            // A window that dropped nothing but brought fewer topics than the host's count is no whole read either:
            // a broker (a cluster node) that does not serve every retained message, or a change meanwhile.
            if counted == received || complete && (counted ?? 0) <= received {
                if host.expected == nil { learn(counted ?? received) }
                verdicts.append((host.level, .done))
                continue
            }
            host.attempts += 1
            if window.count == 1, host.attempts >= Self.maximumAttempts {
                verdicts.append((host.level, .givenUp(received: received, expected: counted)))
                continue
            }
            host.expected = counted.map { max($0, received) } ?? max(host.expected ?? 0, received)
            host.windowCap = max(1, window.count / 2)
            again.append(host)
            verdicts.append((host.level, .again))
        }
        if !again.isEmpty {
            queue.replaceSubrange(head..<head, with: again)
        }
        return verdicts
    }

    private mutating func learn(_ topics: Int) {
        knownTopics += topics
        knownHosts += 1
    }
}

/// The buckets of the host index a reader still has to read, grouped into windows by the number of entries a bucket
/// is expected to hold. Pure: no I/O.
struct HostIndexPlan {
    /// The messages a window may expect.
    let budget: Int
    private var queue: [[Int]]
    private var bucketsRead = 0
    private var entriesRead = 0
    /// The entries a bucket is expected to hold, before any bucket was read.
    private let initialPerBucket: Double

    /// A plan over every bucket; `hostsAtLeast`: the fleet has at least this many hosts (the statuses read).
    init(budget: Int, hostsAtLeast: Int) {
        self.budget = max(1, budget)
        // The first window is sized by what the statuses told; later ones by what the buckets read held.
        initialPerBucket = Double(max(hostsAtLeast, 1)) / Double(HostIndex.bucketCount)
        queue = [Array(0..<HostIndex.bucketCount)]
    }

    var isEmpty: Bool { queue.isEmpty }

    private var perBucket: Double {
        bucketsRead == 0 ? initialPerBucket * 1.5 : Double(entriesRead) / Double(bucketsRead) * 1.25 + 1
    }

    private var bucketsPerWindow: Int { max(1, Int(Double(budget) / max(perBucket, 1))) }

    /// The next window's buckets.
    mutating func nextWindow() -> [Int] {
        guard !queue.isEmpty else { return [] }
        var buckets = queue.removeFirst()
        let fit = bucketsPerWindow
        if buckets.count > fit {
            queue.insert(Array(buckets[fit...]), at: 0)
            buckets = Array(buckets[..<fit])
        }
        return buckets
    }

    /// Records a finished window: `entries` read; when not `complete`, its buckets are read again in two halves (a
    /// single bucket that cannot be read whole returns false: the broker queues too little for this fleet).
    mutating func finish(_ buckets: [Int], complete: Bool, entries: Int) -> Bool {
        if complete {
            bucketsRead += buckets.count
            entriesRead += entries
            return true
        }
        guard buckets.count > 1 else { return false }
        let half = buckets.count / 2
        queue.insert(Array(buckets[half...]), at: 0)
        queue.insert(Array(buckets[..<half]), at: 0)
        return true
    }
}
