/// A node's path as the keeper checks it before any system call sees it: an absolute path below the policy's
/// directory, split into components on its bytes (as the kernel splits it), every byte from the set udev itself
/// allows in the names it makes (`util_replace_chars`: letters, digits and `#+-.:=@_`, with `/` between components).
///
/// Checking bytes rather than Swift characters matters: a `/` followed by a combining mark is one character, so a
/// character-wise split sees `../\u{301}x` as one component where the kernel sees `..` and `\u{301}x`; and a NUL
/// ends the path for the kernel but not for a Swift comparison, so two strings would name one node.
struct NodePath {
    /// The longest path taken (the kernel's `PATH_MAX` is 4096 with its NUL).
    static let maximumBytes = 4095

    /// The path below the directory, components joined by `/`.
    let relative: String

    /// Checks `path` against `directory` (absolute, no trailing `/` needed).
    ///
    /// - Throws: the reason, for a ``NodeError`` of code `refused`.
    init(_ path: String, below directory: String) throws(Refusal) {
        let prefix = Array((directory.hasSuffix("/") ? directory : directory + "/").utf8)
        let bytes = Array(path.utf8)
        guard bytes.count <= Self.maximumBytes else { throw Refusal("longer than \(Self.maximumBytes) bytes") }
        guard bytes.count > prefix.count, bytes.starts(with: prefix) else {
            throw Refusal("not below \(directory)")
        }
        let rest = bytes[prefix.count...]
        if let bad = rest.first(where: { !Self.isAllowed($0) }) {
            throw Refusal(
                "a byte outside the names udev makes (0x\(String(bad, radix: 16, uppercase: true)); allowed: "
                    + "letters, digits, #+-.:=@_ and /)")
        }
        let components = rest.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
        for component in components {
            if component.isEmpty || component.elementsEqual([0x2E]) || component.elementsEqual([0x2E, 0x2E]) {
                throw Refusal("not a plain path below \(directory) (empty, '.' or '..' part)")
            }
        }
        relative = String(decoding: rest, as: UTF8.self)
    }

    static func isAllowed(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default: return Array("#+-.:=@_/".utf8).contains(byte)
        }
    }

    struct Refusal: Error {
        let reason: String
        init(_ reason: String) { self.reason = reason }
    }
}
