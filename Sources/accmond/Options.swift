import AccmonLogging
import AccmonOptions
import AccmonProtocol
import AccmondKit

let defaults = DaemonConfiguration()

let usage = """
    Usage: accmond [--socket PATH] [--simulate] [--no-udev] [--log-level LEVEL] [--max-client-buffer BYTES]
                   [--manifest PATH] [--manifest-dir DIR] [--state-dir PATH] [--restore-retention SECONDS] [--max-preserved N]

    The accmon daemon: publishes accessory connect and disconnect events on a Unix socket.

    Options:
      --socket PATH              listen here (default \(defaults.socketPath))
      --simulate                 enable the simulated event source driven by `accmon simulate`
      --no-udev                  do not watch udev (with --simulate: only simulated accessories)
      --log-level LEVEL          trace, debug, info, notice, warning, error or critical (default info)
      --max-client-buffer BYTES  bytes buffered for a client that does not read; past it the client is suspended and
                                 its events are queued and coalesced (default \(defaults.maximumOutboundBytes))
      --manifest PATH            the manifest's main file (default \(defaults.manifestPath))
      --manifest-dir DIR         its drop-ins, *.json in name order (default \(defaults.manifestDirectory))
      --state-dir PATH           keep state across restarts here (default \(defaults.stateDirectory ?? "none"))
      --restore-retention SECS   keep a gone client's session for its restore id this long (default \
    \(Int(defaults.restoreRetentionSeconds)))
      --max-preserved N          keep at most N such sessions (default \(defaults.maximumPreservedSessions))
      -h, --help                 show this help
      --version                  show the version

    """

/// What the command line asks for.
enum Invocation {
    case run(DaemonConfiguration)
    case help
    case version
}

/// Parses accmond's arguments (without the program name) with the rules of ``OptionCursor``.
func parseInvocation(_ arguments: [String]) throws(UsageError) -> Invocation {
    var configuration = DaemonConfiguration()
    var cursor = OptionCursor(arguments)
    while let argument = try cursor.next() {
        switch argument {
        case "--socket": configuration.socketPath = try cursor.value(for: argument)
        case "--simulate": configuration.simulate = true
        case "--no-udev": configuration.watchesUdev = false
        case "--log-level": configuration.logger.level = try cursor.choice(for: argument, of: LogLevel.self)
        case "--max-client-buffer":
            configuration.maximumOutboundBytes = try cursor.integer(for: argument, in: 4096...Int.max)
        case "--state-dir": configuration.stateDirectory = try cursor.value(for: argument)
        case "--manifest": configuration.manifestPath = try cursor.value(for: argument)
        case "--manifest-dir": configuration.manifestDirectory = try cursor.value(for: argument)
        case "--restore-retention":
            configuration.restoreRetentionSeconds = try cursor.seconds(
                for: argument, in: 0...Double.greatestFiniteMagnitude)
        case "--max-preserved":
            configuration.maximumPreservedSessions = try cursor.integer(for: argument, in: 0...Int.max)
        case "-h", "--help": return .help
        case "--version": return .version
        default:
            throw UsageError(
                cursor.isOption(argument) ? "unknown option '\(argument)'" : "unexpected argument '\(argument)'")
        }
    }
    return .run(configuration)
}
