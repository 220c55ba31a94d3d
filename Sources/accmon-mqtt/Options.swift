import AccmonBridge
import AccmonLogging
import AccmonOptions

let usage = """
    Usage: accmon-mqtt [--config PATH] [--check] [--log-level LEVEL]

    The accmon MQTT bridge: publishes this host's accessories, as accmond reports them, to an MQTT broker: one
    retained topic per connected accessory, the events, and the host's online status (docs/MQTT.md).

    Options:
      --config PATH      the configuration (default \(BridgeConfiguration.defaultPath))
      --check            check the configuration and the files it names, print a summary and exit: 0 when it is
                         sound, 65 when it has problems (printed as file:line:column: reason)
      --log-level LEVEL  trace, debug, info, notice, warning, error or critical (default info)
      -h, --help         show this help
      --version          show the version

    """

/// What the command line asks for.
enum Invocation: Equatable {
    case run(configPath: String, check: Bool, logLevel: LogLevel)
    case help
    case version
}

/// Parses accmon-mqtt's arguments (without the program name) with the rules of ``OptionCursor``.
func parseInvocation(_ arguments: [String]) throws(UsageError) -> Invocation {
    var configPath = BridgeConfiguration.defaultPath
    var check = false
    var logLevel = LogLevel.info
    var cursor = OptionCursor(arguments)
    while let argument = try cursor.next() {
        switch argument {
        case "--config": configPath = try cursor.value(for: argument)
        case "--check": check = true
        case "--log-level": logLevel = try cursor.choice(for: argument, of: LogLevel.self)
        case "-h", "--help": return .help
        case "--version": return .version
        case "--password", "--password-file":
            throw UsageError(
                "\(argument): the broker's password goes in a file named by \"passwordFile\" in the configuration")
        default:
            throw UsageError(
                cursor.isOption(argument) ? "unknown option '\(argument)'" : "unexpected argument '\(argument)'")
        }
    }
    return .run(configPath: configPath, check: check, logLevel: logLevel)
}
