import AccmonLogging
import AccmonSys
import AccmonSystemd
import Glibc
import Synchronization

/// Follows logind's login sessions for bus peers that asked to be (a subscription with `suspend-while-inactive`, a
/// claim with `release-when-inactive`), on a thread of its own, `accmond-logind`, and tells the loop whether each
/// peer's session is in front: active on its seat (`sd_session_is_active`, through sd-login's files) and not locked
/// (`LockedHint`, logind's property on the system bus). iOS moves an app to inactive when the user turns away;
/// logind says the same of a login session.
///
/// A peer's session is the one its process is in, else its user's display session (a desktop or Flatpak app runs in
/// its user manager's scope, not in a session), as polkit finds it (``LoginSessions``). A peer with no session is not
/// in front. Changes come from sd-login's monitor (a session began, ended, became active or not) and from logind's
/// `PropertiesChanged` of sessions (`LockedHint`), followed off the loop.
final class LoginWatcher: Sendable {
    private let watched = Mutex<[String: (pid: Int32, uid: UInt32)]>([:])
    private let wakeup: WakeupEvent
    private let results: Mailbox<BusInbound>
    private let logger: Logger

    init(results: Mailbox<BusInbound>, logger: Logger) throws(Errno) {
        self.results = results
        self.logger = logger
        wakeup = try WakeupEvent()
        try startThread(name: "accmond-logind") { [self] in run() }
    }

    /// Follows `peer` (its process and user) from now on; its state comes at once, then at each change.
    func watch(_ peer: String, pid: Int32, uid: UInt32) {
        watched.withLock { $0[peer] = (pid, uid) }
        wakeup.signal()
    }

    /// Stops following `peer`.
    func forget(_ peer: String) {
        watched.withLock { $0[peer] = nil }
    }

    private func run() {
        let monitor: LoginMonitor
        do {
            monitor = try LoginMonitor()
        } catch {
            logger.warning(.bus, "logind: cannot follow login sessions: \(error)")
            return
        }
        var bus = Self.connectToLogind(logger)
        var told: [String: Bool] = [:]
        while true {
            var waits = [
                pollfd(fd: wakeup.descriptor.rawValue, events: Int16(POLLIN), revents: 0),
                pollfd(fd: monitor.descriptor.rawValue, events: Int16(POLLIN), revents: 0),
            ]
            if let bus { waits.append(pollfd(fd: bus.descriptor.rawValue, events: bus.pollEvents, revents: 0)) }
            let pending = bus.map { $0.pollEvents & Int16(POLLIN) == 0 } ?? false
            _ = waits.withUnsafeMutableBufferPointer { poll($0.baseAddress, nfds_t($0.count), pending ? 0 : 5000) }
            wakeup.drain()
            monitor.flush()
            if let connection = bus {
                do {
                    while try connection.next() != nil {}  // PropertiesChanged: a look at every session below
                } catch {
                    logger.warning(.bus, "logind: lost the system bus (\(error)); session locks are not followed")
                    bus = nil
                }
            }
            let peers = watched.withLock { $0 }
            told = told.filter { peers[$0.key] != nil }
            var changes: [BusInbound] = []
            for (peer, process) in peers {
                let inFront = Self.isInFront(pid: process.pid, uid: process.uid, bus: bus)
                if told[peer] != inFront {
                    told[peer] = inFront
                    changes.append(.loginState(peer: peer, inFront: inFront))
                }
            }
            if !changes.isEmpty { results.post(changes) }
        }
    }

    /// Whether the session of `pid` (of `uid`) is active on its seat and not locked.
    private static func isInFront(pid: Int32, uid: UInt32, bus: BusConnection?) -> Bool {
        guard let session = LoginSessions.session(ofProcess: pid, uid: uid), session.isActive else { return false }
        guard let bus else { return true }
        return !isLocked(session.id, on: bus)
    }

    private static func isLocked(_ session: String, on bus: BusConnection) -> Bool {
        guard let path = try? LoginSessions.objectPath(ofSession: session),  // try?: an id sd-bus cannot encode
            case .boolean(let locked)? = try? bus.getProperty(  // try?: a session gone meanwhile is not locked
                path, "org.freedesktop.login1.Session", "LockedHint", of: "org.freedesktop.login1")
        else { return false }
        return locked
    }

    /// A connection to the system bus that receives logind's `PropertiesChanged` of sessions; `nil` without one.
    private static func connectToLogind(_ logger: Logger) -> BusConnection? {
        do {
            let bus = try BusConnection(address: nil)
            let rule =
                "type='signal',sender='org.freedesktop.login1',interface='org.freedesktop.DBus.Properties',"
                + "member='PropertiesChanged',arg0='org.freedesktop.login1.Session'"
            _ = try bus.callDriver("AddMatch", [.string(rule)])
            return bus
        } catch {
            logger.warning(.bus, "logind: no system bus (\(error)); session locks are not followed, only activity")
            return nil
        }
    }
}
