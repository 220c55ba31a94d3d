import AccmonSys
import CSystemd
import Glibc

/// One D-Bus message of sd-bus (`sd_bus_message`), holding a reference; its arguments are read and appended as
/// ``BusValue``s.
///
/// - Important: not thread-safe: a message stays on the thread of its bus, as sd-bus requires.
public final class BusMessage {
    /// The message's kind (the header's type field).
    public enum Kind: UInt8, Sendable {
        case methodCall = 1
        case methodReturn = 2
        case error = 3
        case signal = 4
    }

    let pointer: OpaquePointer

    /// Takes over a reference the caller holds.
    init(taking pointer: OpaquePointer) { self.pointer = pointer }

    deinit { sd_bus_message_unref(pointer) }

    public var kind: Kind? {
        var type: UInt8 = 0
        guard sd_bus_message_get_type(pointer, &type) >= 0 else { return nil }
        return Kind(rawValue: type)
    }

    /// The sender's unique name (set by the bus).
    public var sender: String? { sd_bus_message_get_sender(pointer).map { String(cString: $0) } }
    public var path: String? { sd_bus_message_get_path(pointer).map { String(cString: $0) } }
    public var interface: String? { sd_bus_message_get_interface(pointer).map { String(cString: $0) } }
    public var member: String? { sd_bus_message_get_member(pointer).map { String(cString: $0) } }
    /// The signature of the whole body.
    public var signature: String { sd_bus_message_get_signature(pointer, 1).map { String(cString: $0) } ?? "" }
    /// Whether the caller lets the service ask the user to authenticate (`ALLOW_INTERACTIVE_AUTHORIZATION`): polkit
    /// may then start an authentication agent's dialog.
    public var allowsInteractiveAuthorization: Bool {
        sd_bus_message_get_allow_interactive_authorization(pointer) > 0
    }
    /// Lets the service called ask the caller's user to authenticate (polkit, through an authentication agent).
    public func allowInteractiveAuthorization() {
        _ = sd_bus_message_set_allow_interactive_authorization(pointer, 1)
    }

    /// For a reply or an error, the serial of the call it answers.
    public var replyCookie: UInt64? {
        var cookie: UInt64 = 0
        return sd_bus_message_get_reply_cookie(pointer, &cookie) >= 0 ? cookie : nil
    }
    /// An error reply's message.
    public var errorMessage: String? {
        guard let error = sd_bus_message_get_error(pointer), let message = error.pointee.message else { return nil }
        return String(cString: message)
    }
    /// Whether the caller asked for no reply (`NO_REPLY_EXPECTED`).
    public var expectsReply: Bool { sd_bus_message_get_expect_reply(pointer) > 0 }
    /// An error message's name.
    public var errorName: String? {
        guard let error = sd_bus_message_get_error(pointer), let name = error.pointee.name else { return nil }
        return String(cString: name)
    }

    /// Whether this is a signal `member` of `interface`.
    public func isSignal(_ interface: String, _ member: String) -> Bool {
        sd_bus_message_is_signal(pointer, interface, member) > 0
    }

    // MARK: Writing

    /// Appends `values` to the body. A ``BusValue/unixFD(_:)`` is duplicated by sd-bus: the caller keeps its own.
    public func append(_ values: [BusValue]) throws(SystemdBusError) {
        for value in values { try append(value) }
    }

    /// Appends one value.
    public func append(_ value: BusValue) throws(SystemdBusError) {
        let result: Int32
        switch value {
        case .byte(var byte): result = sd_bus_message_append_basic(pointer, Self.code("y"), &byte)
        case .boolean(let flag):
            var number: Int32 = flag ? 1 : 0  // sd-bus reads a `b` as an int
            result = sd_bus_message_append_basic(pointer, Self.code("b"), &number)
        case .int16(var number): result = sd_bus_message_append_basic(pointer, Self.code("n"), &number)
        case .uint16(var number): result = sd_bus_message_append_basic(pointer, Self.code("q"), &number)
        case .int32(var number): result = sd_bus_message_append_basic(pointer, Self.code("i"), &number)
        case .uint32(var number): result = sd_bus_message_append_basic(pointer, Self.code("u"), &number)
        case .int64(var number): result = sd_bus_message_append_basic(pointer, Self.code("x"), &number)
        case .uint64(var number): result = sd_bus_message_append_basic(pointer, Self.code("t"), &number)
        case .double(var number): result = sd_bus_message_append_basic(pointer, Self.code("d"), &number)
        case .string(let text): result = text.withCString { sd_bus_message_append_basic(pointer, Self.code("s"), $0) }
        case .objectPath(let text):
            result = text.withCString { sd_bus_message_append_basic(pointer, Self.code("o"), $0) }
        case .signature(let text):
            result = text.withCString { sd_bus_message_append_basic(pointer, Self.code("g"), $0) }
        case .unixFD(var descriptor): result = sd_bus_message_append_basic(pointer, Self.code("h"), &descriptor)
        case .array(let element, let items):
            try container("a", element) { () throws(SystemdBusError) in
                for item in items { try append(item) }
            }
            return
        case .dictEntry(let key, let entryValue):
            try container("e", key.signature + entryValue.signature) { () throws(SystemdBusError) in
                try append(key)
                try append(entryValue)
            }
            return
        case .structure(let fields):
            try container("r", fields.map(\.signature).joined()) { () throws(SystemdBusError) in
                for field in fields { try append(field) }
            }
            return
        case .variant(let inner):
            try container("v", inner.signature) { () throws(SystemdBusError) in try append(inner) }
            return
        }
        guard result >= 0 else { throw Self.failure("appending a '\(value.signature)'", result) }
    }

    /// Appends a string (`s`). A string with a NUL character is cut there: D-Bus strings cannot hold one.
    public func append(string: String) throws(SystemdBusError) {
        let result = string.withCString { sd_bus_message_append_basic(pointer, Self.code("s"), $0) }
        guard result >= 0 else { throw Self.failure("appending a 's'", result) }
    }

    /// Appends an object path (`o`).
    public func append(objectPath: String) throws(SystemdBusError) {
        let result = objectPath.withCString { sd_bus_message_append_basic(pointer, Self.code("o"), $0) }
        guard result >= 0 else { throw Self.failure("appending a 'o'", result) }
    }

    /// Appends a value of a fixed-size type (`y`, `n`, `q`, `i`, `u`, `x`, `t`, `d`) given as its Swift type.
    public func append<T: FixedWidthInteger & BitwiseCopyable>(_ number: T, type: Character) throws(SystemdBusError) {
        var value = number
        let result = sd_bus_message_append_basic(pointer, Self.code(type), &value)
        guard result >= 0 else { throw Self.failure("appending a '\(type)'", result) }
    }

    /// Appends a `d`.
    public func append(double: Double) throws(SystemdBusError) {
        var value = double
        let result = sd_bus_message_append_basic(pointer, Self.code("d"), &value)
        guard result >= 0 else { throw Self.failure("appending a 'd'", result) }
    }

    /// Appends a container of `type` (`a`, `e` for a dict entry, `r` for a struct, `v`) holding `contents`, whose
    /// elements `body` appends.
    public func container(_ type: Character, _ contents: String, _ body: () throws(SystemdBusError) -> Void)
        throws(SystemdBusError)
    {
        var result = sd_bus_message_open_container(pointer, Self.code(type), contents)
        guard result >= 0 else { throw Self.failure("opening a '\(type)' of '\(contents)'", result) }
        try body()
        result = sd_bus_message_close_container(pointer)
        guard result >= 0 else { throw Self.failure("closing a '\(type)' of '\(contents)'", result) }
    }

    /// Appends one entry of an `a{sv}` (inside its open array): `key` and `value` as a variant.
    public func appendEntry(_ key: String, _ value: BusValue) throws(SystemdBusError) {
        try container("e", "sv") { () throws(SystemdBusError) in
            try append(string: key)
            try container("v", value.signature) { () throws(SystemdBusError) in try append(value) }
        }
    }

    /// Appends the whole body of `source` (a message already sent, or read): the same arguments built once for
    /// several messages, such as a signal to several peers.
    public func appendBody(of source: BusMessage) throws(SystemdBusError) {
        var result = sd_bus_message_rewind(source.pointer, 1)
        guard result >= 0 else { throw Self.failure("rewinding the source", result) }
        result = sd_bus_message_copy(pointer, source.pointer, 1)
        guard result >= 0 else { throw Self.failure("copying a body", result) }
    }

    // MARK: Reading

    /// Reads the whole body from its start. A ``BusValue/unixFD(_:)`` read is the message's own descriptor: valid
    /// while the message lives (duplicate it to keep it).
    public func readArguments() throws(SystemdBusError) -> [BusValue] {
        var result = sd_bus_message_rewind(pointer, 1)
        guard result >= 0 else { throw Self.failure("rewinding", result) }
        var values: [BusValue] = []
        while true {
            var type: CChar = 0
            var contents: UnsafePointer<CChar>?
            result = sd_bus_message_peek_type(pointer, &type, &contents)
            guard result >= 0 else { throw Self.failure("reading the body", result) }
            if result == 0 { return values }
            values.append(try readValue(type: type, contents: contents.map { String(cString: $0) } ?? ""))
        }
    }

    private func readValue(type: CChar, contents: String) throws(SystemdBusError) -> BusValue {
        let code = UInt8(bitPattern: type)
        switch code {
        case UInt8(ascii: "a"):
            return .array(element: contents, try readContainer("a", contents))
        case UInt8(ascii: "e"):
            let parts = try readContainer("e", contents)
            guard parts.count == 2 else { throw SystemdBusError(name: "", message: "a dict entry of \(parts.count)") }
            return .dictEntry(parts[0], parts[1])
        case UInt8(ascii: "r"):
            return .structure(try readContainer("r", contents))
        case UInt8(ascii: "v"):
            let inner = try readContainer("v", contents)
            guard inner.count == 1 else { throw SystemdBusError(name: "", message: "a variant of \(inner.count)") }
            return .variant(inner[0])
        default:
            return try readBasic(code)
        }
    }

    private func readContainer(_ type: Character, _ contents: String) throws(SystemdBusError) -> [BusValue] {
        var result = sd_bus_message_enter_container(pointer, Self.code(type), contents)
        guard result > 0 else { throw Self.failure("entering a '\(type)' of '\(contents)'", result) }
        var values: [BusValue] = []
        while true {
            var inner: CChar = 0
            var innerContents: UnsafePointer<CChar>?
            result = sd_bus_message_peek_type(pointer, &inner, &innerContents)
            guard result >= 0 else { throw Self.failure("reading a '\(type)'", result) }
            if result == 0 { break }
            values.append(try readValue(type: inner, contents: innerContents.map { String(cString: $0) } ?? ""))
        }
        result = sd_bus_message_exit_container(pointer)
        guard result >= 0 else { throw Self.failure("leaving a '\(type)'", result) }
        return values
    }

    private func readBasic(_ code: UInt8) throws(SystemdBusError) -> BusValue {
        let type = CChar(bitPattern: code)
        func read<T: BitwiseCopyable>(_ initial: T) throws(SystemdBusError) -> T {
            var value = initial
            let result = sd_bus_message_read_basic(pointer, type, &value)
            guard result > 0 else { throw Self.failure("reading a '\(Character(Unicode.Scalar(code)))'", result) }
            return value
        }
        func readText() throws(SystemdBusError) -> String {
            let text: UnsafePointer<CChar>? = try read(nil)
            return text.map { String(cString: $0) } ?? ""
        }
        switch code {
        case UInt8(ascii: "y"): return .byte(try read(UInt8(0)))
        case UInt8(ascii: "b"): return .boolean(try read(Int32(0)) != 0)
        case UInt8(ascii: "n"): return .int16(try read(Int16(0)))
        case UInt8(ascii: "q"): return .uint16(try read(UInt16(0)))
        case UInt8(ascii: "i"): return .int32(try read(Int32(0)))
        case UInt8(ascii: "u"): return .uint32(try read(UInt32(0)))
        case UInt8(ascii: "x"): return .int64(try read(Int64(0)))
        case UInt8(ascii: "t"): return .uint64(try read(UInt64(0)))
        case UInt8(ascii: "d"): return .double(try read(Double(0)))
        case UInt8(ascii: "s"): return .string(try readText())
        case UInt8(ascii: "o"): return .objectPath(try readText())
        case UInt8(ascii: "g"): return .signature(try readText())
        case UInt8(ascii: "h"): return .unixFD(try read(Int32(-1)))
        default: throw SystemdBusError(name: "", message: "reading the body: unknown type code \(code)")
        }
    }

    static func code(_ type: Character) -> CChar { CChar(bitPattern: type.asciiValue!) }

    static func failure(_ context: String, _ result: Int32) -> SystemdBusError {
        SystemdBusError(name: "", message: "\(context): \(Errno(rawValue: result < 0 ? -result : result))")
    }
}
