import AccmonLogging
import AccmonProtocol
import AccmonSys
import FoundationEssentials

/// The history file, `history.jsonl` in the state directory: JSON lines, each written whole by one `write`.
///
/// - the first line, `{"version":1}`;
/// - one line per entry, with who may see it as ids: `{"entry":{...},"gids":[...],"uids":[...]}`, or
///   `{"admins":true,"entry":{...}}` for admins only;
/// - reservation lines, `{"reserved":N}`: history numbers up to N may have been given out, so the next run starts
///   after N (the last such line counts; a clean stop writes the last number given).
///
/// The writer appends to it and rewrites it whole (atomic replacement) when it holds twice the ring's entries. A
/// crash can leave the last line cut short: it is dropped. Anything else wrong sets the file aside.
enum HistoryFile {
    static let name = "history.jsonl"
    static let version = 1

    /// The largest file read at start: twice the ring of entries of 4 KiB (a USB device's strings are short; a
    /// simulated accessory's may be long), at least 16 MiB. The writer rewrites the file before it grows past half.
    static func maximumSize(capacity: Int) -> Int { max(16 << 20, capacity.multipliedReportingOverflow(by: 8192).0) }

    // MARK: Writing

    /// `{"version":1}` and its newline.
    static func header(into out: inout JSONOutput) {
        EventLineWriter.literal(#"{"version":"#, into: &out)
        EventLineWriter.number(UInt64(version), into: &out)
        EventLineWriter.literal("}\n", into: &out)
    }

    /// A record's line, with its newline; `accessoryObject`: its accessory's bytes, already written
    /// (``HistoryLineWriter/entry(_:accessoryObject:into:)``).
    static func line(_ record: HistoryRecord, accessoryObject: ArraySlice<UInt8>? = nil, into out: inout JSONOutput) {
        guard let audience = record.audience else {
            EventLineWriter.literal(#"{"admins":true,"entry":"#, into: &out)
            HistoryLineWriter.entry(record.entry, accessoryObject: accessoryObject, into: &out)
            EventLineWriter.literal("}\n", into: &out)
            return
        }
        EventLineWriter.literal(#"{"entry":"#, into: &out)
        HistoryLineWriter.entry(record.entry, accessoryObject: accessoryObject, into: &out)
        EventLineWriter.literal(#","gids":["#, into: &out)
        EventLineWriter.list(audience.gids, into: &out) { EventLineWriter.number(UInt64($0), into: &$1) }
        EventLineWriter.literal(#"],"uids":["#, into: &out)
        EventLineWriter.list(audience.uids, into: &out) { EventLineWriter.number(UInt64($0), into: &$1) }
        EventLineWriter.literal("]}\n", into: &out)
    }

    /// `{"reserved":N}` and its newline.
    static func reservation(_ seq: UInt64, into out: inout JSONOutput) {
        EventLineWriter.literal(#"{"reserved":"#, into: &out)
        EventLineWriter.number(seq, into: &out)
        EventLineWriter.literal("}\n", into: &out)
    }

    /// A whole file: the header, the records, the reservation.
    static func contents(_ records: [HistoryRecord], reserved: UInt64) -> [UInt8] {
        Array(chunks(records, reserved: reserved).joined())
    }

    /// A whole file in chunks of at most 256 records, each encoded when it is asked for: a rewrite of the whole ring
    /// holds one chunk in memory, not the file.
    static func chunks(_ records: [HistoryRecord], reserved: UInt64) -> some Sequence<[UInt8]> {
        let chunkSize = 256
        let count = records.isEmpty ? 1 : (records.count + chunkSize - 1) / chunkSize
        return (0..<count).lazy.map { index in
            let slice = records[min(records.count, index * chunkSize)..<min(records.count, (index + 1) * chunkSize)]
            var out = JSONOutput(capacity: 64 + 800 * slice.count)
            if index == 0 { header(into: &out) }
            for record in slice { line(record, into: &out) }
            if index == count - 1 { reservation(reserved, into: &out) }
            return out.bytes()
        }
    }

    // MARK: Reading

    /// What a history file holds.
    struct Contents {
        /// The newest entries (at most the capacity asked for), oldest first.
        var records: [HistoryRecord] = []
        /// The highest number given out: the last entry's, or the last reservation if higher.
        var lastSeq: UInt64 = 0
        /// Whether the last line was cut short (a crash while writing) and dropped.
        var droppedCutLine = false
    }

    /// Why a file cannot be read, and the highest number its readable lines show (numbers continue after it).
    struct Unreadable: Error {
        var reason: String
        var lastSeq: UInt64
    }

    private struct Line: Decodable {
        var version: Int?
        var entry: HistoryEntry?
        var admins: Bool?
        var uids: [UInt32]?
        var gids: [UInt32]?
        var reserved: UInt64?
    }

    /// Reads a file's bytes, keeping the newest `capacity` entries.
    static func parse(_ bytes: [UInt8], capacity: Int) -> Result<Contents, Unreadable> {
        var contents = Contents()
        var ring = BoundedRing<HistoryRecord>(capacity: capacity)
        var problem: String?
        var lastEntrySeq: UInt64 = 0
        var lastReserved: UInt64 = 0
        var highest: UInt64 = 0
        let decoder = JSONDecoder()
        var lineNumber = 0
        var start = 0
        while start < bytes.count {
            lineNumber += 1
            guard let newline = bytes[start...].firstIndex(of: 0x0A) else {
                contents.droppedCutLine = true  // written by a crashed daemon: nothing after it was written
                break
            }
            let text = bytes[start..<newline]
            start = newline + 1
            let line: Line
            do {
                line = try decoder.decode(Line.self, from: Data(text))
            } catch {
                problem = problem ?? "line \(lineNumber): \(reason(error))"
                continue
            }
            if lineNumber == 1 {
                if line.version != version {
                    problem = problem ?? "line 1: not a history file of version \(version)"
                }
                continue
            }
            if let reserved = line.reserved {
                lastReserved = reserved
                highest = max(highest, reserved)
            } else if let entry = line.entry {
                highest = max(highest, entry.seq)
                if entry.seq <= lastEntrySeq {
                    problem = problem ?? "line \(lineNumber): seq \(entry.seq) does not follow \(lastEntrySeq)"
                }
                lastEntrySeq = max(lastEntrySeq, entry.seq)
                let audience = line.admins == true ? nil : (uids: line.uids ?? [], gids: line.gids ?? [])
                ring.append(HistoryRecord(entry: entry, audience: audience))
            } else {
                problem = problem ?? "line \(lineNumber): neither an entry nor a reservation"
            }
        }
        if lineNumber == 0 { problem = "empty" }
        if let problem { return .failure(Unreadable(reason: problem, lastSeq: highest)) }
        contents.records = ring.elements
        contents.lastSeq = max(lastEntrySeq, lastReserved)
        return .success(contents)
    }

    /// Reads the file in `directory`, if any. A file that cannot be read (not a regular file, larger than
    /// ``maximumSize(capacity:)``, a line that is not an entry) is moved aside, with a log line saying why; its
    /// numbers still count, so that the next are higher.
    static func load(from directory: DirectoryDescriptor, capacity: Int, logger: Logger) -> Contents {
        let path = directory.pathOf(name)
        let bytes: [UInt8]?
        var failure: Unreadable
        do throws(FileError) {
            bytes = try AtomicFile.read(name, in: directory, limit: maximumSize(capacity: capacity))
            guard let bytes else { return Contents() }
            switch parse(bytes, capacity: capacity) {
            case .success(let contents):
                if contents.droppedCutLine {
                    logger.notice(.state, "history: '\(path)': its last line was cut short (a crash); dropped it")
                }
                return contents
            case .failure(let unreadable): failure = unreadable
            }
        } catch {
            failure = Unreadable(reason: error.reason, lastSeq: 0)
        }
        // try?: the message says so.
        let aside = (try? AtomicFile.moveAside(name, in: directory)) ?? "(could not move it aside)"
        logger.error(
            .state,
            "history: '\(path)': unreadable (\(failure.reason)); moved to '\(aside)', starting an empty history"
                + (failure.lastSeq > 0 ? " numbered after \(failure.lastSeq)" : ""))
        var contents = Contents()
        contents.lastSeq = failure.lastSeq
        return contents
    }

    private static func reason(_ error: any Error) -> String {
        guard let error = error as? DecodingError else { return "\(error)" }
        switch error {
        case .keyNotFound(let key, let context):
            return (context.codingPath + [key]).map(\.stringValue).joined(separator: ".") + ": missing"
        case .dataCorrupted(let context), .typeMismatch(_, let context), .valueNotFound(_, let context):
            let path = context.codingPath.map(\.stringValue).joined(separator: ".")
            return path.isEmpty ? "not valid JSON" : "\(path): \(context.debugDescription)"
        @unknown default:
            return "\(error)"
        }
    }
}
