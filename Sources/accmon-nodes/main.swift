import AccmonLogging
import AccmonNodeHelper
import AccmonOptions
import AccmonProtocol
import AccmonSys
import AccmonSystemd
import Glibc

func write(_ text: String, to descriptor: FileDescriptor) {
    try? descriptor.writeAll(text.utf8)  // try?: nowhere left to report a failed write
}

let invocation: Invocation
do throws(UsageError) {
    invocation = try parseInvocation(Array(CommandLine.arguments.dropFirst()))
} catch {
    write(error.report(usage: usage, helpCommand: "accmon-nodes"), to: .standardError)
    exit(64)
}
switch invocation {
case .help:
    write(usage, to: .standardOutput)
    exit(0)
case .version:
    write("accmon-nodes \(AccmonVersion.current)\n", to: .standardOutput)
    exit(0)
case .restoreAll(let settings):
    exit(NodeHelper.restoreAll(settings))
case .request(let line, let socketPath):
    exit(NodeHelper.request(line, socketPath: socketPath))
case .serve(let settings, let level):
    exit(NodeHelper.serve(settings, logger: logger(level)))
case .scanOpeners(let settings, let level):
    exit(NodeHelper.scanOpeners(settings, logger: logger(level)))
}

func logger(_ level: LogLevel) -> Logger {
    var logger = Logger(label: "accmon-nodes", level: level)
    if Journal.standardErrorIsJournal { logger.destination = .journal }
    return logger
}
