import AccmonClient
import AccmonManifest
import AccmonOptions
import Glibc
import Synchronization

/// A subcommand: parsed completely before anything connects to the daemon.
protocol Command {
    static var name: String { get }
    static var abstract: String { get }
    static var usage: String { get }
    init(_ arguments: inout OptionCursor, socket: String?) throws(UsageError)
    func run() async throws(AccmonError)
}

/// Options every subcommand takes.
struct CommonOptions {
    var socket: String?

    /// Consumes `option` if it is common; returns whether it was.
    mutating func parse(_ option: String, _ arguments: inout OptionCursor) throws(UsageError) -> Bool {
        guard option == "--socket" else { return false }
        socket = try arguments.value(for: option)
        return true
    }

    func connect() async throws(AccmonError) -> AccmonConnection {
        try await AccmonConnection.connect(socketPath: socket, clientName: "accmon")
    }

    static let help = """
          --socket PATH      accmond's socket (default: $ACCMON_SOCKET, else \(WireFormat.defaultSocketPath))
          -h, --help         show this help
        """
}

/// The options `watch` and `list` share: `--json`, `--all`, the filter options, the fleet view's and the common ones.
struct SelectionOptions {
    var common: CommonOptions
    var json = false
    var all = false
    var filter = AccessoryFilter()
    var fleet = FleetOptions()

    /// Consumes `option` if it is one of these; returns whether it was.
    mutating func parse(_ option: String, _ arguments: inout OptionCursor) throws(UsageError) -> Bool {
        switch option {
        case "--json": json = true
        case "--all": all = true
        default:
            if try common.parse(option, &arguments) { return true }
            if try fleet.parse(option, &arguments) { return true }
            return try parseFilterOption(option, &arguments, into: &filter)
        }
        return true
    }
}

struct WatchCommand: Command {
    static let name = "watch"
    static let abstract = "Show accessories as they connect and disconnect, until Ctrl-C."
    static let usage = """
        Usage: accmon watch [--json] [--all] [--restore-id ID] [--kind KIND] [--vendor ID] [--product ID] [--protocol NAME]
                            [--socket PATH]
               accmon watch --broker URL [--host GLOB] [--json] [FILTER OPTIONS] [BROKER OPTIONS]

        \(abstract)
        First prints the accessories connected now (as "present"), then one line per event: time, connect or
        disconnect, kind, vendor:product, name, serial, device node, connection id.

        Options:
          --json             print the protocol's messages as NDJSON: the snapshot, then each event
          --all              also accessories the manifest rejected, shown as "rejected: <reason>" (root and the
                             manifest's admins only)
          --restore-id ID    keep the session across restarts of accmon and accmond: when accmon watch starts
                             again with the same id, it shows what it knew (with --json: a "session" line
                             with "restored":true), then what it missed; it reconnects by itself
        \(filterOptionsHelp)
        \(CommonOptions.help)

        Fleet view (every host's bridge, through an MQTT broker; with --json: a "fleet" line, then "connect",
        "disconnect" and "status" lines, each with its "host"):
        \(FleetOptions.help)

        """

    var selection: SelectionOptions
    var restoreID: String?
    var common: CommonOptions { selection.common }
    var json: Bool { selection.json }
    var all: Bool { selection.all }
    var filter: AccessoryFilter { selection.filter }

    init(_ arguments: inout OptionCursor, socket: String?) throws(UsageError) {
        selection = SelectionOptions(common: CommonOptions(socket: socket))
        while let option = try arguments.next() {
            if option == "--restore-id" {
                restoreID = try arguments.value(for: option)
            } else if try !selection.parse(option, &arguments) {
                throw UsageError("unknown option '\(option)'")
            }
        }
        if all && restoreID != nil { throw UsageError("--all and --restore-id do not go together") }
        fleetView = try selection.fleet.validate(restoreID: restoreID, all: all)
    }

    /// Whether `--broker` asks for the fleet view.
    var fleetView = false

    /// The first `--json` line of a session with a restore id.
    struct SessionLine: Encodable {
        var type = "session"
        var restored: Bool
        var accessories: [Accessory]
    }

    func run() async throws(AccmonError) {
        if fleetView {
            try await selection.fleet.watch(filter: filter, json: json)
            return
        }
        if let restoreID {
            try await runSession(restoreID: restoreID)
            return
        }
        let connection = try await common.connect()
        // Printed on the connection's reader thread as each read of the socket is handled: no hop to another thread.
        let printer = WatchPrinter(json: json, style: .standardOutput)
        let observation = try await connection.subscribe(
            filter, includeRejected: all, onUpdate: { update, eventLine in printer.add(update, eventLine: eventLine) },
            afterRead: { printer.flush() })
        try await observation.waitForEnd()
    }
}

/// Collects what `accmon watch` prints for the updates of one read of the socket, and writes it with one write.
final class WatchPrinter: Sendable {
    private let json: Bool
    private let style: Style
    private let pending = Mutex<[UInt8]>([])

    init(json: Bool, style: Style) {
        self.json = json
        self.style = style
    }

    /// Adds the lines for `update`; `eventLine` is an event's line as the daemon wrote it.
    func add(_ update: SubscriptionUpdate, eventLine: [UInt8]) {
        switch update {
        case .snapshot(let snapshot):
            if json {
                pending.withLock { $0 += ProtocolCodec().encode(.snapshot(id: nil, snapshot)) }
            } else {
                let lines = snapshot.accessories.map { accessory in
                    humanLine("present", accessory, rejection: snapshot.rejected[accessory.connectionID], style: style)
                }
                pending.withLock { $0 += Array(lines.joined().utf8) }
            }
        case .event(let event):
            if json {
                // The daemon's line is what ProtocolCodec encodes for the event: print it as received.
                pending.withLock {
                    $0 += eventLine
                    $0.append(UInt8(ascii: "\n"))
                }
            } else {
                let line = humanLine(event.change.rawValue, event.accessory, rejection: event.rejection, style: style)
                pending.withLock { $0 += Array(line.utf8) }
            }
        }
    }

    /// Writes what was added since the last flush.
    func flush() {
        let bytes = pending.withLock { pending in
            defer { pending.removeAll(keepingCapacity: true) }
            return pending
        }
        if !bytes.isEmpty { writeOut(bytes) }
    }
}

extension WatchCommand {
    /// Watches through an ``AccmonSession``: survives restarts of both sides; printing an event consumes it.
    func runSession(restoreID: String) async throws(AccmonError) {
        let session = try await AccmonSession.start(
            socketPath: common.socket, clientName: "accmon watch", restoreID: restoreID, filter: filter)
        let style = Style.standardOutput
        if json {
            writeOut(jsonLine(SessionLine(restored: session.wasRestored, accessories: session.initialAccessories)))
        } else {
            if session.wasRestored { writeError("accmon: session '\(restoreID)' restored\n") }
            for accessory in session.initialAccessories {
                writeOut(humanLine(session.wasRestored ? "known" : "present", accessory, style: style))
            }
        }
        let states = Task {
            for await state in session.connectionStates {
                switch state {
                case .connected: writeError("accmon: connected to accmond\n")
                case .reconnecting(let attempt, let delay, let reason):
                    writeError("\(reason); reconnecting (attempt \(attempt), in \(delay) s)\n")
                case .closed: break
                }
            }
        }
        defer { states.cancel() }
        let codec = ProtocolCodec()
        for await event in session.events {
            if json {
                writeOut(String(decoding: codec.encode(.event(event)), as: UTF8.self))
            } else {
                writeOut(humanLine(event.change.rawValue, event.accessory, style: style))
            }
        }
    }
}

struct ListCommand: Command {
    static let name = "list"
    static let abstract = "List the accessories connected now."
    static let usage = """
        Usage: accmon list [--json] [--all] [--kind KIND] [--vendor ID] [--product ID] [--protocol NAME] [--socket PATH]
               accmon list --broker URL [--host GLOB] [--json] [FILTER OPTIONS] [BROKER OPTIONS]

        \(abstract)

        Options:
          --json             print {"version":1,"seq":N,"accessories":[...]} with sorted keys (with --all, also
                             "rejected": {connection id: reason})
          --all              also accessories the manifest rejected (root and the manifest's admins only)
        \(filterOptionsHelp)
        \(CommonOptions.help)

        Fleet view (every host's bridge, through an MQTT broker; with --json:
        {"version":1,"hosts":[{"host":...,"state":...,"status":{...},"accessories":[...]}]}):
        \(FleetOptions.help)

        """

    var selection: SelectionOptions
    var common: CommonOptions { selection.common }
    var json: Bool { selection.json }
    var all: Bool { selection.all }
    var filter: AccessoryFilter { selection.filter }

    init(_ arguments: inout OptionCursor, socket: String?) throws(UsageError) {
        selection = SelectionOptions(common: CommonOptions(socket: socket))
        while let option = try arguments.next() {
            if try !selection.parse(option, &arguments) { throw UsageError("unknown option '\(option)'") }
        }
        fleetView = try selection.fleet.validate(restoreID: nil, all: all)
    }

    /// Whether `--broker` asks for the fleet view.
    var fleetView = false

    struct Output: Encodable {
        var version = jsonOutputVersion
        var seq: UInt64
        var accessories: [Accessory]
        var rejected: [String: String]?
    }

    func run() async throws(AccmonError) {
        if fleetView {
            try await selection.fleet.list(filter: filter, json: json)
            return
        }
        let connection = try await common.connect()
        let snapshot = try await connection.list(filter, includeRejected: all)
        connection.close()
        if json {
            let rejected = Dictionary(uniqueKeysWithValues: snapshot.rejected.map { ($0.key.description, $0.value) })
            writeOut(
                jsonLine(
                    Output(
                        seq: snapshot.sequence, accessories: snapshot.accessories,
                        rejected: all ? rejected : nil)))
            return
        }
        let rows = snapshot.accessories.map { accessory in
            [
                accessory.connectionID.description, accessory.kind.rawValue, accessory.usbID,
                quotedIfNeeded(accessory.name), quotedIfNeeded(accessory.serialNumber),
                accessory.deviceNodes.joined(separator: ","),
            ] + (all ? [snapshot.rejected[accessory.connectionID].map { "rejected: \($0)" } ?? "allowed"] : [])
        }
        writeOut(table(["CONN", "KIND", "ID", "NAME", "SERIAL", "NODES"] + (all ? ["MANIFEST"] : []), rows))
    }
}

struct StatusCommand: Command {
    static let name = "status"
    static let abstract = "Show the daemon's version, uptime, accessories and sessions."
    static let usage = """
        Usage: accmon status [--json] [--socket PATH]

        \(abstract)

        Options:
          --json             print the status as one JSON object with sorted keys
        \(CommonOptions.help)

        """

    var common: CommonOptions
    var json = false

    init(_ arguments: inout OptionCursor, socket: String?) throws(UsageError) {
        common = CommonOptions(socket: socket)
        while let option = try arguments.next() {
            if option == "--json" {
                json = true
            } else if try !common.parse(option, &arguments) {
                throw UsageError("unknown option '\(option)'")
            }
        }
    }

    struct Output: Encodable {
        var version = jsonOutputVersion
        var socket: String
        var status: DaemonStatus
    }

    func run() async throws(AccmonError) {
        let connection = try await common.connect()
        let status = try await connection.status()
        connection.close()
        if json {
            writeOut(jsonLine(Output(socket: connection.socketPath, status: status)))
            return
        }
        writeOut(
            """
            accmond \(status.daemonVersion) on \(connection.socketPath) (protocol \(status.protocolVersion))
            uptime:       \(Int(status.uptimeSeconds)) s
            accessories:  \(status.connectedAccessories) connected
            sessions:     \(status.sessions)
            sequence:     \(status.sequence)
            simulation:   \(status.simulate ? "on" : "off")

            """)
        if let manifest = status.manifest {
            let files = manifest.files.isEmpty ? "no file" : manifest.files.joined(separator: ", ")
            writeOut(
                "manifest:     \(manifest.entries) entries from \(files); "
                    + "\(manifest.rejectedAccessories) connected accessories rejected\n")
            if !manifest.lastFailure.isEmpty {
                writeOut("              the last load failed; the manifest above stays in force:\n")
                for problem in manifest.lastFailure { writeOut("                \(problem)\n") }
            }
        }
        let rows = status.clients.map { client in
            [
                client.sessionID, quotedIfNeeded(client.clientName.isEmpty ? "-" : client.clientName),
                client.pid == 0 ? "-" : String(client.pid), String(client.uid),
                stateLabel(client),
                String(client.queuedEvents), String(client.outboundBytes), "\(Int(client.idleSeconds)) s",
            ]
        }
        writeOut("\n" + table(["SESSION", "CLIENT", "PID", "UID", "STATE", "QUEUED", "UNSENT", "IDLE"], rows))
    }
}

/// `live`, `idle` (not subscribed), `suspended (requested|not-reading)` or `preserved`.
func stateLabel(_ client: SessionStatus) -> String {
    switch client.state {
    case .live: client.subscribed ? "live" : "idle"
    case .suspended: "suspended (\(client.suspendedBecause))"
    case .preserved: "preserved"
    }
}

struct SimulateCommand: Command {
    static let name = "simulate"
    static let abstract = "Plug or unplug a simulated accessory (accmond must run with --simulate)."
    static let usage = """
        Usage: accmon simulate connect --kind KIND [ACCESSORY OPTIONS] [--socket PATH]
               accmon simulate disconnect CONNECTION_ID [--socket PATH]

        \(abstract)
        `connect` prints the new connection id.

        Accessory options (every field of the accessory model):
          --kind KIND            usb, serial or bluetooth-hid (required)
          --vendor ID            vendor id (hex)          --product ID         product id (hex)
          --name TEXT            display name             --manufacturer TEXT  manufacturer
          --model TEXT           model number             --serial TEXT        serial number
          --firmware TEXT        firmware revision        --hardware TEXT      hardware revision
          --protocol NAME        a protocol string (repeatable)
          --node PATH            a device node (repeatable)
          --sysfs PATH           sysfs path               --port PATH          USB port path (such as 1-1.2)
          --interface NUMBER     USB interface number of a serial port (such as 00)
          --id TEXT              accessory id (default: derived from kind, ids and serial or port)
        \(CommonOptions.help)

        """

    enum Action {
        case connect(Accessory)
        case disconnect(ConnectionID)
    }

    var common: CommonOptions
    var action: Action

    init(_ arguments: inout OptionCursor, socket: String?) throws(UsageError) {
        common = CommonOptions(socket: socket)
        switch try arguments.next() {
        case "connect":
            var kind: AccessoryKind?
            var accessory = Accessory(kind: .usb)
            var accessoryID: String?
            while let option = try arguments.next() {
                if try common.parse(option, &arguments) { continue }
                switch option {
                case "--kind": kind = try parseKind(arguments.value(for: option))
                case "--vendor": accessory.vendorID = try parseHexID(arguments.value(for: option), option)
                case "--product": accessory.productID = try parseHexID(arguments.value(for: option), option)
                case "--name": accessory.name = try arguments.value(for: option)
                case "--manufacturer": accessory.manufacturer = try arguments.value(for: option)
                case "--model": accessory.modelNumber = try arguments.value(for: option)
                case "--serial": accessory.serialNumber = try arguments.value(for: option)
                case "--firmware": accessory.firmwareRevision = try arguments.value(for: option)
                case "--hardware": accessory.hardwareRevision = try arguments.value(for: option)
                case "--protocol": accessory.protocolStrings.append(try arguments.value(for: option))
                case "--node": accessory.deviceNodes.append(try arguments.value(for: option))
                case "--sysfs": accessory.sysfsPath = try arguments.value(for: option)
                case "--port": accessory.portPath = try arguments.value(for: option)
                case "--interface": accessory.interfaceNumber = try arguments.value(for: option)
                case "--id": accessoryID = try arguments.value(for: option)
                default: throw UsageError("unknown option '\(option)'")
                }
            }
            guard let kind else { throw UsageError("simulate connect: --kind is required") }
            accessory.kind = kind
            accessory.accessoryID = accessoryID ?? accessory.derivedAccessoryID
            action = .connect(accessory)
        case "disconnect":
            var connectionID: ConnectionID?
            while let argument = try arguments.next() {
                if try common.parse(argument, &arguments) { continue }
                guard connectionID == nil, let number = UInt64(argument) else {
                    throw UsageError("simulate disconnect: '\(argument)' is not a connection id")
                }
                connectionID = ConnectionID(number)
            }
            guard let connectionID else { throw UsageError("simulate disconnect: CONNECTION_ID is required") }
            action = .disconnect(connectionID)
        case let other?:
            throw UsageError("simulate: unknown action '\(other)' (expected connect or disconnect)")
        case nil:
            throw UsageError("simulate: an action is required (connect or disconnect)")
        }
    }

    func run() async throws(AccmonError) {
        let connection = try await common.connect()
        defer { connection.close() }
        switch action {
        case .connect(let accessory):
            writeOut("\(try await connection.simulateConnect(accessory))\n")
        case .disconnect(let connectionID):
            try await connection.simulateDisconnect(connectionID)
        }
    }
}
