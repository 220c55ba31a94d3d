import AccmonClient
import AccmonManifest
import AccmonOptions
import AccmonSys
import Glibc
import Synchronization

struct ListCommand: Command {
    static let name = "list"
    static let abstract = "List the accessories connected now."
    static let usage = """
        Usage: accmon list [--json] [--all] [--connection ID] [--kind KIND] [--vendor ID] [--product ID]
                           [--protocol NAME] [--socket PATH]
               accmon list --broker URL [--host GLOB] [--json] [FILTER OPTIONS] [BROKER OPTIONS]

        \(abstract)

        Options:
          --json             print {"version":1,"seq":N,"accessories":[...]} with sorted keys (with --all, also
                             "rejected": {connection id: reason})
          --all              also accessories the manifest rejected (root and the manifest's admins only)
          --connection ID    only the accessory connected as this connection id (a service started for it learns
                             the id from its instance name)
        \(filterOptionsHelp)
        \(CommonOptions.help)

        Fleet view (every host's bridge, through an MQTT broker, with a HOLDER column; with --json:
        {"version":1,"hosts":[{"host":...,"state":...,"status":{...},"accessories":[...]}]}, a claimed
        accessory's object with its "claim"):
        \(FleetOptions.help)

        """

    var selection: SelectionOptions
    /// `--connection ID`: only the accessory connected as this connection id.
    var connectionID: ConnectionID?
    var common: CommonOptions { selection.common }
    var json: Bool { selection.json }
    var all: Bool { selection.all }
    var filter: AccessoryFilter { selection.filter }

    init(_ arguments: inout OptionCursor, socket: String?) throws(UsageError) {
        selection = SelectionOptions(common: CommonOptions(socket: socket))
        while let option = try arguments.next() {
            if option == "--connection" {
                let text = try arguments.value(for: option)
                guard let number = UInt64(text) else {
                    throw UsageError("--connection: '\(text)' is not a connection id (a number such as 12)")
                }
                connectionID = ConnectionID(number)
            } else if try !selection.parse(option, &arguments) {
                throw UsageError("unknown option '\(option)'")
            }
        }
        fleetView = try selection.fleet.validate(restoreID: nil, all: all)
        if fleetView && connectionID != nil { throw UsageError("--connection and --broker do not go together") }
    }

    /// Whether `--broker` asks for the fleet view.
    var fleetView = false

    struct Output: Encodable {
        var version = jsonOutputVersion
        var seq: UInt64
        /// Each with its `claim` when claimed.
        var accessories: [ClaimedAccessory]
        var rejected: [String: String]?
    }

    /// The fleet read allocates tens of megabytes on threads of its own, whose heaps otherwise grow a few pages at a
    /// time, one mprotect call each: padded by 64 MB, the most a thread's heap holds, each heap is made writable whole
    /// when it is made, so before the first thread is (a heap made earlier grows page by page whatever the padding).
    /// Not for `watch`, which runs for long: the padding also keeps that much freed memory.
    func prepareProcess() {
        if fleetView { growHeaps(by: 64 << 20) }
    }

    func run() async throws(AccmonError) {
        if fleetView {
            try await selection.fleet.list(filter: filter, json: json)
            return
        }
        let connection = try await common.connect()
        var snapshot = try await connection.list(filter, includeRejected: all, claims: true)
        connection.close()
        if let connectionID { snapshot.accessories.removeAll { $0.connectionID != connectionID } }
        if json {
            let rejected = Dictionary(uniqueKeysWithValues: snapshot.rejected.map { ($0.key.description, $0.value) })
            writeOut(
                jsonLine(
                    Output(
                        seq: snapshot.sequence,
                        accessories: snapshot.accessories.map {
                            ClaimedAccessory($0, claim: snapshot.claims[$0.connectionID])
                        },
                        rejected: all ? rejected : nil)))
            return
        }
        let rows = snapshot.accessories.map { accessory in
            [
                accessory.connectionID.description, accessory.kind.rawValue, accessory.usbID,
                quotedIfNeeded(accessory.name), quotedIfNeeded(accessory.serialNumber),
                accessory.deviceNodes.joined(separator: ","),
                snapshot.claims[accessory.connectionID].map(holderLabel) ?? "-",
            ] + (all ? [snapshot.rejected[accessory.connectionID].map { "rejected: \($0)" } ?? "allowed"] : [])
        }
        writeOut(table(["CONN", "KIND", "ID", "NAME", "SERIAL", "NODES", "HOLDER"] + (all ? ["MANIFEST"] : []), rows))
    }
}

struct StatusCommand: Command {
    static let name = "status"
    static let abstract = "Show the daemon's version, uptime, accessories, sessions and recent history."
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

    /// How many history entries end the human output.
    static let historyLines = 5

    func run() async throws(AccmonError) {
        let connection = try await common.connect()
        let status = try await connection.status()
        let history: Result<[HistoryEntry], AccmonError>
        if json {
            history = .success([])
        } else {
            do throws(AccmonError) {
                history = .success(try await connection.history(limit: Self.historyLines))
            } catch {
                history = .failure(error)
            }
        }
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
            claims:       \(Self.claimsLine(status))

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
        } else {
            writeOut("manifest:     shown to root and the manifest's admins only\n")
        }
        let rows = status.clients.map { client in
            [
                client.sessionID, client.transport?.rawValue ?? "socket",
                quotedIfNeeded(client.clientName.isEmpty ? "-" : client.clientName),
                client.pid == 0 ? "-" : String(client.pid), String(client.uid),
                stateLabel(client),
                String(client.queuedEvents), String(client.outboundBytes), "\(Int(client.idleSeconds)) s",
            ]
        }
        writeOut("\n" + table(["SESSION", "VIA", "CLIENT", "PID", "UID", "STATE", "QUEUED", "UNSENT", "IDLE"], rows))
        if let unlisted = status.unlistedClients { writeOut("(and \(unlisted) more sessions of this user)\n") }
        switch history {
        case .success(let entries):
            writeOut("\nrecent history (accmon history for more):\n")
            if entries.isEmpty { writeOut("  (none)\n") }
            let style = Style.standardOutput
            for entry in entries { writeOut(historyLine(entry, style: style)) }
        case .failure(let error) where error.protocolError?.code == .unknownType:
            break  // an accmond without history
        case .failure(let error):
            writeOut("\nrecent history: \(error.message)\n")
        }
    }
}

extension StatusCommand {
    static func claimsLine(_ status: DaemonStatus) -> String {
        guard let claims = status.claims else { return "not supported by this accmond" }
        return "\(claims) held, \(status.claimWaiters ?? 0) waiting"
    }
}

/// Who holds a claim, in a column: `alice since 10:04:05`.
func holderLabel(_ claim: ClaimSummary) -> String {
    ClaimsCommand.userLabel(named(claim.holder)) + " since " + clockTime(claim.since)
}

/// `live`, `idle` (not subscribed), `suspended (requested|not-reading)` or `preserved`.
func stateLabel(_ client: SessionStatus) -> String {
    switch client.state {
    case .live: client.subscribed ? "live" : "idle"
    case .suspended: "suspended (\(client.suspendedBecause))"
    case .preserved: "preserved"
    }
}
