import AccmonClient
import AccmonCore
import Glibc

let commands: [any Command.Type] = [
    WatchCommand.self, ListCommand.self, StatusCommand.self, SimulateCommand.self, ManifestCommand.self,
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

func usageFailure(_ message: String, usage: String, command: String?) -> Never {
    writeError("Error: \(message)\n\(usage)See 'accmon\(command.map { " \($0)" } ?? "") --help'.\n")
    exit(.usage)
}

var arguments = Arguments(expandingEqualsSigns(Array(CommandLine.arguments.dropFirst())))
var socket: String?
var chosen: (any Command.Type)?
while chosen == nil, let argument = arguments.next() {
    switch argument {
    case "-h", "--help":
        writeOut(mainUsage)
        exit(.success)
    case "--version":
        writeOut("accmon \(AccmonVersion.current)\n")
        exit(.success)
    case "--socket":
        do throws(UsageError) {
            socket = try arguments.value(for: argument)
        } catch {
            usageFailure(error.message, usage: mainUsage, command: nil)
        }
    case "help":
        guard let name = arguments.next() else {
            writeOut(mainUsage)
            exit(.success)
        }
        guard let type = commands.first(where: { $0.name == name }) else {
            usageFailure("unknown command '\(name)'", usage: mainUsage, command: nil)
        }
        writeOut(type.usage)
        exit(.success)
    default:
        guard let type = commands.first(where: { $0.name == argument }) else {
            usageFailure("unknown command '\(argument)'", usage: mainUsage, command: nil)
        }
        chosen = type
    }
}
guard let chosen else { usageFailure("a command is required", usage: mainUsage, command: nil) }

// Help first: `accmon watch --json --help` prints help without connecting.
let rest = Array(sequence(state: arguments) { $0.next() })
if rest.contains("-h") || rest.contains("--help") {
    writeOut(chosen.usage)
    exit(.success)
}
var commandArguments = Arguments(rest)
let parsed: any Command
do throws(UsageError) {
    parsed = try chosen.init(&commandArguments, socket: socket)
} catch {
    usageFailure(error.message, usage: chosen.usage, command: chosen.name)
}

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
