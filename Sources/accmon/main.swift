import AccmonClient
import AccmonManifest
import AccmonOptions
import Glibc

let commands: [any Command.Type] = [
    WatchCommand.self, ListCommand.self, WaitCommand.self, StatusCommand.self, HistoryCommand.self,
    ClaimCommand.self, OpenCommand.self, ClaimsCommand.self, ReleaseCommand.self, SimulateCommand.self, ManifestCommand.self,
]

let mainUsage = """
    Usage: accmon [--socket PATH] COMMAND [OPTIONS]

    Watch and list external accessories through accmond.

    Commands:
    \(commands.map { "  \($0.name.padding(10))\($0.abstract)" }.joined(separator: "\n"))

    Options:
      --socket PATH  accmond's socket (default: $ACCMON_SOCKET, else \(WireFormat.defaultSocketPath))
      -h, --help     show this help; `accmon help COMMAND` or `accmon COMMAND --help` for a command
      --version      show the version

    """

func usageFailure(_ error: UsageError, usage: String, command: String?) -> Never {
    writeError(error.report(usage: usage, helpCommand: "accmon\(command.map { " \($0)" } ?? "")"))
    exit(.usage)
}

/// What the command line asks for.
enum Invocation {
    case run(any Command)
    /// Help or the version: printed as it is.
    case show(String)
}

/// Parses the whole command line before anything connects: the global options, the command, then its options.
/// Help wins over everything else (`accmon watch --json --help` prints the help of `watch`).
@MainActor func parseInvocation(_ list: [String]) -> Invocation {
    var arguments = OptionCursor(list)
    var socket: String?
    var chosen: (any Command.Type)?
    do throws(UsageError) {
        while chosen == nil, let argument = try arguments.next() {
            switch argument {
            case "-h", "--help": return .show(mainUsage)
            case "--version": return .show("accmon \(AccmonVersion.current)\n")
            case "--socket": socket = try arguments.value(for: argument)
            case "help":
                guard let name = try arguments.next() else { return .show(mainUsage) }
                guard let type = commands.first(where: { $0.name == name }) else {
                    throw UsageError("unknown command '\(name)'")
                }
                return .show(type.usage)
            default:
                guard let type = commands.first(where: { $0.name == argument }) else {
                    throw UsageError(
                        arguments.isOption(argument)
                            ? "unknown option '\(argument)'" : "unknown command '\(argument)'")
                }
                chosen = type
            }
        }
    } catch {
        usageFailure(error, usage: mainUsage, command: nil)
    }
    guard let chosen else { usageFailure(UsageError("a command is required"), usage: mainUsage, command: nil) }
    let rest = arguments.rest()
    // Help asked of the command itself, not of what follows `--` (`accmon claim -- make --help`).
    let options = rest.prefix { $0 != "--" }
    if options.contains("-h") || options.contains("--help") { return .show(chosen.usage) }
    var commandArguments = OptionCursor(rest)
    do throws(UsageError) {
        return .run(try chosen.init(&commandArguments, socket: socket))
    } catch {
        usageFailure(error, usage: chosen.usage, command: chosen.name)
    }
}

let parsed: any Command
switch parseInvocation(Array(CommandLine.arguments.dropFirst())) {
case .run(let command): parsed = command
case .show(let text):
    writeOut(text)
    exit(.success)
}

parsed.prepareProcess()

// Ctrl-C (and SIGTERM) end `watch` quietly with success.
signal(SIGINT) { _ in _exit(0) }
signal(SIGTERM) { _ in _exit(0) }

do throws(AccmonError) {
    try await parsed.run()
} catch {
    writeError("\(error.message)\n")
    exit(ExitCode(error))
}
exit(.success)
