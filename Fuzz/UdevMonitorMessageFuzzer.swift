// libFuzzer target for udevd's monitor datagrams: bytes → UdevMonitorMessage.parse, which accmond runs on every
// datagram it reads from the udev netlink group (as the daemon's user, before anything else looks at the bytes).
// Built and run by scripts/fuzz.sh (`make fuzz`), against the AccmonDevices module.
//
// The input is one datagram, in a buffer of exactly its size, so AddressSanitizer sees any read past its end by the
// parser's eight-bytes-at-a-time scans. Besides "does not crash", it checks, and traps on a violation:
// - the parser agrees with a plain reading of the format written here from its documentation (byte by byte, over
//   arrays; SEQNUM read by glibc's strtoull, as libudev reads it): the same datagrams are rejected, with the same
//   reason (which names the property and quotes the value), and the others give the same fields and properties;
// - a rejection's reason is one line: it goes to the log as it is;
// - an accepted message, written back as udevd writes one (header, then `KEY=VALUE` entries each ended by a NUL), in
//   an order taken from the input, parses to the same message; `syspath` and `sysname` follow from `devpath`;
// - the sender check trusts exactly a multicast off the kernel's group (or the kernel's own), sent by root.

import AccmonDevices
import Glibc

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let datagram = UnsafeRawBufferPointer(start: data, count: size)
    let parsed = UdevMonitorMessage.parse(datagram)
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let expected = ReferenceReading.read(bytes)
    switch (parsed, expected) {
    case (.success(let message), .message(let reference)):
        guard message == reference else { violated("parsed \(message), the reference reads \(reference)", bytes) }
        checkWrittenBack(message, order: bytes)
    case (.failure(let rejection), .rejected(let reason)):
        guard rejection.reason == reason else {
            violated("rejected for \(rejection.reason.debugDescription), the reference says \(reason.debugDescription)", bytes)
        }
        guard !rejection.reason.isEmpty, !rejection.reason.utf8.contains(where: { $0 == 0x0A || $0 == 0x0D }) else {
            violated("the reason is not one line: \(rejection.reason.debugDescription)", bytes)
        }
    case (.success(let message), .rejected(let reason)):
        violated("accepted as \(message), the reference rejects it: \(reason)", bytes)
    case (.failure(let rejection), .message(let reference)):
        violated("rejected (\(rejection.reason)), the reference reads \(reference)", bytes)
    }
    checkSenderProblem(bytes)
    return 0
}

// MARK: Written back

/// Writes `message` as udevd would, its entries in an order taken from `order`, and parses that.
private func checkWrittenBack(_ message: UdevMonitorMessage, order: [UInt8]) {
    var entries = [
        "ACTION=\(message.action)", "DEVPATH=\(message.devpath)", "SUBSYSTEM=\(message.subsystem)",
        "SEQNUM=\(message.sequenceNumber)",
    ]
    if !message.devtype.isEmpty { entries.append("DEVTYPE=\(message.devtype)") }
    if !message.devnode.isEmpty { entries.append("DEVNAME=\(message.devnode)") }
    for property in UdevProperty.allCases {
        if let value = message.properties[property] { entries.append("\(property.name)=\(value)") }
    }
    // A permutation drawn from the input's bytes: the entries' order must not matter (each key appears once here).
    for index in entries.indices.reversed() where index > 0 {
        entries.swapAt(index, Int(order[index % order.count]) % (index + 1))
    }
    let datagram = udevdDatagram(entries.map { Array($0.utf8) })
    let again = datagram.withUnsafeBytes { UdevMonitorMessage.parse($0) }
    guard case .success(let reread) = again, reread == message else {
        violated("\(message) written back as \(entries) reads as \(again)", order)
    }
    guard message.syspath == "/sys" + message.devpath else { violated("syspath \(message.syspath)", order) }
    let last = Array(message.devpath.utf8).split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).last!
    let sysname = String(decoding: last.map { $0 == UInt8(ascii: "!") ? UInt8(ascii: "/") : $0 }, as: UTF8.self)
    guard message.sysname == sysname else {
        violated("sysname \(message.sysname.debugDescription) of \(message.devpath.debugDescription)", order)
    }
}

/// A datagram in udevd's format: the 40-byte header (the hashes and bloom filter left zero: the parser does not read
/// them), then the entries each followed by a NUL.
private func udevdDatagram(_ entries: [[UInt8]]) -> [UInt8] {
    let block: [UInt8] = entries.flatMap { $0 + [0] }
    var bytes = Array("libudev".utf8) + [0]
    bytes += withUnsafeBytes(of: UdevMonitorMessage.magic.bigEndian) { Array($0) }
    for field in [UInt32(40), UInt32(40), UInt32(block.count)] { bytes += withUnsafeBytes(of: field) { Array($0) } }
    return bytes + [UInt8](repeating: 0, count: 16) + block
}

// MARK: The reference

/// A datagram read the plain way, from the format as ``UdevMonitorMessage`` documents it: the message, or the reason
/// to reject it.
private enum ReferenceReading {
    static let header = Array("libudev".utf8) + [0]
    static let fields = ["ACTION", "DEVPATH", "SUBSYSTEM", "DEVTYPE", "DEVNAME", "SEQNUM"].map { Array($0.utf8) }
    static let properties = UdevProperty.allCases.map { (name: Array($0.name.utf8), property: $0) }
    static let actions = ["add", "remove", "change", "move", "online", "offline", "bind", "unbind"].map { Array($0.utf8) }

    enum Reading {
        case message(UdevMonitorMessage)
        case rejected(String)
    }

    static func read(_ bytes: [UInt8]) -> Reading {
        let count = bytes.count
        guard count >= 32 else { return .rejected("\(count) bytes is shorter than a message header") }
        guard Array(bytes[0..<8]) == header else {
            return .rejected("not a udevd message (no 'libudev' header): a kernel uevent or another sender's")
        }
        guard count >= 40 else { return .rejected("\(count) bytes is shorter than a message header") }
        let magic = bytes[8..<12].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }  // network byte order
        guard magic == 0xfeed_cafe else {
            return .rejected("header magic \(hex(magic)) is not 0xfeedcafe (a format this version does not know)")
        }
        let offset = bytes[16..<20].reversed().reduce(0) { $0 << 8 | Int($1) }  // host (little-endian) byte order
        guard offset >= 40, offset + 32 <= count else {
            return .rejected("properties offset \(offset) is outside the \(count)-byte message")
        }

        var values: [[UInt8]: [UInt8]] = [:]
        var kept = UdevProperties()
        var devlinks: [String] = []  // the DEVLINKS entries so far
        var start = offset
        var index = 0
        while start < count {
            index += 1
            // An entry runs to its NUL, and is cut at its first line break.
            let end = bytes[start...].firstIndex(of: 0)
            let cut = bytes[start..<(end ?? count)].firstIndex { $0 == 0x0A || $0 == 0x0D } ?? end ?? count
            let entry = bytes[start..<cut]
            guard let end else { return .rejected("property \(index) is not ended by a NUL") }
            start = end + 1
            guard let equals = entry.firstIndex(of: UInt8(ascii: "=")) else {
                return .rejected("property \(index) '\(text(entry))' has no '='")
            }
            let key = Array(entry[..<equals])
            let value = Array(entry[(equals + 1)...])
            if key == fields[0], !actions.contains(value) {
                return .rejected("ACTION '\(text(value))' is not a udev action")
            }
            if key == fields[5], sequenceNumber(value) == nil {
                return .rejected("SEQNUM '\(text(value))' is not a positive number")
            }
            if fields.contains(key) {
                values[key] = value
            } else if let property = properties.first(where: { $0.name == key })?.property {
                if property == .devlinks {
                    devlinks.append(text(value))
                } else {
                    kept[property] = text(value)
                }
            }
        }
        // DEVLINKS: one entry as it came; several, their links, each once, in order.
        if devlinks.count == 1 {
            kept[.devlinks] = devlinks[0]
        } else if devlinks.count > 1 {
            var all: [Substring] = []
            var seen = Set<Substring>()
            for entry in devlinks {
                for link in entry.split(separator: " ") where seen.insert(link).inserted { all.append(link) }
            }
            kept[.devlinks] = all.joined(separator: " ")
        }
        guard let action = values[fields[0]], let devpath = values[fields[1]], let subsystem = values[fields[2]],
            let sequence = values[fields[5]]
        else {
            return .rejected("it lacks DEVPATH, SUBSYSTEM, ACTION or SEQNUM")
        }
        guard let simplified = simplified(Array(text(devpath).utf8)) else {
            return .rejected("DEVPATH '\(text(devpath))' is not an absolute path with a device name and no '..'")
        }
        let devname = values[fields[4]].map(text) ?? ""
        return .message(
            UdevMonitorMessage(
                action: text(action), devpath: simplified, subsystem: text(subsystem),
                devtype: values[fields[3]].map(text) ?? "",
                // Absolute when its first byte is '/' (as libudev decides; String.hasPrefix compares characters, and
                // "/" followed by a combining mark is one character).
                devnode: values[fields[4]] == nil || devname.utf8.first == UInt8(ascii: "/") ? devname : "/dev/" + devname,
                sequenceNumber: sequenceNumber(sequence)!, properties: kept))
    }

    /// The number as libudev reads SEQNUM: glibc's strtoull in base 0 over the whole text, no sign '-', not 0.
    static func sequenceNumber(_ value: [UInt8]) -> UInt64? {
        guard value.first(where: { ![0x20, 0x09, 0x0A, 0x0B, 0x0C, 0x0D].contains($0) }) != UInt8(ascii: "-") else {
            return nil
        }
        return (value.map { CChar(bitPattern: $0) } + [0]).withUnsafeBufferPointer { text in
            var end: UnsafeMutablePointer<CChar>?
            errno = 0
            let number = strtoull(text.baseAddress!, &end, 0)
            guard errno == 0, let end, end != UnsafeMutablePointer(mutating: text.baseAddress!), end.pointee == 0,
                number > 0
            else { return nil }
            return UInt64(number)
        }
    }

    /// `/` and the path's components but empty and `.` ones, joined by `/`; `nil` when it is not absolute, has no
    /// component left, or has a `..`.
    static func simplified(_ path: [UInt8]) -> String? {
        guard path.first == UInt8(ascii: "/") else { return nil }
        let components = path.split(separator: UInt8(ascii: "/")).filter { $0.elementsEqual([UInt8(ascii: ".")]) == false }
        guard !components.isEmpty, !components.contains(where: { $0.elementsEqual(Array("..".utf8)) }) else {
            return nil
        }
        return String(decoding: components.flatMap { [UInt8(ascii: "/")] + Array($0) }, as: UTF8.self)
    }

    static func text(_ bytes: some Collection<UInt8>) -> String { String(decoding: bytes, as: UTF8.self) }

    static func hex(_ value: UInt32) -> String {
        let digits = String(value, radix: 16)
        return "0x" + String(repeating: "0", count: 8 - digits.count) + digits
    }
}

// MARK: Sender

/// The sender check on a netlink group mask, port and uid taken from the input's first bytes.
private func checkSenderProblem(_ bytes: [UInt8]) {
    guard bytes.count >= 9 else { return }
    let groups = UInt32(bytes[0] & 0x03) | (bytes[1] & 0x80 != 0 ? 0x100 : 0)
    let portID = UInt32(bytes[2] & 0x01) * UInt32(bytes[3])
    let uid: UInt32? = bytes[4] & 0x01 == 0 ? nil : UInt32(bytes[5] & 0x03) * 500
    let problem = UdevMonitorMessage.senderProblem(groups: groups, portID: portID, uid: uid)
    let trusted = groups != 0 && !(groups == 1 && portID != 0) && uid == 0
    guard (problem == nil) == trusted, problem.map({ !$0.isEmpty }) ?? true else {
        violated("sender groups \(groups) port \(portID) uid \(String(describing: uid)): \(String(describing: problem))", bytes)
    }
}

// MARK: Reporting

private func violated(_ message: String, _ input: [UInt8]) -> Never {
    let shown = String(decoding: input.prefix(600).map { $0 == 0 ? UInt8(ascii: "|") : $0 }, as: UTF8.self)
    // -O drops preconditionFailure's message: write it first.
    let report = Array("invariant violated: \(message)\ninput (NUL shown as |): \(shown.debugDescription)\n".utf8)
    _ = report.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
    preconditionFailure("invariant violated")
}
