import AccmonLogging
import AccmonNodeHelper
import AccmonOptions

let usage = """
    Usage: accmon-nodes [--allow-user USER] [--state-directory DIR] [--dev DIR] [--socket PATH] [--scanner PATH]
                        [--log-level LEVEL]
           accmon-nodes --scan-openers [--allow-user USER] [--socket PATH] [--log-level LEVEL]
           accmon-nodes --restore-all [--state-directory DIR] [--dev DIR]
           accmon-nodes --request JSON [--socket PATH]

    accmon's node helper: changes the owner, mode and ACL of device nodes for accmond's claims, and restores them.
    Started by accmon-nodes.socket; serves accmond's user alone, and holds only character devices below /dev that
    udev marked for accmon (ACCMON_KIND). Its records and port marks are in the state directory (docs/ARCHITECTURE.md,
    "The node helper").

    Options:
      --allow-user USER      the user whose clients are served, a name or a uid (default accmond; with
                             --scan-openers, root)
      --state-directory DIR  the records of held nodes and the marks of claimed ports (default /run/accmon-nodes)
      --dev DIR              the directory device nodes must be below (default /dev)
      --socket PATH          the socket to listen on when the service manager passes none; with --request, the
                             helper's socket (default \(NodeHelper.defaultSocketPath))
      --scanner PATH         the opener scanner's socket (default \(NodeHelper.defaultScannerSocketPath)), or
                             'none' to scan /proc in this process (it then sees what its privileges let it)
      --scan-openers         serve the helper's requests for the processes that have its nodes open: the mode of
                             accmon-nodes-scan.service, the one unit that may look at every process's descriptors
      --restore-all          restore every held node and unmark every port, then exit (the package's prerm)
      --request JSON         send one request line to the running helper and print its reply (exit 0 when ok, 1
                             when not, 69 when the helper cannot be reached)
      --log-level LEVEL      trace, debug, info, notice, warning, error or critical (default info)
      -h, --help             show this help
      --version              show the version

    """

/// What the command line asks for.
enum Invocation {
    case serve(NodeHelper.Settings, LogLevel)
    case scanOpeners(NodeHelper.Settings, LogLevel)
    case restoreAll(NodeHelper.Settings)
    case request(String, socketPath: String)
    case help
    case version
}

/// Parses accmon-nodes' arguments (without the program name) with the rules of ``OptionCursor``.
func parseInvocation(_ arguments: [String]) throws(UsageError) -> Invocation {
    var settings = NodeHelper.Settings()
    var logLevel = LogLevel.info
    var restoreAll = false
    var scanOpeners = false
    var allowedUserGiven = false
    var request: String?
    var cursor = OptionCursor(arguments)
    while let argument = try cursor.next() {
        switch argument {
        case "--allow-user":
            settings.allowedUser = try cursor.value(for: argument)
            allowedUserGiven = true
        case "--scanner":
            let value = try cursor.value(for: argument)
            settings.scannerSocket = value == "none" ? nil : value
        case "--scan-openers": scanOpeners = true
        case "--state-directory": settings.stateDirectory = try cursor.value(for: argument)
        case "--dev": settings.deviceDirectory = try cursor.value(for: argument)
        case "--socket": settings.socketPath = try cursor.value(for: argument)
        case "--restore-all": restoreAll = true
        case "--request": request = try cursor.value(for: argument)
        case "--log-level": logLevel = try cursor.choice(for: argument, of: LogLevel.self)
        case "-h", "--help": return .help
        case "--version": return .version
        default:
            throw UsageError(
                cursor.isOption(argument) ? "unknown option '\(argument)'" : "unexpected argument '\(argument)'")
        }
    }
    for (path, option) in [(settings.stateDirectory, "--state-directory"), (settings.deviceDirectory, "--dev")]
    where !path.hasPrefix("/") {
        throw UsageError("\(option) needs an absolute path (given '\(path)')")
    }
    if [restoreAll, request != nil, scanOpeners].filter({ $0 }).count > 1 {
        throw UsageError("--restore-all, --request and --scan-openers do not go together")
    }
    if restoreAll { return .restoreAll(settings) }
    if scanOpeners {
        if !allowedUserGiven { settings.allowedUser = "0" }
        return .scanOpeners(settings, logLevel)
    }
    if let request { return .request(request, socketPath: settings.socketPath ?? NodeHelper.defaultSocketPath) }
    return .serve(settings, logLevel)
}
