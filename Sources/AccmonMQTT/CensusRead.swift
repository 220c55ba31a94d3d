import AccmonSys

/// How a reader sizes its census's window (docs/MQTT.md §5). The broker queues at most its `max_queued_messages` for
/// a reader and drops the rest without a word (mosquitto), so a fleet's answers must not come faster than the reader
/// takes them once the queue is full: `room` answers fit the queue at once, the rest are spread at ``rate``.
public enum CensusWindow {
    /// The answers per second a reader is taken to read at least: bench/census.py measured 17,643 per second on a
    /// two-core VM, and a loaded machine is slower.
    public static let rate = 5_000.0
    /// The shortest window: bridges on other machines answer within it.
    public static let shortest = 0.05
    /// The most rounds of an automatic census: each next one sized for twice the answers of the one before.
    public static let rounds = 3

    /// The window for `hosts` answers with room for `room` of them at once: from ``shortest`` to
    /// ``Census/longestWindow``.
    public static func seconds(hosts: Int, room: Int) -> Double {
        min(Census.longestWindow, max(shortest, Double(hosts - room) / rate))
    }

    /// The answers a window carries without loss: what fits the room, and what comes at ``rate`` meanwhile.
    public static func carries(seconds: Double, room: Int) -> Int { room + Int(seconds * rate) }
}

/// A read's census: its rounds' requests, the answers collected, and why it may have missed hosts.
struct CensusRead {
    /// Why a census may have missed hosts.
    enum Shortfall: Equatable {
        /// Answers still came when the round's longest wait ended, this long after its request.
        case stillAnswering(seconds: Double)
        /// More bridges answered than the window carries without loss.
        case moreThanCarried(answers: Int, seconds: Double)
    }

    /// Where this reader takes its answers.
    let answerTopic: String
    /// What each round's correlation data begins with (the session's nonce).
    let session: String
    /// The answers that fit the broker's queue for this reader at once.
    let room: Int
    /// Whether the reader sizes the window (rounds), rather than the user (`--census-wait`).
    let automatic: Bool

    var round = 0
    var correlation: [UInt8] = []
    /// When the round's request went out, its window, and the answers it carries (``CensusWindow/carries``).
    var sentAt: UInt64 = 0
    var window: UInt64 = 0
    var carries = 0
    /// When this round's last answer came, and the hosts that answered it.
    var lastAnswer: UInt64 = 0
    var roundAnswers: Set<String> = []
    /// The hosts the round waits for beyond its window (known online, with a lease) that have not answered yet.
    var unanswered: Set<String> = []
    /// The round trip of the census's SUBSCRIBE to its SUBACK: how long an answer may take to come, at least.
    var roundTrip: UInt64 = 0
    /// The answers of every round, by host level.
    var answers: [String: Census.Answer] = [:]
    var shortfall: Shortfall?
    /// Whether its rounds are over, and whether the answers were taken into the read (hosts added to it).
    var settled = false
    var taken = false

    /// After the window, the round ends once no answer came for this long (or four round trips, when longer).
    static let quiet: UInt64 = 50_000_000
    /// How much longer than its window a round waits at most while answers still come: as long again, 1 s at least.
    static let shortestOverrun: UInt64 = 1_000_000_000

    init(answerTopic: String, session: String, room: Int, automatic: Bool) {
        self.answerTopic = answerTopic
        self.session = session
        self.room = room
        self.automatic = automatic
    }

    var quietTime: UInt64 { max(Self.quiet, 4 * roundTrip) }
    var windowEnd: UInt64 { sentAt + window }
    var longestWait: UInt64 { windowEnd + max(Self.shortestOverrun, window) }

    /// Starts a round with a window of `seconds`, waiting for the hosts of `awaiting` that no earlier round heard;
    /// returns its request's correlation data.
    mutating func beginRound(windowSeconds seconds: Double, awaiting: Set<String> = [], at now: UInt64) -> [UInt8] {
        round += 1
        correlation = Array("\(session) census \(round)".utf8)
        sentAt = now
        window = UInt64(seconds * 1e9)
        carries = CensusWindow.carries(seconds: seconds, room: room)
        lastAnswer = 0
        roundAnswers = []
        unanswered = awaiting.filter { answers[$0] == nil }
        return correlation
    }

    /// Takes an answer with its correlation data; answers to an earlier round, or not to this reader, are not taken.
    mutating func take(_ answer: Census.Answer, correlation: [UInt8]?, at now: UInt64) -> Bool {
        guard correlation == self.correlation else { return false }
        let level = FleetTopics.encodeLevel(answer.host)
        answers[level] = answer
        roundAnswers.insert(level)
        unanswered.remove(level)
        lastAnswer = now
        return true
    }

    /// Whether the round is over at `now`: ``quietTime`` passed since its window's end (an answer sent at its end is
    /// on its way) and since the last answer, and every host it awaits answered; or its longest wait passed.
    func roundOver(now: UInt64) -> Bool {
        now >= longestWait || (unanswered.isEmpty && now >= max(windowEnd, lastAnswer) + quietTime)
    }

    /// When after `now` the round may be over next, for the loop's wake-up: the quiet time after the window's end or
    /// the last answer, or the longest wait (while an awaited host has not answered).
    func nextCheck(after now: UInt64) -> UInt64 {
        [max(windowEnd, lastAnswer) + quietTime, longestWait].filter { $0 > now }.min() ?? now
    }

    /// Ends the round at `now`: the window of another round when more bridges answered than this one carries and the
    /// reader sizes the window; otherwise `nil`, the census settled, with its shortfall if it may have missed hosts.
    mutating func endRound(now: UInt64) -> Double? {
        if roundAnswers.count > carries {
            if automatic, round < CensusWindow.rounds {
                return CensusWindow.seconds(hosts: 2 * roundAnswers.count, room: room)
            }
            shortfall = .moreThanCarried(answers: roundAnswers.count, seconds: Double(window) / 1e9)
        } else if now >= longestWait, lastAnswer + quietTime > longestWait {
            shortfall = .stillAnswering(seconds: Double(longestWait - sentAt) / 1e9)
        }
        settled = true
        return nil
    }
}
