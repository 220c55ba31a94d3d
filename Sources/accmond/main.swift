import AccmonCore
import AccmonSys
import AccmondKit
import Glibc

let usage = """
    Usage: accmond [--socket PATH] [--simulate] [--no-udev] [--log-level LEVEL] [--max-client-buffer BYTES]
                   [--manifest PATH] [--manifest-dir DIR] [--state-dir PATH] [--restore-retention SECONDS] [--max-preserved N]

    The accmon daemon: publishes accessory connect and disconnect events on a Unix socket.

    Options:
      --socket PATH              listen here (default \(WireFormat.defaultSocketPath))
      --simulate                 enable the simulated event source driven by `accmon simulate`
      --no-udev                  do not watch udev (with --simulate: only simulated accessories)
      --log-level LEVEL          trace, debug, info, notice, warning, error or critical (default info)
      --max-client-buffer BYTES  bytes buffered for a client that does not read; past it the client is suspended and
                                 its events are queued and coalesced (default 4194304)
      --manifest PATH            the manifest's main file (default \(Manifest.defaultPath))
      --manifest-dir DIR         its drop-ins, *.json in name order (default \(Manifest.defaultDropInDirectory))
      --state-dir PATH           keep state across restarts here (default /var/lib/accmon)
      --restore-retention SECS   keep a gone client's session for its restore id this long (default 86400)
      --max-preserved N          keep at most N such sessions (default 1024)
      -h, --help                 show this help
      --version                  show the version

    """

func fail(_ message: String) -> Never {
    try? FileDescriptor.standardError.writeAll("Error: \(message)\n\(usage)See 'accmond --help'.\n".utf8)  // try?: exiting anyway
    exit(64)
}

func parseArguments(_ list: [String]) -> DaemonConfiguration {
    var configuration = DaemonConfiguration()
    var arguments = list[...]
    func value(for option: String) -> String {
        guard let value = arguments.popFirst() else { fail("\(option) needs a value") }
        return value
    }
    while let argument = arguments.popFirst() {
        switch argument {
        case "--socket": configuration.socketPath = value(for: argument)
        case "--simulate": configuration.simulate = true
        case "--no-udev": configuration.watchesUdev = false
        case "--log-level":
            let text = value(for: argument)
            guard let level = LogLevel(rawValue: text) else {
                fail(
                    "--log-level: '\(text)' is not a level (\(LogLevel.allCases.map(\.rawValue).joined(separator: ", ")))"
                )
            }
            configuration.logger.level = level
        case "--max-client-buffer":
            let text = value(for: argument)
            guard let bytes = Int(text), bytes >= 4096 else {
                fail("--max-client-buffer: '\(text)' is not a number ≥ 4096")
            }
            configuration.maximumOutboundBytes = bytes
        case "--state-dir": configuration.stateDirectory = value(for: argument)
        case "--manifest": configuration.manifestPath = value(for: argument)
        case "--manifest-dir": configuration.manifestDirectory = value(for: argument)
        case "--restore-retention":
            let text = value(for: argument)
            guard let seconds = Double(text), seconds >= 0 else {
                fail("--restore-retention: '\(text)' is not seconds ≥ 0")
            }
            configuration.restoreRetentionSeconds = seconds
        case "--max-preserved":
            let text = value(for: argument)
            guard let count = Int(text), count >= 0 else { fail("--max-preserved: '\(text)' is not a count ≥ 0") }
            configuration.maximumPreservedSessions = count
        case "-h", "--help":
            try? FileDescriptor.standardOutput.writeAll(usage.utf8)  // try?: exiting anyway
            exit(0)
        case "--version":
            try? FileDescriptor.standardOutput.writeAll("accmond \(AccmonVersion.current)\n".utf8)  // try?: exiting anyway
            exit(0)
        default: fail("unknown argument '\(argument)'")
        }
    }
    return configuration
}

var configuration = parseArguments(Array(CommandLine.arguments.dropFirst()))
adoptServiceManager(&configuration)

ignoreBrokenPipeSignal()
SignalDescriptor.block([SIGTERM, SIGINT, SIGHUP])
do {
    var sources: [any EventSource] = []
    if configuration.watchesUdev { sources.append(try UdevEventSource(logger: configuration.logger)) }
    try Daemon(configuration: configuration, sources: sources).run()
} catch {
    configuration.logger.critical("\(error)", messageID: LogMessageID.startFailed)
    exit(1)
}
