@_spi(AccmonInternals) import AccmonProtocol

/// A key of a udev monitor message that ``UdevMonitorMessage/parse(_:)`` reads: a field or a ``UdevProperty``,
/// recognised from its bytes (no string is made for a key that is not read).
enum UdevMessageKey: Equatable {
    case action, devpath, subsystem, devtype, devname, sequenceNumber
    case property(UdevProperty)

    /// A key's name as numbers: its length and its first and last (up to) eight bytes, which tell apart any two names
    /// of up to sixteen bytes (every name read is).
    private struct Entry {
        var length: Int
        var head: UInt64
        var tail: UInt64
        var key: UdevMessageKey

        init(_ bytes: UnsafeBufferPointer<UInt8>, key: UdevMessageKey) {
            length = bytes.count
            self.key = key
            if bytes.count >= 8 {
                let raw = UnsafeRawBufferPointer(bytes)
                head = raw.loadUnaligned(fromByteOffset: 0, as: UInt64.self)
                tail = raw.loadUnaligned(fromByteOffset: bytes.count - 8, as: UInt64.self)
            } else {
                var word: UInt64 = 0
                for offset in 0..<bytes.count { word |= UInt64(bytes[offset]) << (8 * offset) }
                (head, tail) = (word, word)
            }
        }
    }

    private static let longestName = 16

    /// The keys read, in a form for fast look-ups. Fetched once per message: every use of a global (a lazily
    /// initialised `static let`) is a `swift_once` call.
    static let table = Table()

    struct Table {
        /// Every key read, ordered by length.
        private let entries: [Entry]
        /// For each length up to ``longestName`` + 1, the index in ``entries`` of the first key at least that long.
        private let firstOfLength: [Int]

        fileprivate init() {
            let fields: [(String, UdevMessageKey)] = [
                ("ACTION", .action), ("DEVPATH", .devpath), ("SUBSYSTEM", .subsystem), ("DEVTYPE", .devtype),
                ("DEVNAME", .devname), ("SEQNUM", .sequenceNumber),
            ]
            let named = fields + UdevProperty.allCases.map { ($0.name, .property($0)) }
            precondition(named.allSatisfy { $0.0.utf8.count <= longestName })
            let entries = named.sorted { $0.0.utf8.count < $1.0.utf8.count }.map { name, key in
                Array(name.utf8).withUnsafeBufferPointer { Entry($0, key: key) }
            }
            self.entries = entries
            firstOfLength = (0...longestName + 1).map { length in
                entries.firstIndex { $0.length >= length } ?? entries.count
            }
        }

        /// The key whose name is `bytes[start..<end]`; `nil` when it is not read. Eight bytes are loaded at once
        /// where `bytes` has them, past `end` too (masked off).
        func key(in bytes: UnsafeBufferPointer<UInt8>, from start: Int, to end: Int) -> UdevMessageKey? {
            let length = end - start
            guard length <= longestName else { return nil }
            let head: UInt64
            let tail: UInt64
            if length >= 8 {
                head = UnsafeRawBufferPointer(bytes).loadUnaligned(fromByteOffset: start, as: UInt64.self)
                tail = UnsafeRawBufferPointer(bytes).loadUnaligned(fromByteOffset: end - 8, as: UInt64.self)
            } else if start + 8 <= bytes.count {
                head = ByteScan.word(bytes, at: start) & (1 << (8 * UInt64(length)) &- 1)
                tail = head
            } else {
                let probe = Entry(UnsafeBufferPointer(rebasing: bytes[start..<end]), key: .action)
                (head, tail) = (probe.head, probe.tail)
            }
            let found = entries.withUnsafeBufferPointer { entries in
                firstOfLength.withUnsafeBufferPointer { first in
                    entries[first[length]..<first[length + 1]].first { $0.head == head && $0.tail == tail }
                }
            }
            return found?.key
        }
    }
}
