import AccmonSys
import AccmonSystemd

/// The polkit checks the bus thread has asked and not yet been answered (`org.freedesktop.PolicyKit1.Authority.
/// CheckAuthorization`, sent without waiting: its reply comes out of the connection as any other message).
///
/// The subject is the caller's bus name (`system-bus-name`), so that polkit judges the caller's own session and
/// process; polkit lets only root or an action's owner (`org.freedesktop.policykit.owner`) check another subject.
/// A check without an answer in time is refused, never allowed: ``nonInteractiveSeconds``, or ``interactiveSeconds``
/// when the caller allowed interactive authorization (an agent's password dialog).
///
/// - Important: the bus thread's, as its connection.
struct PolkitChecks {
    static let nonInteractiveSeconds: UInt64 = 10
    static let interactiveSeconds: UInt64 = 300
    static let authority = "org.freedesktop.PolicyKit1"

    private var pending: [UInt64: (id: UInt64, action: String, deadline: UInt64)] = [:]

    /// Sends the check; an error sending it is its answer.
    mutating func start(
        id: UInt64, peer: String, action: String, details: [String: String], interactive: Bool, on connection: BusConnection
    ) -> (id: UInt64, BusAuthorization)? {
        do throws(SystemdBusError) {
            let call = try connection.methodCall(
                destination: Self.authority, path: "/org/freedesktop/PolicyKit1/Authority",
                interface: "org.freedesktop.PolicyKit1.Authority", member: "CheckAuthorization")
            try call.append([
                .structure([.string("system-bus-name"), .vardict([("name", .string(peer))])]),
                .string(action),
                .array(
                    element: "{ss}",
                    details.sorted { $0.key < $1.key }.map { .dictEntry(.string($0.key), .string($0.value)) }),
                .uint32(interactive ? 1 : 0),  // AllowUserInteraction
                .string(""),
            ])
            let cookie = try connection.send(call)
            let seconds = interactive ? Self.interactiveSeconds : Self.nonInteractiveSeconds
            pending[cookie] = (id, action, monotonicNanoseconds() + seconds * 1_000_000_000)
            return nil
        } catch {
            return (id, .unavailable("polkit: cannot ask it: \(error)"))
        }
    }

    /// The answer a reply carries, when it answers one of the checks.
    mutating func answer(_ message: BusMessage) -> (id: UInt64, BusAuthorization)? {
        guard let cookie = message.replyCookie, let check = pending.removeValue(forKey: cookie) else { return nil }
        if message.kind == .error {
            let name = message.errorName ?? "an error"
            if name == "org.freedesktop.DBus.Error.ServiceUnknown" || name == "org.freedesktop.DBus.Error.NameHasNoOwner" {
                return (check.id, .unavailable("polkit is not running on this bus (\(name))"))
            }
            return (check.id, .unavailable("polkit: \(name): \(message.errorMessage ?? "")"))
        }
        // (bba{ss}): is_authorized, is_challenge, details.
        guard let arguments = try? message.readArguments(),  // try?: a malformed answer is a refusal
            case .structure(let fields)? = arguments.first, fields.count == 3,
            case .boolean(let authorized) = fields[0], case .boolean(let challenge) = fields[1]
        else {
            return (check.id, .unavailable("polkit: an answer of another shape than (bba{ss})"))
        }
        if authorized { return (check.id, .allowed) }
        return (
            check.id,
            .denied(
                challenge
                    ? "polkit: \(check.action) needs authentication: call with interactive authorization allowed (an"
                        + " authentication agent then asks)"
                    : "polkit: not authorized for \(check.action)")
        )
    }

    /// The checks past their deadline, refused.
    mutating func expired(now: UInt64) -> [(id: UInt64, BusAuthorization)] {
        let late = pending.filter { $0.value.deadline <= now }
        for cookie in late.keys { pending[cookie] = nil }
        return late.values.map { ($0.id, .unavailable("polkit did not answer within the time allowed for \($0.action)")) }
    }

    /// Milliseconds until the next deadline; `nil` with none pending.
    func millisecondsUntilDeadline(now: UInt64) -> Int32? {
        guard let next = pending.values.map(\.deadline).min() else { return nil }
        return next <= now ? 0 : Int32(min((next - now) / 1_000_000 + 1, 60_000))
    }

    /// Every check, refused: the connection they were asked on is gone.
    mutating func cancelAll(_ reason: String) -> [(id: UInt64, BusAuthorization)] {
        defer { pending = [:] }
        return pending.values.map { ($0.id, .unavailable("polkit: \(reason)")) }
    }
}
