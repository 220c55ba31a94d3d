import AccmonSys
import Glibc

/// The files in the bridge's state directory that keep the retained accessory topics it published and has not deleted
/// since, one per line, so that a bridge restarted against another node of its broker (or another listener) deletes
/// what it published before and no longer holds, even where that node does not show it those topics (docs/MQTT.md §4).
///
/// Two files: `published-topics`, the set as last written whole (atomically, at every synchronization, at a stop and
/// when the journal grew long), and `published-topics.journal`, to which each topic is appended before its first
/// publication. What the bridge published is their union: an appended line is in the kernel once `write(2)` returned,
/// so a SIGKILL right after the publication loses nothing (a power loss can lose the last lines: no `fsync`, which
/// would cost every new topic a disk write).
struct PublishedTopicsFile {
    static let name = "published-topics"
    static let journalName = "published-topics.journal"
    /// The largest file read back: 64 MiB, a host of some 300,000 accessories.
    static let limit = 64 << 20
    /// The journal's lines after which the set is written whole and the journal emptied.
    static let journalCompaction = 1024

    let directory: DirectoryDescriptor
    private let journal: FileDescriptor
    /// The lines appended to the journal since it was last emptied.
    private(set) var journalLines = 0

    /// Whether the set is due to be written whole, the journal emptied: it holds ``journalCompaction`` lines.
    var wantsCompaction: Bool { journalLines >= Self.journalCompaction }

    /// Opens (creating it, mode 0700) the state directory at `path`, and its journal.
    static func open(_ path: String) throws(Errno) -> PublishedTopicsFile {
        try DirectoryDescriptor.create(path, mode: 0o700)
        let directory = try DirectoryDescriptor.open(path)
        return PublishedTopicsFile(
            directory: directory, journal: try directory.openForAppending(journalName, creatingWith: 0o600))
    }

    /// The topics the two files hold; empty when there are none. A journal's last line cut short (a full disk) is not
    /// a topic.
    mutating func read() throws(FileError) -> Set<String> {
        var topics: Set<String> = []
        for name in [Self.name, Self.journalName] {
            guard let bytes = try AtomicFile.read(name, in: directory, limit: Self.limit) else { continue }
            var lines = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
            lines.removeLast()  // what follows the last newline: empty, or a line cut short
            if name == Self.journalName { journalLines = lines.count }
            topics.formUnion(lines.filter { !$0.isEmpty }.map { String(decoding: $0, as: UTF8.self) })
        }
        return topics
    }

    /// Appends `topic` to the journal, before its first publication.
    mutating func append(_ topic: String) throws(FileError) {
        do {
            try journal.writeAll(Array(topic.utf8) + [UInt8(ascii: "\n")])
        } catch {
            throw FileError(operation: "write", path: directory.pathOf(Self.journalName), errno: error)
        }
        journalLines += 1
    }

    /// Writes the whole set, then empties the journal (whose topics the set holds).
    mutating func write(_ topics: Set<String>) throws(FileError) {
        let lines = topics.sorted().map { Array($0.utf8) + [UInt8(ascii: "\n")] }
        try AtomicFile.write(chunks: lines, to: Self.name, in: directory)
        do {
            try journal.truncate(to: 0)
        } catch {
            throw FileError(operation: "ftruncate", path: directory.pathOf(Self.journalName), errno: error)
        }
        journalLines = 0
    }

    var path: String { directory.pathOf(Self.name) }
}
