import AccmonSys
import Glibc

/// The file in the bridge's state directory that keeps the retained accessory topics it published and has not deleted
/// since, one per line, so that a bridge restarted against another node of its broker (or another listener) deletes
/// what it published before and no longer holds, even where that node does not show it those topics (docs/MQTT.md §4).
///
/// Written atomically, at most once a second while the set grows, and when the bridge stops; a topic published in
/// the last second before a SIGKILL is not in it.
struct PublishedTopicsFile {
    static let name = "published-topics"
    /// The largest file read back: 64 MiB, a host of some 300,000 accessories.
    static let limit = 64 << 20

    let directory: DirectoryDescriptor

    /// Opens (creating it, mode 0700) the state directory at `path`.
    static func open(_ path: String) throws(Errno) -> PublishedTopicsFile {
        try DirectoryDescriptor.create(path, mode: 0o700)
        return PublishedTopicsFile(directory: try DirectoryDescriptor.open(path))
    }

    /// The topics the file holds; empty when there is no file.
    func read() throws(FileError) -> Set<String> {
        guard let bytes = try AtomicFile.read(Self.name, in: directory, limit: Self.limit) else { return [] }
        return Set(bytes.split(separator: UInt8(ascii: "\n")).map { String(decoding: $0, as: UTF8.self) })
    }

    func write(_ topics: Set<String>) throws(FileError) {
        let lines = topics.sorted().map { Array($0.utf8) + [UInt8(ascii: "\n")] }
        try AtomicFile.write(chunks: lines, to: Self.name, in: directory)
    }

    var path: String { directory.pathOf(Self.name) }
}
