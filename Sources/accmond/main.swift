import AccmonLogging
import AccmonOptions
import AccmonProtocol
import AccmonSys
import AccmondKit
import Glibc

var configuration: DaemonConfiguration
do throws(UsageError) {
    switch try parseInvocation(Array(CommandLine.arguments.dropFirst())) {
    case .run(let parsed): configuration = parsed
    case .help:
        try? FileDescriptor.standardOutput.writeAll(usage.utf8)  // try?: exiting anyway
        exit(0)
    case .version:
        try? FileDescriptor.standardOutput.writeAll("accmond \(AccmonVersion.current)\n".utf8)  // try?: exiting anyway
        exit(0)
    }
} catch {
    // try?: exiting anyway.
    try? FileDescriptor.standardError.writeAll(error.report(usage: usage, helpCommand: "accmond").utf8)
    exit(64)
}
adoptServiceManager(&configuration)

ignoreBrokenPipeSignal()
SignalDescriptor.block([SIGTERM, SIGINT, SIGHUP])
do {
    var sources: [any EventSource] = []
    if configuration.watchesUdev { sources.append(try UdevEventSource(logger: configuration.logger)) }
    try Daemon(configuration: configuration, sources: sources).run()
} catch {
    configuration.logger.critical(.startFailed, "\(error)")
    exit(1)
}
