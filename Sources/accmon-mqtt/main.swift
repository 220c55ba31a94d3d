import AccmonBridge
import AccmonLogging
import AccmonMQTT
import AccmonOptions
import AccmonProtocol
import AccmonSys
import AccmonSystemd
import Glibc

func write(_ text: String, to descriptor: FileDescriptor) {
    try? descriptor.writeAll(text.utf8)  // try?: nowhere left to report a failed write
}

let configPath: String
let check: Bool
var logger = Logger(label: "accmon-mqtt")
do throws(UsageError) {
    switch try parseInvocation(Array(CommandLine.arguments.dropFirst())) {
    case .run(let path, let checkOnly, let level):
        configPath = path
        check = checkOnly
        logger.level = level
    case .help:
        write(usage, to: .standardOutput)
        exit(0)
    case .version:
        write("accmon-mqtt \(AccmonVersion.current)\n", to: .standardOutput)
        exit(0)
    }
} catch {
    write(error.report(usage: usage, helpCommand: "accmon-mqtt"), to: .standardError)
    exit(64)
}
if Journal.standardErrorIsJournal { logger.destination = .journal }

var hostName = [CChar](repeating: 0, count: 256)
gethostname(&hostName, hostName.count - 1)
let machineHostName = String(decoding: hostName.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
let configuration: BridgeConfiguration
switch BridgeConfiguration.load(path: configPath, defaultHost: machineHostName) {
case .success(let loaded): configuration = loaded
case .failure(let problems):
    write(problems.description, to: .standardError)
    if !check { logger.critical(.configuration, "the configuration has problems (above): not starting") }
    exit(65)
}
if check {
    let brokers = configuration.broker.addresses.map(\.description).joined(separator: ", ")
    write(
        "ok: \(configPath): broker \(brokers), host '\(configuration.host)', "
            + "prefix '\(configuration.topics.prefix)'\n", to: .standardOutput)
    exit(0)
}

ignoreBrokenPipeSignal()
SignalDescriptor.block([SIGTERM, SIGINT])
let (identity, warning) = BridgeIdentity.current(machineIDFile: configuration.machineIDFile)
if let warning { logger.warning(.configuration, warning) }
do {
    // Claims across the fleet, on a thread of their own beside the event path.
    let census = CensusBoard()
    try ClaimGateway(configuration: configuration, identity: identity, census: census, logger: logger).start()
    try Bridge(configuration: configuration, identity: identity, census: census, logger: logger).run()
} catch {
    logger.critical(.startFailed, "cannot run: \(error)")
    exit(1)
}
exit(0)
