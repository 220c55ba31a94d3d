/// Decides when a registered app may be relaunched. Pure: the caller gives the time.
///
/// A relaunch is wanted when an event is recorded for a preserved session that registered a unit. It is started when:
///
/// - the registration's **backoff** has passed: after each relaunch the next waits 2 s, then 4 s, 8 s... up to a
///   minute, until the app reclaims its session (`hello` with its restore id), which resets the backoff;
/// - the registration has had fewer than ``Settings/perMinute`` relaunches in the last minute;
/// - fewer than ``Settings/maximumAwaiting`` relaunched apps are still *awaited*: started in the last
///   ``Settings/awaitNanoseconds`` and not back yet. A daemon restart that records events for every preserved session
///   so starts a few apps at a time, not all at once.
///
/// A relaunch wanted while limited is not lost: it goes when the limits allow, oldest wish first.
struct RelaunchLimiter<Key: Hashable & Sendable> {
    struct Settings: Sendable {
        var perMinute = 3
        var firstBackoffNanoseconds: UInt64 = 2_000_000_000
        var maximumBackoffNanoseconds: UInt64 = 60_000_000_000
        var maximumAwaiting = 4
        var awaitNanoseconds: UInt64 = 30_000_000_000
    }

    /// Why a wanted relaunch waits, for the log.
    enum Limit: Sendable, Hashable {
        /// The backoff since the last relaunch has not passed.
        case backoff
        /// ``Settings/perMinute`` relaunches in the last minute.
        case perMinute
        /// ``Settings/maximumAwaiting`` relaunched apps have not come back yet.
        case awaiting
    }

    struct Registration: Sendable {
        var wanted = false
        /// The order in which the waiting relaunches were wanted.
        var wish: UInt64 = 0
        /// The relaunches of the last minute.
        var starts: [UInt64] = []
        var backoff: UInt64
        var notBefore: UInt64 = 0
        /// When the app was last relaunched, while it has not come back.
        var awaitedSince: UInt64?
        /// The limit last reported for the current wish (each is logged once).
        var reported: Limit?
    }

    static var minute: UInt64 { 60_000_000_000 }
    let settings: Settings
    private(set) var registrations: [Key: Registration] = [:]
    private var wishes: UInt64 = 0

    init(settings: Settings = Settings()) { self.settings = settings }

    /// An event was recorded for `key`'s preserved session.
    mutating func want(_ key: Key, now: UInt64) {
        var registration = registrations[key] ?? Registration(backoff: settings.firstBackoffNanoseconds)
        if !registration.wanted {
            registration.wanted = true
            wishes += 1
            registration.wish = wishes
            registration.reported = nil
        }
        registrations[key] = registration
    }

    /// The app came back (claimed its session): its backoff starts over and it is no longer awaited.
    mutating func reclaimed(_ key: Key) {
        guard var registration = registrations[key] else { return }
        registration.backoff = settings.firstBackoffNanoseconds
        registration.notBefore = 0
        registration.awaitedSince = nil
        registration.wanted = false
        registrations[key] = registration
    }

    /// The relaunch's start failed or was refused: the app is not awaited (its backoff and the count per minute stay).
    mutating func startFailed(_ key: Key) { registrations[key]?.awaitedSince = nil }

    /// The registration is gone (its session expired, was dropped or unsubscribed).
    mutating func forget(_ key: Key) { registrations[key] = nil }

    /// The relaunches to start now, oldest wish first; each counts as started. `limited` gets the wishes that wait,
    /// with why, once per wish and limit.
    mutating func due(now: UInt64, limited: inout [(Key, Limit)]) -> [Key] {
        var awaiting = 0
        for (key, var registration) in registrations {
            registration.starts.removeAll { now &- $0 >= Self.minute }
            if let since = registration.awaitedSince, now &- since >= settings.awaitNanoseconds {
                registration.awaitedSince = nil
            }
            if registration.awaitedSince != nil { awaiting += 1 }
            // A registration with nothing to remember (not wanted, no recent start, not awaited) is dropped.
            if !registration.wanted && registration.starts.isEmpty && registration.awaitedSince == nil {
                registrations[key] = nil
            } else {
                registrations[key] = registration
            }
        }
        var started: [Key] = []
        for (key, var registration) in registrations.filter(\.value.wanted).sorted(by: { $0.value.wish < $1.value.wish }) {
            let limit: Limit? =
                now < registration.notBefore
                ? .backoff
                : registration.starts.count >= settings.perMinute
                    ? .perMinute : awaiting >= settings.maximumAwaiting ? .awaiting : nil
            if let limit {
                if registration.reported != limit {
                    registration.reported = limit
                    limited.append((key, limit))
                    registrations[key] = registration
                }
                continue
            }
            registration.wanted = false
            registration.reported = nil
            registration.starts.append(now)
            registration.notBefore = now + registration.backoff
            registration.backoff = min(registration.backoff * 2, settings.maximumBackoffNanoseconds)
            registration.awaitedSince = now
            awaiting += 1
            registrations[key] = registration
            started.append(key)
        }
        return started
    }

    /// Nanoseconds until a waiting relaunch may go; `nil` when nothing waits.
    func nanosecondsUntilDue(now: UInt64) -> UInt64? {
        let awaited = registrations.values.compactMap(\.awaitedSince).filter { now &- $0 < settings.awaitNanoseconds }
        // While the awaited apps are at the cap, nothing goes before the first of them stops counting.
        let release = awaited.count >= settings.maximumAwaiting ? awaited.min()! + settings.awaitNanoseconds : 0
        var due: UInt64?
        for registration in registrations.values where registration.wanted {
            var at = max(registration.notBefore, release)
            let recent = registration.starts.filter { now &- $0 < Self.minute }
            if recent.count >= settings.perMinute, let oldest = recent.min() { at = max(at, oldest + Self.minute) }
            due = min(due ?? .max, at > now ? at - now : 0)
        }
        return due
    }
}
