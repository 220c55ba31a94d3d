public import AccmonSys
import CSystemd
import Glibc

/// A connection to a message bus for a service: it owns names, takes the method calls sent to it and sends
/// replies and signals, through sd-bus (sd-bus(3)) with no C callback: no object is registered with sd-bus, so
/// ``next()`` hands every incoming method call, signal and unclaimed reply to the caller, who answers it.
///
/// - Important: not thread-safe: one thread uses a connection and its messages, as sd-bus requires.
public final class BusConnection {
    private let bus: OpaquePointer
    /// The bus's address (`unix:path=...`), or `nil` for the system bus by libsystemd's rules
    /// (`DBUS_SYSTEM_BUS_ADDRESS`, else `/run/dbus/system_bus_socket`).
    public let address: String?
    /// The most a synchronous call waits by default (calls to the bus driver).
    public static let callTimeoutMicroseconds: UInt64 = 5_000_000

    /// Connects and says `Hello`; descriptors may be passed both ways.
    public init(address: String?) throws(SystemdBusError) {
        self.address = address
        var made: OpaquePointer?
        var result = sd_bus_new(&made)
        guard result >= 0, let made else { throw Self.failure("sd_bus_new", result) }
        bus = made
        if let address {
            result = sd_bus_set_address(bus, address)
        } else if let fromEnvironment = getenv("DBUS_SYSTEM_BUS_ADDRESS") {
            result = sd_bus_set_address(bus, fromEnvironment)
        } else {
            result = sd_bus_set_address(bus, "unix:path=/run/dbus/system_bus_socket")
        }
        if result >= 0 { result = sd_bus_set_bus_client(bus, 1) }
        if result >= 0 { result = sd_bus_negotiate_fds(bus, 1) }
        if result >= 0 { result = sd_bus_start(bus) }
        guard result >= 0 else {
            _ = sd_bus_flush_close_unref(bus)
            throw Self.failure("connecting to \(address ?? "the system bus")", result)
        }
    }

    deinit { _ = sd_bus_flush_close_unref(bus) }

    /// This connection's unique name, such as `:1.42`.
    public var uniqueName: String {
        var name: UnsafePointer<CChar>?
        guard sd_bus_get_unique_name(bus, &name) >= 0, let name else { return "" }
        return String(cString: name)
    }

    /// Asks for `name`; fails when another connection owns it (no queueing, no replacement).
    public func requestName(_ name: String) throws(SystemdBusError) {
        let result = sd_bus_request_name(bus, name, 0)
        guard result >= 0 else {
            throw Self.failure(
                "RequestName \(name)", result,
                hint: result == -EEXIST
                    ? "another connection owns it" : result == -EACCES ? "the bus's policy does not let this user own it" : nil)
        }
    }

    /// The descriptor to wait on, with ``pollEvents``.
    public var descriptor: FileDescriptor { FileDescriptor(rawValue: sd_bus_get_fd(bus)) }

    /// The `poll(2)` events to wait for now (`POLLIN`, and `POLLOUT` while messages wait to be written).
    public var pollEvents: Int16 { Int16(truncatingIfNeeded: max(0, sd_bus_get_events(bus))) }

    /// Milliseconds until sd-bus needs ``next()`` again for its own timeouts; `nil` for none.
    public func millisecondsUntilTimeout() -> Int32? {
        var due: UInt64 = 0
        guard sd_bus_get_timeout(bus, &due) >= 0, due != UInt64.max else { return nil }
        let now = monotonicNanoseconds() / 1000
        return due <= now ? 0 : Int32(min((due - now) / 1000 + 1, 60_000))
    }

    /// Reads and writes what the socket allows, and returns the next incoming message sd-bus did not handle
    /// itself (method calls to this service, signals it asked for, replies to ``send(_:)``'s calls); `nil` when
    /// nothing more is there now.
    /// - Throws: when the connection is lost.
    public func next() throws(SystemdBusError) -> BusMessage? {
        while true {
            var message: OpaquePointer?
            let result = sd_bus_process(bus, &message)
            if result < 0 { throw Self.failure("sd_bus_process", result) }
            if let message {
                let taken = BusMessage(taking: message)
                if taken.isSignal("org.freedesktop.DBus.Local", "Disconnected") {
                    throw SystemdBusError(name: "", message: "the bus closed the connection")
                }
                return taken
            }
            if result == 0 { return nil }
        }
    }

    /// Messages queued and not yet written to the socket; `nil` when sd-bus cannot tell.
    public var queuedWriteCount: UInt64? {
        var count: UInt64 = 0
        return sd_bus_get_n_queued_write(bus, &count) >= 0 ? count : nil
    }

    /// Writes what waits to be written, waiting for the socket if need be (at the end, or before closing).
    public func flush() { _ = sd_bus_flush(bus) }

    /// Queues `message` for sending.
    /// - Returns: its serial (cookie), which a reply names.
    @discardableResult
    public func send(_ message: BusMessage) throws(SystemdBusError) -> UInt64 {
        var cookie: UInt64 = 0
        let result = sd_bus_send(bus, message.pointer, &cookie)
        guard result >= 0 else { throw Self.failure("sd_bus_send", result) }
        return cookie
    }

    /// A reply to `call`, to be filled and sent.
    public func methodReturn(to call: BusMessage) throws(SystemdBusError) -> BusMessage {
        var made: OpaquePointer?
        let result = sd_bus_message_new_method_return(call.pointer, &made)
        guard result >= 0, let made else { throw Self.failure("sd_bus_message_new_method_return", result) }
        return BusMessage(taking: made)
    }

    /// An error reply to `call`: a D-Bus error name and a message.
    public func methodError(to call: BusMessage, name: String, message: String) throws(SystemdBusError) -> BusMessage {
        var made: OpaquePointer?
        var error = sd_bus_error()
        defer { sd_bus_error_free(&error) }
        var result = sd_bus_error_set(&error, name, message)
        guard error.name != nil else { throw Self.failure("sd_bus_error_set \(name)", result) }
        result = sd_bus_message_new_method_error(call.pointer, &made, &error)
        guard result >= 0, let made else { throw Self.failure("sd_bus_message_new_method_error", result) }
        return BusMessage(taking: made)
    }

    /// A signal, sent to `destination` alone (unicast) or, with `nil`, to every connection whose match rules take it.
    public func signal(path: String, interface: String, member: String, destination: String?)
        throws(SystemdBusError) -> BusMessage
    {
        var made: OpaquePointer?
        var result = sd_bus_message_new_signal(bus, &made, path, interface, member)
        guard result >= 0, let made else { throw Self.failure("sd_bus_message_new_signal \(member)", result) }
        let message = BusMessage(taking: made)
        if let destination {
            result = sd_bus_message_set_destination(made, destination)
            guard result >= 0 else { throw Self.failure("sd_bus_message_set_destination", result) }
        }
        return message
    }

    /// A method call, to be filled and sent with ``send(_:)`` (its reply comes out of ``next()``) or ``call(_:)``.
    public func methodCall(destination: String, path: String, interface: String, member: String)
        throws(SystemdBusError) -> BusMessage
    {
        var made: OpaquePointer?
        let result = sd_bus_message_new_method_call(bus, &made, destination, path, interface, member)
        guard result >= 0, let made else { throw Self.failure("sd_bus_message_new_method_call \(member)", result) }
        return BusMessage(taking: made)
    }

    /// Sends `message` and waits for its reply, at most `timeoutMicroseconds` (default five seconds;
    /// `UInt64.max`: as long as it takes); other incoming messages wait for ``next()``.
    public func call(_ message: BusMessage, timeoutMicroseconds: UInt64 = callTimeoutMicroseconds)
        throws(SystemdBusError) -> BusMessage
    {
        var error = sd_bus_error()
        defer { sd_bus_error_free(&error) }
        var reply: OpaquePointer?
        let result = sd_bus_call(bus, message.pointer, timeoutMicroseconds, &error, &reply)
        if let name = error.name {
            throw SystemdBusError(name: String(cString: name), message: error.message.map { String(cString: $0) } ?? "")
        }
        guard result >= 0, let reply else { throw Self.failure("\(message.member ?? "call")", result) }
        return BusMessage(taking: reply)
    }

    /// Calls a method of the bus driver (`org.freedesktop.DBus`) and returns its reply's arguments.
    public func callDriver(_ member: String, _ arguments: [BusValue]) throws(SystemdBusError) -> [BusValue] {
        let message = try methodCall(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
            member: member)
        try message.append(arguments)
        return try call(message).readArguments()
    }

    /// A property of an object of `destination` (`org.freedesktop.DBus.Properties.Get`), unwrapped from its variant.
    public func getProperty(
        _ path: String, _ interface: String, _ name: String, of destination: String = "org.accmon.Accmon1"
    ) throws(SystemdBusError) -> BusValue? {
        let call = try methodCall(
            destination: destination, path: path, interface: "org.freedesktop.DBus.Properties", member: "Get")
        try call.append([.string(interface), .string(name)])
        guard case .variant(let value)? = try self.call(call, timeoutMicroseconds: 25_000_000).readArguments().first else {
            return nil
        }
        return value
    }

    static func failure(_ context: String, _ result: Int32, hint: String? = nil) -> SystemdBusError {
        SystemdBusError(
            name: "", message: "\(context): \(Errno(rawValue: result < 0 ? -result : result))" + (hint.map { " (\($0))" } ?? ""))
    }
}
