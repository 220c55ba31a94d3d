import AccmonClient
import AccmonManifest
import AccmonOptions
import Glibc
import Synchronization

/// A subcommand: parsed completely before anything connects to the daemon.
protocol Command {
    static var name: String { get }
    static var abstract: String { get }
    static var usage: String { get }
    init(_ arguments: inout OptionCursor, socket: String?) throws(UsageError)
    /// Settings of the whole process the command wants, made on the main thread before any other thread exists
    /// (malloc's, which a thread's heap takes when it is made).
    func prepareProcess()
    func run() async throws(AccmonError)
}

extension Command {
    func prepareProcess() {}
}

/// Options every subcommand takes.
struct CommonOptions {
    var socket: String?

    /// Consumes `option` if it is common; returns whether it was.
    mutating func parse(_ option: String, _ arguments: inout OptionCursor) throws(UsageError) -> Bool {
        guard option == "--socket" else { return false }
        socket = try arguments.value(for: option)
        return true
    }

    func connect() async throws(AccmonError) -> AccmonConnection {
        try await AccmonConnection.connect(socketPath: socket, clientName: "accmon")
    }

    static let help = """
          --socket PATH      accmond's socket (default: $ACCMON_SOCKET, else \(WireFormat.defaultSocketPath))
          -h, --help         show this help
        """
}

/// The options `watch` and `list` share: `--json`, `--all`, the filter options, the fleet view's and the common ones.
struct SelectionOptions {
    var common: CommonOptions
    var json = false
    var all = false
    var filter = AccessoryFilter()
    var fleet = FleetOptions()

    /// Consumes `option` if it is one of these; returns whether it was.
    mutating func parse(_ option: String, _ arguments: inout OptionCursor) throws(UsageError) -> Bool {
        switch option {
        case "--json": json = true
        case "--all": all = true
        default:
            if try common.parse(option, &arguments) { return true }
            if try fleet.parse(option, &arguments) { return true }
            return try parseFilterOption(option, &arguments, into: &filter)
        }
        return true
    }
}
