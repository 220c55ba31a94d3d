/// The topics a fleet publishes under one prefix (docs/MQTT.md):
///
/// - `<prefix>/<host>/status`: retained, the host's ``HostStatus``;
/// - `<prefix>/<host>/accessories/<accessoryID>/<connectionID>`: retained, the accessory object while connected;
/// - `<prefix>/<host>/claims/<accessoryID>/<connectionID>`: retained, the claim on a connection while it is held
///   (FleetTopics+Claims.swift);
/// - `<prefix>/<host>/events`: each event line, not retained;
/// - `<prefix>/<host>/sync`: the bridge's own end-of-retained marker;
/// - `<prefix>/$readers/<clientID>`: a reader's end-of-retained marker;
/// - `<prefix>/$hosts/<bucket>/<host>`: retained, the host's entry in the host index (``HostIndex``), by which a
///   reader lists a fleet too big for one read of every status.
///
/// Host names and accessory ids become topic levels through ``encodeLevel(_:)``. Pure: no I/O.
public struct FleetTopics: Sendable, Hashable {
    /// The prefix, one or more levels, such as `accmon` or `site-a/accmon`.
    public let prefix: String

    public init(prefix: String) { self.prefix = prefix }

    /// The default prefix.
    public static let defaultPrefix = "accmon"

    /// Why `prefix` cannot be a topic prefix, or `nil` when it can.
    public static func problem(withPrefix prefix: String) -> String? {
        if prefix.isEmpty { return "the prefix is empty" }
        if prefix.hasPrefix("$") { return "a prefix starting with '$' names the broker's own topics" }
        if prefix.contains(where: { $0 == "+" || $0 == "#" }) { return "a prefix cannot hold the wildcards + or #" }
        if prefix.split(separator: "/", omittingEmptySubsequences: false).contains(where: \.isEmpty) {
            return "a prefix cannot start or end with '/' or hold an empty level ('//')"
        }
        if prefix.unicodeScalars.contains(where: Self.isControlOrNoncharacter) {
            return "a prefix cannot hold control characters or non-characters"
        }
        return nil
    }

    public func status(host: String) -> String { "\(prefix)/\(Self.encodeLevel(host))/status" }
    public func events(host: String) -> String { "\(prefix)/\(Self.encodeLevel(host))/events" }
    public func sync(host: String) -> String { "\(prefix)/\(Self.encodeLevel(host))/sync" }

    /// The retained topic of one connection of an accessory.
    public func accessory(host: String, accessoryID: String, connectionID: UInt64) -> String {
        "\(prefix)/\(Self.encodeLevel(host))/accessories/\(Self.encodeLevel(accessoryID))/\(connectionID)"
    }

    /// The filter of a host's accessory topics.
    public func accessories(host: String) -> String { accessories(hostLevel: Self.encodeLevel(host)) }

    /// The filter of a host's accessory topics, from its topic level as it appears in topics.
    public func accessories(hostLevel: String) -> String { "\(prefix)/\(hostLevel)/accessories/+/+" }

    /// The filter of every host's status.
    public var statuses: String { "\(prefix)/+/status" }

    /// The status topic of a host, from its topic level.
    public func status(hostLevel: String) -> String { "\(prefix)/\(hostLevel)/status" }

    /// The filter of one family of a host's retained topics, from its topic level.
    public func filter(_ family: RetainedFamily, hostLevel: String) -> String {
        "\(prefix)/\(hostLevel)/\(family.rawValue)/+/+"
    }

    /// The filter of every host's topics of one retained family.
    public func filter(_ family: RetainedFamily) -> String { "\(prefix)/+/\(family.rawValue)/+/+" }

    /// A host's entry in the host index.
    public func indexEntry(host: String) -> String {
        let level = Self.encodeLevel(host)
        return "\(prefix)/$hosts/\(HostIndex.bucketLevel(HostIndex.bucket(ofLevel: level)))/\(level)"
    }

    /// The filter of one bucket of the host index.
    public func indexBucket(_ bucket: Int) -> String { "\(prefix)/$hosts/\(HostIndex.bucketLevel(bucket))/+" }

    /// A reader's end-of-retained marker topic.
    public func readerSync(clientID: String) -> String { "\(prefix)/$readers/\(Self.encodeLevel(clientID))" }

    /// What a topic of this fleet is.
    public enum Topic: Sendable, Hashable {
        /// `<prefix>/<host>/status`, with the host's level as it appears in the topic.
        case status(hostLevel: String)
        /// `<prefix>/<host>/accessories/<accessoryID>/<connectionID>`.
        case accessory(hostLevel: String, accessoryID: String, connectionID: UInt64)
        /// `<prefix>/<host>/claims/<accessoryID>/<connectionID>`: the claim on one connection (docs/MQTT.md §12).
        case claim(hostLevel: String, accessoryID: String, connectionID: UInt64)
        /// `<prefix>/$hosts/<bucket>/<host>`: an entry of the host index.
        case indexEntry(hostLevel: String)

        /// Whether the topic is one of the host's own (its status or one of its retained families).
        public var isHostTopic: Bool {
            if case .indexEntry = self { false } else { true }
        }

        /// The level of the host the topic belongs to.
        public var hostLevel: String {
            switch self {
            case .status(let level), .accessory(let level, _, _), .claim(let level, _, _), .indexEntry(let level): level
            }
        }
    }

    /// What `topic` is, or `nil` for a topic that is neither a status, an accessory, a claim nor an index entry of this
    /// fleet.
    public func parse(_ topic: String) -> Topic? {
        var topic = topic
        return topic.withUTF8 { parse(bytes: $0) }
    }

    /// ``parse(_:)`` on a topic's UTF-8 bytes: one message of a fleet's read is one topic, so this runs on bytes in
    /// place and makes strings only of the levels it returns.
    private func parse(bytes topic: UnsafeBufferPointer<UInt8>) -> Topic? {
        guard let (host, shape) = shape(of: topic) else { return nil }
        func text(_ range: Range<Int>) -> String {
            String(decoding: UnsafeBufferPointer(rebasing: topic[range]), as: UTF8.self)
        }
        switch shape {
        case .status: return .status(hostLevel: text(host))
        case .accessory(let id, let connection):
            return .accessory(hostLevel: text(host), accessoryID: Self.decodeLevel(text(id)), connectionID: connection)
        case .claim(let id, let connection):
            return .claim(hostLevel: text(host), accessoryID: Self.decodeLevel(text(id)), connectionID: connection)
        case .indexEntry: return .indexEntry(hostLevel: text(host))
        }
    }

    /// Where the host level of an accessory topic lies, and its connection id; `nil` for any other topic: what a
    /// reader counting a host's accessory topics needs, without the accessory id (``parse(_:)`` gives it).
    func accessoryTopic(_ topic: UnsafeBufferPointer<UInt8>) -> (hostLevel: Range<Int>, connectionID: UInt64)? {
        guard let (host, shape) = shape(of: topic), case .accessory(_, let connection) = shape else { return nil }
        return (host, connection)
    }

    /// What a topic's levels after the host's are: where the accessory id lies, and the connection id.
    private enum Shape {
        case status
        case accessory(id: Range<Int>, connection: UInt64)
        case claim(id: Range<Int>, connection: UInt64)
        /// The host's range is then the level of the index entry.
        case indexEntry
    }

    /// Where the host level of a fleet topic lies, and what the topic is.
    private func shape(of topic: UnsafeBufferPointer<UInt8>) -> (host: Range<Int>, Shape)? {
        let slash = UInt8(ascii: "/")
        let prefixLength = prefix.utf8.count
        guard topic.count > prefixLength, topic[prefixLength] == slash,
            prefix.utf8.elementsEqual(topic[..<prefixLength])
        else { return nil }
        let hostStart = prefixLength + 1
        guard let hostEnd = Self.index(of: slash, in: topic, from: hostStart), hostEnd != hostStart else { return nil }
        let rest = hostEnd + 1
        func restIs(_ word: StaticString) -> Bool {
            word.withUTF8Buffer { word in
                topic.count - rest == word.count && word.elementsEqual(topic[rest...])
            }
        }
        func restStarts(with word: StaticString) -> Bool {
            word.withUTF8Buffer { word in
                topic.count - rest >= word.count && word.elementsEqual(topic[rest..<(rest + word.count)])
            }
        }
        if topic[hostStart] == UInt8(ascii: "$") {
            // Never a host: an encoded level does not start with '$'. `$hosts` is the index.
            guard "$hosts".utf8.elementsEqual(topic[hostStart..<hostEnd]),
                let bucketEnd = Self.index(of: slash, in: topic, from: rest)
            else { return nil }
            let level = (bucketEnd + 1)..<topic.count
            guard !level.isEmpty, Self.index(of: slash, in: topic, from: level.lowerBound) == nil else { return nil }
            return (level, .indexEntry)
        }
        let host = hostStart..<hostEnd
        if restIs("status") { return (host, .status) }
        let isClaim: Bool
        let idStart: Int
        if restStarts(with: "accessories/") {
            (isClaim, idStart) = (false, rest + "accessories/".utf8.count)
        } else if restStarts(with: "claims/") {
            (isClaim, idStart) = (true, rest + "claims/".utf8.count)
        } else {
            return nil
        }
        guard let idEnd = Self.index(of: slash, in: topic, from: idStart),
            Self.index(of: slash, in: topic, from: idEnd + 1) == nil,
            let connection = Self.decimal(UnsafeBufferPointer(rebasing: topic[(idEnd + 1)...]))
        else { return nil }
        let id = idStart..<idEnd
        return (host, isClaim ? .claim(id: id, connection: connection) : .accessory(id: id, connection: connection))
    }

    /// The number `digits` write in decimal (one digit at least, nothing else), when it fits.
    private static func decimal(_ digits: UnsafeBufferPointer<UInt8>) -> UInt64? {
        guard !digits.isEmpty else { return nil }
        var value: UInt64 = 0
        for byte in digits {
            let digit = byte &- UInt8(ascii: "0")
            guard digit < 10 else { return nil }
            let (times10, overflow) = value.multipliedReportingOverflow(by: 10)
            let (sum, carry) = times10.addingReportingOverflow(UInt64(digit))
            guard !overflow, !carry else { return nil }
            value = sum
        }
        return value
    }

    /// The index of the first `byte` in `bytes` at or after `start`.
    private static func index(of byte: UInt8, in bytes: UnsafeBufferPointer<UInt8>, from start: Int) -> Int? {
        var index = start
        while index < bytes.count {
            if bytes[index] == byte { return index }
            index += 1
        }
        return nil
    }

    /// A family of retained topics each host publishes under `<prefix>/<host>/<family>/<id>/<connectionID>`; a host's
    /// status counts its topics of each family (``HostStatus/retained``).
    public enum RetainedFamily: String, CaseIterable, Sendable, Hashable {
        case accessories
    }

    // MARK: Percent-encoding of topic levels

    /// `text` as one topic level: the UTF-8 bytes of `/`, `+`, `#`, `%`, `$`, control characters (U+0000–U+001F,
    /// U+007F–U+009F) and non-characters written as `%XX`, everything else as it is. The result holds no level
    /// separator or wildcard, never starts with `$`, and is valid UTF-8 that MQTT accepts; ``decodeLevel(_:)``
    /// gives `text` back.
    public static func encodeLevel(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: mustBeEncoded) else { return text }
        var encoded = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            guard mustBeEncoded(scalar) else {
                encoded.append(scalar)
                continue
            }
            for byte in String(scalar).utf8 {
                encoded.append("%")
                encoded.append(hexDigit(byte >> 4))
                encoded.append(hexDigit(byte & 0xF))
            }
        }
        return String(encoded)
    }

    /// The text of an encoded level: each `%XX` (either case) is a byte; a `%` not followed by two hex digits stays
    /// as it is, and bytes that do not form UTF-8 are replaced (U+FFFD).
    public static func decodeLevel(_ level: String) -> String {
        guard level.utf8.contains(UInt8(ascii: "%")) else { return level }
        let bytes = Array(level.utf8)
        var decoded: [UInt8] = []
        decoded.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "%"), index + 2 < bytes.count, let high = hexValue(bytes[index + 1]),
                let low = hexValue(bytes[index + 2])
            {
                decoded.append(high << 4 | low)
                index += 3
            } else {
                decoded.append(bytes[index])
                index += 1
            }
        }
        return String(decoding: decoded, as: UTF8.self)
    }

    /// Whether a scalar is written as `%XX` in a topic level.
    static func mustBeEncoded(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x2F, 0x2B, 0x23, 0x25, 0x24: true  // / + # % $
        default: isControlOrNoncharacter(scalar)
        }
    }

    /// Control characters (U+0000–U+001F, U+007F–U+009F) and non-characters, which MQTT topics should not hold.
    static func isControlOrNoncharacter(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x7F...0x9F, 0xFDD0...0xFDEF: true
        case _ where scalar.value & 0xFFFE == 0xFFFE: true  // U+xFFFE and U+xFFFF in every plane
        default: false
        }
    }

    private static func hexDigit(_ value: UInt8) -> Unicode.Scalar {
        Unicode.Scalar(value < 10 ? 0x30 + value : 0x41 + value - 10)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
