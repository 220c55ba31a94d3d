public import AccmonSys
import CSystemd
import Glibc

/// An error from the system bus or from systemd: a D-Bus error name and message (such as
/// `org.freedesktop.systemd1.NoSuchUnit: Unit accmon-x@1.service not found.`), or a failed call's errno.
public struct SystemdBusError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The D-Bus error name; empty when the call failed locally (then ``message`` holds the errno's text).
    public var name: String
    public var message: String

    public var description: String { name.isEmpty ? message : "\(name): \(message)" }

    public init(name: String, message: String) {
        self.name = name
        self.message = message
    }
}

/// A `JobRemoved` signal of systemd's manager: a job ended with `result` (`done`, `canceled`, `timeout`, `failed`,
/// `dependency` or `skipped`; org.freedesktop.systemd1(5)).
public struct SystemdJobRemoved: Sendable, Hashable {
    public var job: String
    public var unit: String
    public var result: String
}

/// A connection to the system bus for asking systemd's manager (PID 1) to start and stop units, through sd-bus
/// (sd-bus(3)). Calls are synchronous: use it on a thread of its own, never on a loop that must not wait.
///
/// - Important: not thread-safe: one thread uses a bus, as sd-bus requires.
public final class SystemdBus {
    private var bus: OpaquePointer?
    private static let destination = "org.freedesktop.systemd1"
    private static let managerPath = "/org/freedesktop/systemd1"
    private static let managerInterface = "org.freedesktop.systemd1.Manager"
    /// The most a call waits for systemd's reply.
    private static let callTimeoutMicroseconds: UInt64 = 25_000_000

    /// Connects to the system bus and asks the bus for systemd's `JobRemoved` signals.
    public init() throws(SystemdBusError) {
        var opened: OpaquePointer?
        let result = sd_bus_open_system(&opened)
        guard result >= 0, let opened else { throw Self.failure("sd_bus_open_system", result) }
        bus = opened
        // A match rule installed with a plain AddMatch call: the signals then come out of sd_bus_process(), with no C
        // callback to bridge. systemd sends a job's JobRemoved on the API bus to the client that queued the job.
        let rule =
            "type='signal',sender='\(Self.destination)',path='\(Self.managerPath)',"
            + "interface='\(Self.managerInterface)',member='JobRemoved'"
        _ = try call(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
            member: "AddMatch", arguments: [rule])
    }

    deinit { _ = sd_bus_flush_close_unref(bus) }

    /// The descriptor to wait on (readable: call ``takeJobRemovals()``).
    public var descriptor: FileDescriptor { FileDescriptor(rawValue: sd_bus_get_fd(bus)) }

    /// Milliseconds until sd-bus needs ``takeJobRemovals()`` again for its own timeouts; `nil` for none.
    public func millisecondsUntilTimeout() -> Int32? {
        var due: UInt64 = 0
        guard sd_bus_get_timeout(bus, &due) >= 0, due != UInt64.max else { return nil }
        let now = monotonicNanoseconds() / 1000
        return due <= now ? 0 : Int32(min((due - now) / 1000 + 1, 60_000))
    }

    /// Asks systemd to start `unit`, replacing conflicting jobs (`StartUnit(unit, "replace")`).
    /// - Returns: the job's object path; its end comes as a ``SystemdJobRemoved`` with that path.
    public func startUnit(_ unit: String) throws(SystemdBusError) -> String {
        try managerCall("StartUnit", unit)
    }

    /// Asks systemd to stop `unit` (`StopUnit(unit, "replace")`).
    /// - Returns: the job's object path.
    public func stopUnit(_ unit: String) throws(SystemdBusError) -> String {
        try managerCall("StopUnit", unit)
    }

    /// A string property of a unit, such as `ActiveState` (`org.freedesktop.systemd1.Unit`) or `User` and `Result`
    /// (`org.freedesktop.systemd1.Service`). Reading a unit's property loads the unit when it is not loaded.
    public func unitProperty(_ unit: String, interface: String, _ name: String) throws(SystemdBusError) -> String {
        let path = try unitPath(unit)
        var error = sd_bus_error()
        defer { sd_bus_error_free(&error) }
        var value: UnsafeMutablePointer<CChar>?
        let result = sd_bus_get_property_string(bus, Self.destination, path, interface, name, &error, &value)
        guard result >= 0, let value else { throw Self.failure("Get \(name)", result, error) }
        defer { free(value) }
        return String(cString: value)
    }

    /// A 32-bit integer or boolean property of a unit (`ExecMainStatus`, `DynamicUser`...): `type` is `i` or `b`.
    public func unitIntegerProperty(_ unit: String, interface: String, _ name: String, type: Character = "i")
        throws(SystemdBusError) -> Int32
    {
        let path = try unitPath(unit)
        var error = sd_bus_error()
        defer { sd_bus_error_free(&error) }
        var value: Int32 = 0
        let result = sd_bus_get_property_trivial(
            bus, Self.destination, path, interface, name, &error, CChar(type.asciiValue!), &value)
        guard result >= 0 else { throw Self.failure("Get \(name)", result, error) }
        return value
    }

    /// Reads what arrived: the `JobRemoved` signals, in order. Never waits.
    /// - Throws: when the connection is lost (reconnect with a new ``SystemdBus``).
    public func takeJobRemovals() throws(SystemdBusError) -> [SystemdJobRemoved] {
        var removals: [SystemdJobRemoved] = []
        while true {
            var message: OpaquePointer?
            let result = sd_bus_process(bus, &message)
            if result < 0 { throw Self.failure("sd_bus_process", result) }
            if let message {
                defer { sd_bus_message_unref(message) }
                if sd_bus_message_is_signal(message, Self.managerInterface, "JobRemoved") > 0,
                    let removal = Self.jobRemoved(message)
                {
                    removals.append(removal)
                }
            }
            if result == 0 { return removals }
        }
    }

    // MARK: Calls

    private func managerCall(_ member: String, _ unit: String) throws(SystemdBusError) -> String {
        let reply = try call(
            destination: Self.destination, path: Self.managerPath, interface: Self.managerInterface, member: member,
            arguments: [unit, "replace"])
        defer { sd_bus_message_unref(reply) }
        var path: UnsafePointer<CChar>?
        let result = sd_bus_message_read_basic(reply, CChar(UInt8(ascii: "o")), &path)
        guard result > 0, let path else { throw Self.failure("\(member): reading the job path", result) }
        return String(cString: path)
    }

    /// Calls a method with string arguments; returns the reply (unref it).
    private func call(destination: String, path: String, interface: String, member: String, arguments: [String])
        throws(SystemdBusError) -> OpaquePointer
    {
        var message: OpaquePointer?
        var result = sd_bus_message_new_method_call(bus, &message, destination, path, interface, member)
        guard result >= 0, let message else { throw Self.failure(member, result) }
        defer { sd_bus_message_unref(message) }
        for argument in arguments {
            result = argument.withCString { sd_bus_message_append_basic(message, CChar(UInt8(ascii: "s")), $0) }
            guard result >= 0 else { throw Self.failure("\(member): appending an argument", result) }
        }
        var error = sd_bus_error()
        defer { sd_bus_error_free(&error) }
        var reply: OpaquePointer?
        result = sd_bus_call(bus, message, Self.callTimeoutMicroseconds, &error, &reply)
        guard result >= 0, let reply else { throw Self.failure(member, result, error) }
        return reply
    }

    private func unitPath(_ unit: String) throws(SystemdBusError) -> String {
        var path: UnsafeMutablePointer<CChar>?
        let result = sd_bus_path_encode("/org/freedesktop/systemd1/unit", unit, &path)
        guard result >= 0, let path else { throw Self.failure("sd_bus_path_encode", result) }
        defer { free(path) }
        return String(cString: path)
    }

    /// The signal's `(u id, o job, s unit, s result)`.
    private static func jobRemoved(_ message: OpaquePointer) -> SystemdJobRemoved? {
        var id: UInt32 = 0
        var fields: [String] = []
        guard sd_bus_message_read_basic(message, CChar(UInt8(ascii: "u")), &id) > 0 else { return nil }
        for type in ["o", "s", "s"] {
            var text: UnsafePointer<CChar>?
            guard sd_bus_message_read_basic(message, CChar(type.utf8.first!), &text) > 0, let text else { return nil }
            fields.append(String(cString: text))
        }
        return SystemdJobRemoved(job: fields[0], unit: fields[1], result: fields[2])
    }

    private static func failure(_ context: String, _ result: Int32, _ error: sd_bus_error = sd_bus_error())
        -> SystemdBusError
    {
        if let name = error.name {
            return SystemdBusError(name: String(cString: name), message: error.message.map { String(cString: $0) } ?? "")
        }
        return SystemdBusError(name: "", message: "\(context): \(Errno(rawValue: -result))")
    }
}
