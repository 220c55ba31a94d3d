import AccmonLogging
import AccmonSys

/// The live sessions, with the work the end of a loop turn does for them: the sessions to flush, in the order they
/// got output (a request's events reach the subscribers before its reply reaches the requester), and the sessions to
/// close.
final class SessionTable {
    /// Session numbers start here: lower poller tokens belong to the loop's own descriptors.
    static let firstNumber: UInt64 = 16

    private(set) var byNumber: [UInt64: Session] = [:]
    private var nextNumber = firstNumber
    /// Sessions with output queued since the last flush, in the order they got it.
    private(set) var pendingFlush: [Session] = []
    /// Sessions to close at the end of this turn, in the order they were closed.
    private var pendingClose: [Session] = []
    private let logger: Logger

    init(logger: Logger) { self.logger = logger }

    var count: Int { byNumber.count }
    var all: Dictionary<UInt64, Session>.Values { byNumber.values }

    subscript(number: UInt64) -> Session? { byNumber[number] }

    /// The number the next accepted client gets.
    func takeNumber() -> UInt64 {
        defer { nextNumber += 1 }
        return nextNumber
    }

    func add(_ session: Session) { byNumber[session.number] = session }

    /// The session, not closing, that holds the restore id `key`.
    func liveHolder(of key: RestoreKey) -> Session? {
        byNumber.values.first { $0.restoreKey == key && !$0.isClosing }
    }

    /// The session that holds `key` and closes at the end of this turn.
    func closingHolder(of key: RestoreKey) -> Session? {
        byNumber.values.first { $0.restoreKey == key && $0.isClosing }
    }

    /// Puts `session` in this turn's flush list (once).
    func queueFlush(_ session: Session) {
        guard !session.flushQueued else { return }
        session.flushQueued = true
        pendingFlush.append(session)
    }

    /// Flushes the sessions that got output, in order, with `flush`; a flush can queue other sessions' output (a
    /// waiting request handled once there is room), and those are flushed in this turn too.
    func flushPending(_ flush: (Session) -> Void) {
        var index = 0
        while index < pendingFlush.count {
            let session = pendingFlush[index]
            index += 1
            if !session.isClosing { flush(session) }
            session.flushQueued = false
        }
        pendingFlush.removeAll(keepingCapacity: true)
    }

    /// Marks `session` to be closed at the end of the turn; logs why (at `level` too when above debug).
    func close(_ session: Session, reason: String, level: LogLevel = .debug) {
        guard session.beginClosing() else { return }
        pendingClose.append(session)
        if level > .debug { logger.log(level, .clientDisconnected, reason, session.metadata) }
        logger.debug(.clientDisconnected, "client disconnected: \(reason)", session.metadata)
    }

    /// Removes the sessions closed this turn, in order, handing each to `release` (which closes its descriptor).
    func removeClosed(_ release: (Session) -> Void) {
        for session in pendingClose {
            byNumber.removeValue(forKey: session.number)
            release(session)
        }
        pendingClose.removeAll(keepingCapacity: true)
    }

    /// Removes every session, handing each to `release`.
    func removeAll(_ release: (Session) -> Void) {
        for session in byNumber.values { release(session) }
        byNumber.removeAll()
        pendingClose.removeAll()
        pendingFlush.removeAll()
    }
}
