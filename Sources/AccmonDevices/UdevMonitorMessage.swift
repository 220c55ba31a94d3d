@_spi(AccmonInternals) import AccmonProtocol

/// A device event as udevd multicasts it to monitors on the `udev` netlink group, after its rules ran: parsed from
/// the datagram's bytes.
///
/// The datagram is a 40-byte header (`libudev` and a NUL, the magic `0xfeedcafe` in network byte order, then in host
/// byte order the header's size and the offset and length of the properties, then the subsystem and devtype hashes
/// and the tag bloom filter that the monitors' socket filters read), followed by the device's properties as
/// `KEY=VALUE` strings, each ended by a NUL. Every libudev since 2011 sends and reads this format; containers with an
/// older or newer libudev than the host's udevd depend on it staying so.
///
/// libudev's `udev_monitor_receive_device` turns the same bytes into a device object that holds every property in
/// hash maps; with its matching unref that was over half of accmond's instructions per event. ``parse(_:)`` keeps
/// only the fields and the properties accmond reads (``UdevProperty``), and accepts and rejects as libudev does for them: what
/// it rejects is what libudev would drop (checked against the real libudev in the tests), so no event is lost or
/// invented. It does not check the fields accmond never reads (`MAJOR`, `IFINDEX`, `DEVMODE`, ...), which libudev
/// would reject when malformed; udevd never sends them malformed.
public struct UdevMonitorMessage: Sendable, Hashable {
    /// The udev action: `add`, `remove`, `change`, `move`, `online`, `offline`, `bind` or `unbind`.
    public var action: String
    /// `DEVPATH`: the device's path under `/sys`, starting with a slash.
    public var devpath: String
    /// `SUBSYSTEM`.
    public var subsystem: String
    /// `DEVTYPE`, or empty.
    public var devtype: String
    /// `DEVNAME` as an absolute path under `/dev` (udevd sends it so; a relative one is put under `/dev/`, as libudev
    /// does), or empty.
    public var devnode: String
    /// `SEQNUM`, the kernel's event number (never 0).
    public var sequenceNumber: UInt64
    /// The ``UdevProperty`` properties the message carries (the last one wins when a key repeats).
    public var properties: UdevProperties

    /// `/sys` followed by ``devpath``.
    public var syspath: String { "/sys" + devpath }

    /// The last component of ``devpath``, with `!` read as `/` (as libudev gives it).
    public var sysname: String {
        let bytes = devpath.utf8
        let start = bytes.lastIndex(of: UInt8(ascii: "/")).map { bytes.index(after: $0) } ?? bytes.startIndex
        let name = devpath[start...]
        guard name.utf8.contains(UInt8(ascii: "!")) else { return String(name) }
        return String(decoding: name.utf8.map { $0 == UInt8(ascii: "!") ? UInt8(ascii: "/") : $0 }, as: UTF8.self)
    }

    /// Creates a message.
    public init(
        action: String, devpath: String, subsystem: String, devtype: String = "", devnode: String = "",
        sequenceNumber: UInt64, properties: UdevProperties = [:]
    ) {
        self.action = action
        self.devpath = devpath
        self.subsystem = subsystem
        self.devtype = devtype
        self.devnode = devnode
        self.sequenceNumber = sequenceNumber
        self.properties = properties
    }

    /// The actions libudev knows; a message with another is dropped. (Eight short strings: a linear search costs less
    /// than hashing one.)
    public static let actions = ["add", "remove", "change", "move", "online", "offline", "bind", "unbind"]
    /// The header's size, and the least offset of the properties that accmond accepts.
    public static let headerSize = 40
    /// `0xfeedcafe`, in network byte order in the header.
    public static let magic: UInt32 = 0xfeed_cafe
    private static let prefix: [UInt8] = Array("libudev".utf8) + [0]

    /// Why a datagram is not to be trusted as udevd's, judged as libudev judges it: it must be a multicast (a unicast
    /// comes from any local process), not claim the kernel's group from a user-space port, and come with the sender's
    /// credentials showing root. `nil` when trusted. `groups` and `portID` are the sender's netlink address;
    /// `uid` is the credentials' uid, `nil` when none came.
    public static func senderProblem(groups: UInt32, portID: UInt32, uid: UInt32?) -> String? {
        if groups == 0 { return "a unicast message (from port \(portID)), not udevd's multicast" }
        if groups == kernelGroup && portID != 0 {
            return "on the kernel's group but from port \(portID), not the kernel"
        }
        guard let uid else { return "no sender credentials came with it" }
        guard uid == 0 else { return "sent by uid \(uid), not root" }
        return nil
    }

    /// The netlink group of the kernel's own uevents (udevd's is 2).
    static let kernelGroup: UInt32 = 1

    /// Parses one datagram.
    public static func parse(_ datagram: UnsafeRawBufferPointer) -> Result<UdevMonitorMessage, UdevMessageRejection> {
        let length = datagram.count
        // libudev's own minimum: shorter datagrams are dropped before anything else is read.
        guard length >= 32 else { return .failure(.init("\(length) bytes is shorter than a message header")) }
        guard datagram.starts(with: prefix) else {
            return .failure(.init("not a udevd message (no 'libudev' header): a kernel uevent or another sender's"))
        }
        guard length >= headerSize else { return .failure(.init("\(length) bytes is shorter than a message header")) }
        let magic = UInt32(bigEndian: datagram.loadUnaligned(fromByteOffset: 8, as: UInt32.self))
        guard magic == Self.magic else {
            return .failure(
                .init("header magic \(hex(magic)) is not \(hex(Self.magic)) (a format this version does not know)"))
        }
        let offset = Int(datagram.loadUnaligned(fromByteOffset: 16, as: UInt32.self))
        guard offset >= headerSize, offset + 32 <= length else {
            return .failure(.init("properties offset \(offset) is outside the \(length)-byte message"))
        }
        return parseProperties(UnsafeRawBufferPointer(rebasing: datagram[offset...]))
    }

    /// Parses the `KEY=VALUE` strings, each ended by a NUL, of a message.
    static func parseProperties(_ block: UnsafeRawBufferPointer) -> Result<UdevMonitorMessage, UdevMessageRejection> {
        var action: String?
        var devpath: String?
        var subsystem: String?
        var sequence: UInt64?
        var devtype = ""
        var devnode = ""
        var properties = UdevProperties()
        var links: LinkUnion?
        let bytes = block.bindMemory(to: UInt8.self)
        let keys = UdevMessageKey.table
        var start = 0
        var index = 0
        while start < bytes.count {
            index += 1
            // The key first: most entries are not read, and for those only the NUL that ends them matters.
            guard let equals = keyEnd(in: bytes, from: start) else {
                return .failure(malformedEntry(index, in: block, at: start))
            }
            guard let key = keys.key(in: bytes, from: start, to: equals) else {
                guard let end = ByteScan.firstIndex(of: 0, in: bytes, from: equals + 1) else {
                    return .failure(.init("property \(index) is not ended by a NUL"))
                }
                start = end + 1
                continue
            }
            guard let (end, lineBreak) = entryEnd(in: block, from: equals + 1) else {
                return .failure(.init("property \(index) is not ended by a NUL"))
            }
            // libudev cuts an entry at its first line break ("some devices" end values with a newline).
            let value = UnsafeBufferPointer(rebasing: bytes[(equals + 1)..<(lineBreak ?? end)])
            start = end + 1
            switch key {
            case .action:
                let name = text(value)
                guard actions.contains(name) else { return .failure(.init("ACTION '\(name)' is not a udev action")) }
                action = name
            case .devpath:
                devpath = text(value)
            case .subsystem:
                subsystem = text(value)
            case .devtype:
                devtype = text(value)
            case .devname:
                let name = text(value)
                devnode = name.utf8.first == UInt8(ascii: "/") ? name : "/dev/" + name
            case .sequenceNumber:
                guard let number = unsignedNumber(value), number > 0 else {
                    return .failure(.init("SEQNUM '\(text(value))' is not a positive number"))
                }
                sequence = number
            case .property(.devlinks):
                // libudev keeps the links of every DEVLINKS entry, each once.
                if links == nil { links = LinkUnion(text(value)) } else { links!.add(text(value)) }
            case .property(let property):
                properties[property] = text(value)
            }
        }
        properties[.devlinks] = links?.value
        guard let action, let devpath, let subsystem, let sequence else {
            return .failure(.init("it lacks DEVPATH, SUBSYSTEM, ACTION or SEQNUM"))
        }
        guard let simplified = simplifiedDevpath(devpath) else {
            return .failure(.init("DEVPATH '\(devpath)' is not an absolute path with a device name and no '..'"))
        }
        return .success(
            UdevMonitorMessage(
                action: action, devpath: simplified, subsystem: subsystem, devtype: devtype, devnode: devnode,
                sequenceNumber: sequence, properties: properties))
    }

    /// The links of a message's DEVLINKS entries: the first entry as it came or, once another comes, the space-separated
    /// links of all of them, each once, in order. Each entry is split once and looked up in a set: re-splitting the
    /// links so far and searching them for each new one made a datagram of thousands of entries cost seconds.
    private struct LinkUnion {
        private let first: String
        private var links: [Substring]?
        private var seen: Set<Substring> = []

        init(_ first: String) { self.first = first }

        mutating func add(_ entry: String) {
            if links == nil {
                links = []
                insert(first)
            }
            insert(entry)
        }

        private mutating func insert(_ entry: String) {
            for link in entry.split(separator: " ") where seen.insert(link).inserted { links!.append(link) }
        }

        var value: String { links?.joined(separator: " ") ?? first }
    }

    /// A `DEVPATH` as libudev keeps it (repeated slashes, `.` components and a trailing slash removed), or `nil`
    /// when it is not absolute or names nothing (`/`), as libudev finds, or (stricter than libudev: the path is
    /// opened in sysfs) when it has a `..` component.
    static func simplifiedDevpath(_ devpath: String) -> String? {
        var path = devpath
        return path.withUTF8 { bytes -> String? in
            guard bytes.first == UInt8(ascii: "/") else { return nil }
            // The usual case, a clean path, costs one pass and no copy.
            var clean = bytes.count > 1 && bytes[bytes.count - 1] != UInt8(ascii: "/")
            for index in 1..<bytes.count where clean && bytes[index - 1] == UInt8(ascii: "/") {
                clean = bytes[index] != UInt8(ascii: "/") && bytes[index] != UInt8(ascii: ".")
            }
            if clean { return devpath }
            var simplified: [UInt8] = []
            var componentStart = 1
            for end in 1...bytes.count where end == bytes.count || bytes[end] == UInt8(ascii: "/") {
                let component = UnsafeBufferPointer(rebasing: bytes[componentStart..<end])
                componentStart = end + 1
                if component.count == 2 && component[0] == UInt8(ascii: ".") && component[1] == UInt8(ascii: ".") {
                    return nil
                }
                if component.isEmpty || (component.count == 1 && component[0] == UInt8(ascii: ".")) { continue }
                simplified.append(UInt8(ascii: "/"))
                simplified += component
            }
            return simplified.isEmpty ? nil : String(decoding: simplified, as: UTF8.self)
        }
    }

    /// The index of the `=` that ends the key of the entry at `start`; `nil` when a NUL or a line break comes first
    /// (libudev cuts the entry there, so it has no `=`) or the block ends.
    private static func keyEnd(in bytes: UnsafeBufferPointer<UInt8>, from start: Int) -> Int? {
        var position = start
        // Eight bytes at a time; the first flagged byte is a real stop (see ByteScan).
        while position + 8 <= bytes.count {
            let word = ByteScan.word(bytes, at: position)
            let stops =
                ByteScan.flags(ofByte: UInt8(ascii: "="), in: word) | ByteScan.flags(ofByte: 0, in: word)
                | ByteScan.flags(ofByte: UInt8(ascii: "\n"), in: word)
                | ByteScan.flags(ofByte: UInt8(ascii: "\r"), in: word)
            if stops != 0 {
                let first = position + stops.trailingZeroBitCount / 8
                return bytes[first] == UInt8(ascii: "=") ? first : nil
            }
            position += 8
        }
        while position < bytes.count {
            switch bytes[position] {
            case UInt8(ascii: "="): return position
            case 0, UInt8(ascii: "\n"), UInt8(ascii: "\r"): return nil
            default: position += 1
            }
        }
        return nil
    }

    /// Why the entry at `start`, whose key has no `=` before a NUL or line break, is rejected.
    private static func malformedEntry(
        _ index: Int, in block: UnsafeRawBufferPointer, at start: Int
    ) -> UdevMessageRejection {
        guard let (end, lineBreak) = entryEnd(in: block, from: start) else {
            return .init("property \(index) is not ended by a NUL")
        }
        let entry = UnsafeBufferPointer(rebasing: block.bindMemory(to: UInt8.self)[start..<(lineBreak ?? end)])
        return .init("property \(index) '\(text(entry))' has no '='")
    }

    /// Where the entry at `start` ends (its NUL) and its first line break (CR or LF) if any; `nil` when no NUL
    /// follows. Eight bytes at a time: values run to dozens of bytes.
    private static func entryEnd(in bytes: UnsafeRawBufferPointer, from start: Int) -> (end: Int, lineBreak: Int?)? {
        var lineBreak: Int?
        var position = start
        while position + 8 <= bytes.count {
            let word = ByteScan.word(bytes, at: position)
            let stops =
                ByteScan.flags(ofByte: 0, in: word)
                | (lineBreak == nil
                    ? ByteScan.flags(ofByte: UInt8(ascii: "\n"), in: word)
                        | ByteScan.flags(ofByte: UInt8(ascii: "\r"), in: word) : 0)
            if stops == 0 {
                position += 8
                continue
            }
            // Look at the stop bytes one by one (the bit trick can flag a byte after a real stop, never before).
            let first = position + stops.trailingZeroBitCount / 8
            for offset in first..<(position + 8) {
                switch bytes[offset] {
                case 0: return (offset, lineBreak)
                case UInt8(ascii: "\n"), UInt8(ascii: "\r"): if lineBreak == nil { lineBreak = offset }
                default: break
                }
            }
            position += 8
        }
        while position < bytes.count {
            switch bytes[position] {
            case 0: return (position, lineBreak)
            case UInt8(ascii: "\n"), UInt8(ascii: "\r"): if lineBreak == nil { lineBreak = position }
            default: break
            }
            position += 1
        }
        return nil
    }

    /// A number as libudev reads `SEQNUM` (C's `strtoull` with base 0, whole text): leading white space, an optional
    /// `+`, then hex after `0x`, octal after `0`, else decimal; `nil` when anything else is left or it overflows.
    static func unsignedNumber(_ bytes: UnsafeBufferPointer<UInt8>) -> UInt64? {
        var position = 0
        while position < bytes.count, [0x20, 0x09, 0x0A, 0x0B, 0x0C, 0x0D].contains(bytes[position]) { position += 1 }
        if position < bytes.count && bytes[position] == UInt8(ascii: "+") { position += 1 }
        var radix: UInt64 = 10
        if position < bytes.count && bytes[position] == UInt8(ascii: "0") {
            if position + 2 < bytes.count && (bytes[position + 1] | 0x20) == UInt8(ascii: "x")
                && Hex.isDigit(bytes[position + 2])
            {
                radix = 16
                position += 2
            } else {
                radix = 8
            }
        }
        guard position < bytes.count else { return nil }
        var number: UInt64 = 0
        while position < bytes.count {
            guard let digit = Hex.value(of: bytes[position]), UInt64(digit) < radix else { return nil }
            let (times, overflow) = number.multipliedReportingOverflow(by: radix)
            let (sum, carry) = times.addingReportingOverflow(UInt64(digit))
            guard !overflow, !carry else { return nil }
            number = sum
            position += 1
        }
        return number
    }

    private static func text(_ bytes: UnsafeBufferPointer<UInt8>) -> String {
        String(decoding: bytes, as: UTF8.self)
    }

    private static func hex(_ value: UInt32) -> String {
        "0x" + Hex.lowercase(Int(value), digits: 8)
    }
}

/// Why a udev monitor message was dropped.
public struct UdevMessageRejection: Error, Sendable, Hashable, CustomStringConvertible {
    /// What is wrong with it.
    public var reason: String

    /// Creates a rejection.
    public init(_ reason: String) { self.reason = reason }

    public var description: String { reason }
}
