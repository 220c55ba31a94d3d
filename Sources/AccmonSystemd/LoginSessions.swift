public import AccmonSys
import CSystemd
import Glibc

/// logind's view of login sessions, from sd-login(3): files logind keeps in `/run/systemd`, read without the bus.
///
/// A caller's session is the one its process is in (`sd_pid_get_session`), else its user's display session
/// (`sd_uid_get_display`), as polkit finds it: desktop and Flatpak apps run in their user manager's scopes, not in
/// a login session.
public enum LoginSessions {
    /// A login session as logind describes it.
    public struct Session: Sendable, Hashable, CustomStringConvertible {
        /// logind's id, such as `3` or `c2`.
        public var id: String
        public var uid: uid_t
        /// The seat, for a local session at one (`seat0`).
        public var seat: String?
        /// `online`, `active` or `closing`.
        public var state: String
        public var isRemote: Bool
        /// `tty`, `x11`, `wayland`, `mir` or `unspecified`.
        public var type: String
        /// `user`, `greeter`, `lock-screen` or `background`.
        public var sessionClass: String

        /// In front: the active session of its seat (sd_session_is_active).
        public var isActive: Bool { state == "active" }

        public var description: String {
            "session \(id) of uid \(uid)" + (seat.map { " on \($0)" } ?? "") + ", \(state)" + (isRemote ? ", remote" : "")
        }
    }

    /// Whether logind runs here (its runtime directory exists: a system booted with systemd).
    public static var isAvailable: Bool { access("/run/systemd/sessions", F_OK) == 0 && sd_booted() > 0 }

    /// The session of process `pid` (of user `uid`), else the user's display session; `nil` when there is none.
    public static func session(ofProcess pid: pid_t, uid: uid_t) -> Session? {
        if let id = text({ sd_pid_get_session(pid, $0) }), let found = session(id) { return found }
        if let id = text({ sd_uid_get_display(uid, $0) }), let found = session(id) { return found }
        return nil
    }

    /// The session `id`, as logind describes it now; `nil` when it is gone.
    public static func session(_ id: String) -> Session? {
        var uid: uid_t = 0
        guard sd_session_get_uid(id, &uid) >= 0, let state = text({ sd_session_get_state(id, $0) }) else { return nil }
        return Session(
            id: id, uid: uid, seat: text { sd_session_get_seat(id, $0) }, state: state,
            isRemote: sd_session_is_remote(id) > 0, type: text { sd_session_get_type(id, $0) } ?? "unspecified",
            sessionClass: text { sd_session_get_class(id, $0) } ?? "user")
    }

    /// logind's object path of session `id` (`/org/freedesktop/login1/session/_32` for `2`).
    public static func objectPath(ofSession id: String) throws(SystemdBusError) -> String {
        var path: UnsafeMutablePointer<CChar>?
        let result = sd_bus_path_encode("/org/freedesktop/login1/session", id, &path)
        guard result >= 0, let path else {
            throw SystemdBusError(name: "", message: "sd_bus_path_encode \(id): \(Errno(rawValue: -result))")
        }
        defer { free(path) }
        return String(cString: path)
    }

    /// The string an sd-login call returns through its `char **` (freed here); `nil` when it fails.
    private static func text(_ call: (UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> Int32) -> String? {
        var value: UnsafeMutablePointer<CChar>?
        guard call(&value) >= 0, let value else { return nil }
        defer { free(value) }
        return String(cString: value)
    }
}

/// A descriptor that turns readable when logind's sessions change (`sd_login_monitor`, category `session`): a
/// session begins, ends or becomes active or inactive. For the thread that follows sessions; ``flush()`` after each
/// wake-up.
///
/// - Important: not thread-safe: one thread uses it.
public final class LoginMonitor {
    private let monitor: OpaquePointer

    public init() throws(Errno) {
        var made: OpaquePointer?
        let result = sd_login_monitor_new("session", &made)
        guard result >= 0, let made else { throw Errno(rawValue: -result) }
        monitor = made
    }

    deinit { _ = sd_login_monitor_unref(monitor) }

    public var descriptor: FileDescriptor { FileDescriptor(rawValue: sd_login_monitor_get_fd(monitor)) }

    /// Clears the readiness, after a wake-up.
    public func flush() { _ = sd_login_monitor_flush(monitor) }
}
