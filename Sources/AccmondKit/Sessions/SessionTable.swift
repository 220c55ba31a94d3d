import AccmonLogging
import AccmonSys

/// The live sessions, with the work the end of a loop turn does for them: the sessions to flush, in the order they
/// got output (a request's events reach the subscribers before its reply reaches the requester), the sessions to
/// close, and the sessions that wait for their next turn or for room in the output budget.
final class SessionTable {
    /// Session numbers start here: lower poller tokens belong to the loop's own descriptors.
    static let firstNumber: UInt64 = 16

    private(set) var byNumber: [UInt64: Session] = [:]
    /// The numbers of each user's sessions, in the order they connected.
    private var numbersByUID: [UInt32: [UInt64]] = [:]
    private var nextNumber = firstNumber
    /// The socket clients among the sessions: those that share ``budget``.
    private var socketSessions = 0
    /// The budget every session's outbound buffer shares.
    let budget: OutputBudget
    /// The loop turn now: a session's request quota counts per turn.
    private(set) var turn: UInt64 = 0
    /// Sessions with output queued since the last flush, in the order they got it.
    private(set) var pendingFlush: [Session] = []
    /// Sessions to close at the end of this turn, in the order they were closed.
    private var pendingClose: [Session] = []
    /// Sessions with request lines left when their turn's quota ran out: handled first next turn.
    private var deferred: [Session] = []
    /// Sessions that took no more output (events or replies) because the budget was exceeded.
    private var waitingForBudget: [Session] = []
    /// Each user's share of the loop for its requests.
    var loopShare: LoopShare
    /// Sessions whose request lines wait for their user to be back within its share, and until when at most.
    private var heldForShare: [Session] = []
    private(set) var heldUntil: UInt64?
    private let logger: Logger

    init(logger: Logger, outputBudget: Int, loopShare: LoopShare = LoopShare(share: 0)) {
        self.logger = logger
        self.loopShare = loopShare
        budget = OutputBudget(limit: outputBudget)
    }

    var count: Int { byNumber.count }
    var all: Dictionary<UInt64, Session>.Values { byNumber.values }

    subscript(number: UInt64) -> Session? { byNumber[number] }

    /// How many sessions user `uid` has open.
    func count(of uid: UInt32) -> Int { numbersByUID[uid]?.count ?? 0 }

    /// User `uid`'s sessions, in the order they connected.
    func sessions(of uid: UInt32) -> [Session] { numbersByUID[uid]?.compactMap { byNumber[$0] } ?? [] }

    /// The number the next accepted client gets.
    func takeNumber() -> UInt64 {
        defer { nextNumber += 1 }
        return nextNumber
    }

    func add(_ session: Session) {
        byNumber[session.number] = session
        if let uid = session.peer?.uid { numbersByUID[uid, default: []].append(session.number) }
        if session.socket != nil { socketSessions += 1 }
        budget.sessions = socketSessions
    }

    /// The session, not closing, that holds the restore id `key`.
    func liveHolder(of key: RestoreKey) -> Session? {
        sessions(of: key.uid).first { $0.restoreKey == key && !$0.isClosing }
    }

    /// The session that holds `key` and closes at the end of this turn.
    func closingHolder(of key: RestoreKey) -> Session? {
        sessions(of: key.uid).first { $0.restoreKey == key && $0.isClosing }
    }

    /// Starts a loop turn; returns the sessions whose request lines waited for it.
    func beginTurn() -> [Session] {
        turn &+= 1
        defer { deferred.removeAll(keepingCapacity: true) }
        for session in deferred { session.isDeferred = false }
        return deferred
    }

    /// Whether sessions wait for their next turn: the loop must not sleep.
    var hasDeferredWork: Bool { !deferred.isEmpty }

    /// `session` used its turn's quota with lines left.
    func deferToNextTurn(_ session: Session) {
        guard !session.isDeferred else { return }
        session.isDeferred = true
        deferred.append(session)
    }

    /// `session`'s request lines wait until `until`, when its user is back within its share of the loop.
    func holdForShare(_ session: Session, until: UInt64) {
        heldUntil = min(heldUntil ?? until, until)
        guard !session.isHeldForShare else { return }
        session.isHeldForShare = true
        heldForShare.append(session)
    }

    /// The held sessions whose user is back within its share at `now`; the others stay held.
    func takeReleased(now: UInt64) -> [Session] {
        guard let heldUntil, heldUntil <= now else { return [] }
        var released: [Session] = []
        var next: UInt64?
        heldForShare.removeAll { session in
            if let uid = session.peer?.uid, let until = loopShare.heldUntil(uid, now: now), !session.isClosing {
                next = min(next ?? until, until)
                return false
            }
            session.isHeldForShare = false
            if !session.isClosing { released.append(session) }
            return true
        }
        self.heldUntil = next
        return released
    }

    /// `session` took no more output because of the budget: it is flushed again once the budget has room.
    func waitForBudget(_ session: Session) {
        guard !session.waitsForBudget else { return }
        session.waitsForBudget = true
        waitingForBudget.append(session)
    }

    /// Puts `session` in this turn's flush list (once).
    func queueFlush(_ session: Session) {
        guard !session.flushQueued else { return }
        session.flushQueued = true
        pendingFlush.append(session)
    }

    /// Flushes the sessions that got output, in order, with `flush`; a flush can queue other sessions' output (a
    /// waiting request handled once there is room), and those are flushed in this turn too. Once the budget has
    /// room again, the sessions that waited for it are flushed as well.
    func flushPending(_ flush: (Session) -> Void) {
        while true {
            var index = 0
            while index < pendingFlush.count {
                let session = pendingFlush[index]
                index += 1
                if !session.isClosing { flush(session) }
                session.flushQueued = false
            }
            pendingFlush.removeAll(keepingCapacity: true)
            guard !budget.isExceeded, !waitingForBudget.isEmpty else { return }
            let waiting = waitingForBudget
            waitingForBudget.removeAll()
            for session in waiting {
                session.waitsForBudget = false
                if !session.isClosing { queueFlush(session) }
            }
        }
    }

    /// Marks `session` to be closed at the end of the turn; logs why (at `level` too when above debug).
    func close(_ session: Session, reason: String, level: LogLevel = .debug) {
        guard session.beginClosing() else { return }
        pendingClose.append(session)
        if level > .debug { logger.log(level, .clientDisconnected, reason, session.metadata) }
        logger.debug(.clientDisconnected, "client disconnected: \(reason)", session.metadata)
    }

    /// Whether sessions were closed this turn (their descriptors are freed at its end).
    var hasClosedSessions: Bool { !pendingClose.isEmpty }

    /// Removes the sessions closed this turn, in order, handing each to `release` (which closes its descriptor).
    func removeClosed(_ release: (Session) -> Void) {
        for session in pendingClose { remove(session, release) }
        pendingClose.removeAll(keepingCapacity: true)
        deferred.removeAll { $0.isClosing }
        waitingForBudget.removeAll { $0.isClosing }
        heldForShare.removeAll { $0.isClosing }
        if heldForShare.isEmpty { heldUntil = nil }
    }

    /// Removes every session, handing each to `release`.
    func removeAll(_ release: (Session) -> Void) {
        for session in Array(byNumber.values) { remove(session, release) }
        pendingClose.removeAll()
        pendingFlush.removeAll()
        deferred.removeAll()
        waitingForBudget.removeAll()
        heldForShare.removeAll()
        heldUntil = nil
    }

    private func remove(_ session: Session, _ release: (Session) -> Void) {
        guard byNumber.removeValue(forKey: session.number) != nil else { return }
        if let uid = session.peer?.uid {
            numbersByUID[uid]?.removeAll { $0 == session.number }
            if numbersByUID[uid]?.isEmpty == true { numbersByUID[uid] = nil }
        }
        session.releaseOutput()
        if session.socket != nil { socketSessions -= 1 }
        budget.sessions = socketSessions
        release(session)
    }
}
