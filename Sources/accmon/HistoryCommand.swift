import AccmonClient
import AccmonOptions
import Glibc

struct HistoryCommand: Command {
    static let name = "history"
    static let abstract = "Show what happened to the accessories: connects, disconnects, claims."
    static let usage = """
        Usage: accmon history [--since DURATION|TIME] [--limit N] [--kind KIND] [--vendor ID] [--product ID]
                              [--protocol NAME] [--json] [--socket PATH]

        \(abstract)

        accmond keeps the newest entries (10,000 by default) across restarts; each client sees the entries of the
        accessories it may see, and root and the manifest's admins also the connects the manifest rejected.

        Options:
          --since WHEN       only entries after WHEN: a duration back from now (30s, 5m, 1h, 2d, 1h30m) or an
                             ISO 8601 time (2026-12-02T10:00:00Z, 2026-12-02T11:00:00+01:00; without a zone, local
                             time; a date alone, its midnight)
          --limit N          at most N entries, the newest (1 to \(HistoryQuery.maximumLimit), default \
        \(HistoryQuery.defaultLimit))
          --json             print each entry as one JSON object per line, as accmond sends it
        \(filterOptionsHelp)
        \(CommonOptions.help)

        """

    var common: CommonOptions
    var since: TimeReference?
    var limit = HistoryQuery.defaultLimit
    var filter = AccessoryFilter()
    var json = false

    init(_ arguments: inout OptionCursor, socket: String?) throws(UsageError) {
        common = CommonOptions(socket: socket)
        while let option = try arguments.next() {
            switch option {
            case "--since": since = try TimeReference.parse(arguments.value(for: option), option: option)
            case "--limit": limit = try arguments.integer(for: option, in: 1...HistoryQuery.maximumLimit)
            case "--json": json = true
            default:
                if try common.parse(option, &arguments) { continue }
                if try parseFilterOption(option, &arguments, into: &filter) { continue }
                throw UsageError(
                    arguments.isOption(option) ? "unknown option '\(option)'" : "unexpected argument '\(option)'")
            }
        }
    }

    func run() async throws(AccmonError) {
        let connection = try await common.connect()
        let entries = try await connection.history(since: since.map(secondsSinceEpoch), limit: limit, filter: filter)
        connection.close()
        if json {
            writeOut(entries.map(jsonLine).joined())
            return
        }
        let style = Style.standardOutput
        writeOut(entries.map { historyLine($0, style: style) }.joined())
    }
}

/// Seconds since the epoch of a `--since` value: now less a duration, an instant, or a local time placed in the
/// local time zone (`mktime`).
func secondsSinceEpoch(_ reference: TimeReference) -> Double {
    switch reference {
    case .ago(let seconds):
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9 - seconds
    case .instant(let seconds):
        return seconds
    case .local(let time):
        var parts = tm()
        parts.tm_year = Int32(time.year - 1900)
        parts.tm_mon = Int32(time.month - 1)
        parts.tm_mday = Int32(time.day)
        parts.tm_hour = Int32(time.hour)
        parts.tm_min = Int32(time.minute)
        let whole = time.second.rounded(.down)
        parts.tm_sec = Int32(whole)
        parts.tm_isdst = -1  // the zone's rule for that date decides
        return Double(mktime(&parts)) + (time.second - whole)
    }
}
