import AccmonLogging
import AccmonOptions
import AccmonProtocol
import AccmondKit

let defaults = DaemonConfiguration()
let limits = DaemonLimits()

let usage = """
    Usage: accmond [--socket PATH] [--dbus] [--simulate] [--no-udev] [--log-level LEVEL] [--manifest PATH]
                   [--manifest-dir DIR] [--state-dir PATH] [--restore-retention SECONDS] [--history-entries N]
                   [CLAIMS] [LIMITS]

    The accmon daemon: publishes accessory connect and disconnect events on a Unix socket.

    Options:
      --socket PATH              listen here (default \(defaults.socketPath))
      --simulate                 enable the simulated event source driven by `accmon simulate`
      --no-udev                  do not watch udev (with --simulate: only simulated accessories)
      --dbus                     also serve org.accmon.Accmon1 on the system bus (DBUS_SYSTEM_BUS_ADDRESS, else
                                 /run/dbus/system_bus_socket; docs/DBUS.md)
      --log-level LEVEL          trace, debug, info, notice, warning, error or critical (default info)
      --manifest PATH            the manifest's main file (default \(defaults.manifestPath))
      --manifest-dir DIR         its drop-ins, *.json in name order (default \(defaults.manifestDirectory))
      --state-dir PATH           keep state across restarts here (default \(defaults.stateDirectory ?? "none"));
                                 writable by its owner alone (accmond's user or root), else accmond refuses to start
      --restore-retention SECS   keep a gone client's session for its restore id this long (default \
    \(Int(defaults.restoreRetentionSeconds)))
      --history-entries N        keep the newest N history entries (connects, disconnects, rejections, claims) in
                                 memory and in history.jsonl in the state directory; 0 keeps none (default \
    \(defaults.historyEntries)).
                                 Each takes about 0.8 KiB of memory (7.6 MiB per 10,000) and 0.6 KiB of the file,
                                 which holds up to twice N entries before it is rewritten (docs/HISTORY.md)
      -h, --help                 show this help
      --version                  show the version

    Claims (check-out of accessories, enforced on their device nodes):
      --node-helper PATH         the socket of accmon-nodes, which enforces claims on real devices' nodes
                                 (default \(defaults.nodeRouting.helperSocket ?? "none"); `none`: claims on real
                                 devices are refused)
      --simulated-nodes DIR      with --simulate: enforce claims on simulated accessories' nodes below DIR (files,
                                 ptys made with mknod) here, in accmond; nodes elsewhere are left alone
      --claim-grace SECONDS      how long a claim kept with a preserved session waits for its client (default \
    \(Int(defaults.claimGraceSeconds)))
      --claim-reclaim SECONDS    after a restart, how long claim holders and waiters have to come back (default \
    \(Int(defaults.claimReclaimSeconds)))

    Limits (a client over a connection limit gets the error too-many-connections and is closed; a client over an
    output limit is suspended: its events are queued and coalesced until it reads, and its requests wait):
      --max-connections N           client connections open at once (default \(limits.connections))
      --max-connections-per-user N  connections of one user, root excepted (default \(limits.connectionsPerUser))
      --max-connect-rate-per-user N connections of one user per second, root excepted, after a burst of
                                    --max-connections-per-user; past it the user's connections wait (default \
    \(limits.connectsPerUserPerSecond); 0: no limit)
      --max-loop-share-per-user PCT the share of the daemon's loop one user's requests may take, root excepted,
                                    in per cent; past it the user's requests wait (default \
    \(Int(limits.loopSharePerUser * 100)); 0: no limit)
      --max-client-buffer BYTES     bytes buffered for one client (default \(limits.clientOutputBytes); at least 4096)
      --max-output-bytes BYTES      bytes buffered for all clients together; past it the clients holding the most
                                    are suspended first (default \(limits.totalOutputBytes); at least 65536)
      --max-requests-per-turn N     requests of one client handled before the others' (default \
    \(limits.requestsPerTurn))
      --max-bus-unacknowledged BYTES
                                    with --dbus: bytes of events a bus subscription may have unacknowledged; past it
                                    it is suspended (default \(limits.busUnacknowledgedBytes); at least 4096)
      --max-bus-stall SECONDS       with --dbus: how long the system bus may take nothing of what accmond has to
                                    send before accmond connects again, every bus peer then counting as gone
                                    (default \(Int(limits.busStallSeconds)))
      --max-preserved N             sessions kept for restore ids, in all (default \(limits.preservedSessions))
      --max-preserved-per-user N    of one user; past it that user's oldest is dropped (default \
    \(limits.preservedSessionsPerUser))

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
        case "--dbus": configuration.servesBus = true
        case "--log-level": configuration.logger.level = try cursor.choice(for: argument, of: LogLevel.self)
        case "--state-dir": configuration.stateDirectory = try cursor.value(for: argument)
        case "--manifest": configuration.manifestPath = try cursor.value(for: argument)
        case "--manifest-dir": configuration.manifestDirectory = try cursor.value(for: argument)
        case "--node-helper":
            let path = try cursor.value(for: argument)
            configuration.nodeRouting.helperSocket = path == "none" ? nil : path
        case "--simulated-nodes": configuration.nodeRouting.simulatedNodes = try cursor.value(for: argument)
        case "--claim-grace":
            configuration.claimGraceSeconds = try cursor.seconds(for: argument, in: 0...86_400)
        case "--claim-reclaim":
            configuration.claimReclaimSeconds = try cursor.seconds(for: argument, in: 0...86_400)
        case "--history-entries":
            configuration.historyEntries = try cursor.integer(
                for: argument, in: 0...DaemonConfiguration.maximumHistoryEntries)
        case "--restore-retention":
            configuration.restoreRetentionSeconds = try cursor.seconds(
                for: argument, in: 0...Double.greatestFiniteMagnitude)
        case "--max-connections": configuration.limits.connections = try cursor.integer(for: argument, in: 1...Int.max)
        case "--max-connections-per-user":
            configuration.limits.connectionsPerUser = try cursor.integer(for: argument, in: 1...Int.max)
        case "--max-connect-rate-per-user":
            configuration.limits.connectsPerUserPerSecond = try cursor.integer(for: argument, in: 0...Int.max)
        case "--max-loop-share-per-user":
            configuration.limits.loopSharePerUser = Double(try cursor.integer(for: argument, in: 0...100)) / 100
        case "--max-client-buffer":
            configuration.limits.clientOutputBytes = try cursor.integer(for: argument, in: 4096...Int.max)
        case "--max-output-bytes":
            configuration.limits.totalOutputBytes = try cursor.integer(for: argument, in: 65536...Int.max)
        case "--max-requests-per-turn":
            configuration.limits.requestsPerTurn = try cursor.integer(for: argument, in: 1...Int.max)
        case "--max-bus-unacknowledged":
            configuration.limits.busUnacknowledgedBytes = try cursor.integer(for: argument, in: 4096...Int.max)
        case "--max-bus-stall":
            configuration.limits.busStallSeconds = try cursor.seconds(for: argument, in: 0.5...86_400)
        case "--max-preserved":
            configuration.limits.preservedSessions = try cursor.integer(for: argument, in: 0...Int.max)
        case "--max-preserved-per-user":
            configuration.limits.preservedSessionsPerUser = try cursor.integer(for: argument, in: 0...Int.max)
        case "-h", "--help": return .help
        case "--version": return .version
        default:
            throw UsageError(
                cursor.isOption(argument) ? "unknown option '\(argument)'" : "unexpected argument '\(argument)'")
        }
    }
    return .run(configuration)
}
