/// Reads a status payload when it is exactly what ``HostStatus/payload`` writes for strings without escapes: keys in
/// sorted order, no spaces, no backslash or control character in a string, counts as plain integers. The fleet view
/// reads a status per host at least twice; JSONDecoder's generic machinery costs most of that. Anything else
/// (another key, order or spacing, an escape) gives `nil`, and the caller decodes with JSONDecoder.
struct HostStatusReader {
    private let bytes: UnsafeBufferPointer<UInt8>
    private var position = 0

    static func status(_ payload: [UInt8]) -> HostStatus? {
        payload.withUnsafeBufferPointer { bytes in
            var reader = HostStatusReader(bytes: bytes)
            return reader.status()
        }
    }

    private init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    private mutating func status() -> HostStatus? {
        guard skip(#"{"bridge":"#), let bridge = string(), skip(#","host":"#), let host = string() else { return nil }
        var lease: Int?
        if skip(#","lease":"#) {
            guard let seconds = integer() else { return nil }
            lease = seconds
        }
        guard skip(#","machineID":"#), let machineID = string() else { return nil }
        var reason: String?
        if skip(#","reason":"#) {
            guard let text = string() else { return nil }
            reason = text
        }
        var retained: [String: Int]?
        if skip(#","retained":{"#) {
            var counts: [String: Int] = [:]
            var separator = false
            while !skip("}") {
                guard !separator || skip(","), let family = string(), skip(":"), let count = integer() else {
                    return nil
                }
                counts[family] = count
                separator = true
            }
            retained = counts
        }
        guard skip(#","runID":"#), let runID = string(), skip(#","since":"#), let since = number(),
            skip(#","state":"#), let stateName = string(), let state = HostStatus.State(rawValue: stateName),
            skip("}"), position == bytes.count
        else { return nil }
        return HostStatus(
            state: state, host: host, machineID: machineID, runID: runID, since: since, bridge: bridge, reason: reason,
            retained: retained, lease: lease)
    }

    private mutating func skip(_ literal: StaticString) -> Bool {
        let count = literal.utf8CodeUnitCount
        guard bytes.count - position >= count else { return false }
        let matches = literal.withUTF8Buffer { literal in
            (0..<count).allSatisfy { bytes[position + $0] == literal[$0] }
        }
        if matches { position += count }
        return matches
    }

    /// A string with no backslash and no control character.
    private mutating func string() -> String? {
        guard position < bytes.count, bytes[position] == UInt8(ascii: "\"") else { return nil }
        let start = position + 1
        var end = start
        while end < bytes.count, bytes[end] != UInt8(ascii: "\"") {
            guard bytes[end] >= 0x20, bytes[end] != UInt8(ascii: "\\") else { return nil }
            end += 1
        }
        guard end < bytes.count else { return nil }
        position = end + 1
        return String(validating: UnsafeBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self)
    }

    /// A non-negative integer without a leading zero.
    private mutating func integer() -> Int? {
        let start = position
        while position < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[position]) {
            position += 1
        }
        guard position > start, position - start < 19, bytes[start] != UInt8(ascii: "0") || position - start == 1
        else { return nil }
        return Int(String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<position]), as: UTF8.self))
    }

    /// A JSON number, as Double reads it.
    private mutating func number() -> Double? {
        let start = position
        while position < bytes.count, "0123456789.eE+-".utf8.contains(bytes[position]) { position += 1 }
        guard position > start else { return nil }
        return Double(String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<position]), as: UTF8.self))
    }
}
