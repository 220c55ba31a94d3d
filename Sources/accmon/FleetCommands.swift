import AccmonClient
import AccmonMQTT
import AccmonOptions
import Glibc

/// The options of the fleet view (`watch` and `list` with `--broker`): the broker, how to log in, and `--host`.
struct FleetOptions {
    var url: String?
    var hostPattern: String?
    var prefix = FleetTopics.defaultPrefix
    var caFile: String?
    var certificateFile: String?
    var keyFile: String?
    var username: String?
    var passwordFile: String?
    var brokerQueue: Int?
    var censusWait: Double?

    /// Consumes `option` if it is a fleet option; returns whether it was.
    mutating func parse(_ option: String, _ arguments: inout OptionCursor) throws(UsageError) -> Bool {
        switch option {
        case "--broker": url = try arguments.value(for: option)
        case "--host": hostPattern = try arguments.value(for: option)
        case "--prefix": prefix = try arguments.value(for: option)
        case "--ca": caFile = try arguments.value(for: option)
        case "--certificate": certificateFile = try arguments.value(for: option)
        case "--key": keyFile = try arguments.value(for: option)
        case "--username": username = try arguments.value(for: option)
        case "--password-file": passwordFile = try arguments.value(for: option)
        case "--broker-queue":
            let text = try arguments.value(for: option)
            guard let value = Int(text), value >= FleetReadOptions.minimumBrokerQueue else {
                throw UsageError(
                    "--broker-queue: '\(text)': not a number of messages of at least "
                        + "\(FleetReadOptions.minimumBrokerQueue)")
            }
            brokerQueue = value
        case "--census-wait":
            let text = try arguments.value(for: option)
            guard let value = Double(text), value >= 0, value <= 60 else {
                throw UsageError("--census-wait: '\(text)': not a number of seconds from 0 to 60")
            }
            censusWait = value
        case "--password":
            throw UsageError("--password: a password on the command line is visible to every user; use --password-file")
        default: return false
        }
        return true
    }

    /// Checks the combination once every option is read; returns whether the fleet view is asked for.
    func validate(restoreID: String?, all: Bool) throws(UsageError) -> Bool {
        guard let url else {
            let given =
                [hostPattern, caFile, certificateFile, keyFile, username, passwordFile].contains { $0 != nil }
                || brokerQueue != nil || censusWait != nil
            if given || prefix != FleetTopics.defaultPrefix {
                throw UsageError(
                    "--host, --prefix, --broker-queue, --census-wait and the broker's login options need --broker URL")
            }
            return false
        }
        if case .failure(let problem) = BrokerAddress.parseList(url) {
            throw UsageError("--broker: \(problem.reason)")
        }
        if let problem = FleetTopics.problem(withPrefix: prefix) { throw UsageError("--prefix: \(problem)") }
        if restoreID != nil { throw UsageError("--restore-id does not go with --broker") }
        if all { throw UsageError("--all does not go with --broker (the fleet shows what each bridge may see)") }
        if (certificateFile == nil) != (keyFile == nil) { throw UsageError("--certificate and --key go together") }
        if passwordFile != nil, username == nil { throw UsageError("--password-file needs --username") }
        return true
    }

    /// The broker settings, with the password read from its file.
    func settings() throws(AccmonError) -> BrokerSettings {
        guard let url, case .success(let addresses) = BrokerAddress.parseList(url) else {
            preconditionFailure("validate(restoreID:all:) checked --broker")
        }
        var settings = BrokerSettings(
            addresses: addresses, caFile: caFile, certificateFile: certificateFile, keyFile: keyFile, username: username)
        if let passwordFile {
            do {
                settings.password = try PasswordFile.read(passwordFile)
            } catch {
                throw AccmonError(.permissionDenied, "accmon: --password-file: '\(passwordFile)': \(error.reason)")
            }
        }
        return settings
    }

    var topics: FleetTopics { FleetTopics(prefix: prefix) }

    /// What the reader reads: the hosts `--host` selects, in windows under `--broker-queue`.
    var readOptions: FleetReadOptions {
        FleetReadOptions(
            selection: FleetSelection(pattern: hostPattern),
            brokerQueue: brokerQueue ?? FleetReadOptions.defaultBrokerQueue,
            censusWindow: censusWait)
    }

    /// Whether a host is shown: `--host` names it or matches its name (shell wildcards).
    func shows(host name: String) -> Bool { readOptions.selection.includes(hostName: name) }

    /// The fleet options of `claim` and `claims`.
    static let claimHelp = """
          --broker URL[,URL...]
                             claim through the fleet's MQTT broker (mqtt://HOST[:PORT] or mqtts://HOST[:PORT]);
                             several URLs: one broker's nodes or listeners, the next tried when one fails
          --host GLOB        with --broker: only hosts whose name matches (shell wildcards)
          --prefix PREFIX    with --broker: the topic prefix (default \(FleetTopics.defaultPrefix))
          --ca FILE, --certificate FILE, --key FILE
                             with mqtts://: the CA certificates to trust, a client certificate and its key
          --username NAME, --password-file FILE
                             the broker's login: the MQTT user is the claimer
        """

    static let help = """
          --broker URL[,URL...]
                             show every host's accessories from the MQTT broker's retained topics (mqtt://HOST[:PORT]
                             or mqtts://HOST[:PORT]), with a HOST column; offline hosts are shown as such, and
                             stale those whose status's lease ran out; several URLs: one broker's nodes or
                             listeners, the next tried when one cannot be reached or drops the reader
          --host GLOB        with --broker: only hosts whose name matches (shell wildcards); only their topics
                             are read (a name without wildcards: that host's alone)
          --prefix PREFIX    with --broker: the topic prefix (default \(FleetTopics.defaultPrefix))
          --ca FILE          with mqtts://: the CA certificates to trust (default: the system's)
          --certificate FILE, --key FILE
                             with mqtts://: a client certificate and its key
          --username NAME, --password-file FILE
                             the broker's login; the file must not be readable by every user
          --broker-queue N   with --broker: the messages the broker queues for one client (mosquitto's
                             max_queued_messages, default \(FleetReadOptions.defaultBrokerQueue)); reads stay under it
          --census-wait S    with --broker: the window of this reader's census, which finds the hosts the
                             broker's retained store does not give it (a cluster node): the bridges spread their
                             answers over S seconds, and the read waits S, then until the answers stop; 0: no
                             census; without it, a window sized for the hosts the retained store gives (0.05 s up
                             to 10 s), again larger while more bridges answer than it carries
        """
}

/// The error for the fleet view's broker failures: unreachable (69), refused credentials or access (77).
func fleetError(_ error: MQTTError) -> AccmonError {
    switch error.code {
    case .unreachable: AccmonError(.daemonUnavailable, "accmon: \(error.message)")
    case .credentials, .notAuthorized, .tls: AccmonError(.permissionDenied, "accmon: \(error.message)")
    default: AccmonError(.invalidResponse, "accmon: \(error.message)")
    }
}

extension FleetOptions {
    func output(_ state: FleetState, _ filter: AccessoryFilter) -> [FleetHostOutput] {
        shown(state).map { Self.output($0, filter) }
    }

    /// The hosts of `state` shown, in order.
    func shown(_ state: FleetState) -> [FleetHost] { state.sortedHosts.filter { shows(host: $0.name) } }

    /// What is shown of `host`: its accessories that pass `filter`, in connection order.
    static func output(_ host: FleetHost, _ filter: AccessoryFilter) -> FleetHostOutput {
        FleetHostOutput(
            host: host.name, state: host.stateName, status: host.status?.withoutCounts,
            accessories: host.sortedAccessories.filter(filter.matches), claims: host.claims)
    }

    /// `accmon list --broker`: the table's rows are made as the hosts are read.
    func list(filter: AccessoryFilter, json: Bool) async throws(AccmonError) {
        let settings = try settings()
        let rows = json ? nil : FleetTable.Rows { Self.output($0, filter) }
        let read: FleetReadResult
        do {
            read = try await FleetReader.state(
                settings: settings, topics: topics, options: readOptions, eachHost: rows.map { rows in rows.make })
        } catch {
            throw fleetError(error)
        }
        for warning in read.warnings { writeError(warning + "\n") }
        keepUntilExit((read, rows))
        if let rows {
            // A lease that ran out after its host was made into rows.
            for host in read.state.hosts.values where host.stale { rows.make(host) }
            writeOut(rows.table(shown(read.state)))
        } else {
            let hosts = output(read.state, filter)
            keepUntilExit(hosts)
            writeOut(FleetHostOutput.jsonLine(hosts, then: #","version":\#(jsonOutputVersion)}"#))
        }
        try incompleteness(read)
    }

    /// Exit 1 after the output when the read is known to miss something (the warnings above say what).
    private func incompleteness(_ read: FleetReadResult) throws(AccmonError) {
        guard read.complete else {
            throw AccmonError(.invalidResponse, "accmon: the fleet view above is incomplete (see the warnings)")
        }
    }

    /// `accmon watch --broker`: the state, then one line per change, until Ctrl-C.
    func watch(filter: AccessoryFilter, json: Bool) async throws(AccmonError) {
        let style = Style.standardOutput
        let shown = self
        let settings = try settings()
        do {
            try await FleetReader.watch(settings: settings, topics: topics, options: readOptions) { update in
                switch update {
                case .state(let state):
                    if json {
                        writeOut(FleetHostOutput.jsonLine(shown.output(state, filter), then: #","type":"fleet"}"#))
                    } else {
                        for host in shown.output(state, filter) {
                            writeOut(statusLine(host.host, host.status, stale: host.state == "stale", style: style))
                            for accessory in host.accessories {
                                let claim = host.claim(of: accessory).map { [claimDetail($0, style: style)] } ?? []
                                writeOut(humanLine("present", accessory, host: host.host, details: claim, style: style))
                            }
                        }
                    }
                case .changes(let changes):
                    writeOut(shown.lines(changes, filter, json: json, style: style))
                case .connection(let message), .warning(let message):
                    writeError(message + "\n")
                }
            }
        } catch {
            throw fleetError(error)
        }
    }

    func lines(_ changes: [FleetChange], _ filter: AccessoryFilter, json: Bool, style: Style) -> String {
        struct AccessoryLine: Encodable {
            var type: String
            var host: String
            var accessory: FleetAccessory
        }
        /// `state` as in the `fleet` line: the status's own, `stale` for one whose lease ran out, or `unknown`.
        struct StatusLine: Encodable {
            var type = "status"
            var host: String
            var state: String
            var status: HostStatus?
        }
        // Human lines: an accessory whose claim alone changed is one `claimed` or `released` line.
        var claimChanges: [Int: FleetClaim?] = [:]
        var skipped: Set<Int> = []
        if !json {
            var gone: [ClaimKey: (index: Int, accessory: Accessory)] = [:]
            for (index, change) in changes.enumerated() {
                if case .disconnected(let host, let accessory, _) = change {
                    gone[ClaimKey(host: host, connection: accessory.connectionID)] = (index, accessory)
                }
            }
            for (index, change) in changes.enumerated() {
                guard case .connected(let host, let accessory, let claim) = change,
                    let before = gone[ClaimKey(host: host, connection: accessory.connectionID)],
                    before.accessory == accessory
                else { continue }
                skipped.insert(before.index)
                claimChanges[index] = claim
            }
        }
        var text = ""
        for (index, change) in changes.enumerated() where !skipped.contains(index) {
            if let claim = claimChanges[index], case .connected(let host, let accessory, _) = change {
                guard shows(host: host), filter.matches(accessory) else { continue }
                text +=
                    claim.map {
                        humanLine(
                            "claimed", accessory, host: host, details: [claimDetail($0, style: style, lead: "by")],
                            style: style)
                    } ?? humanLine("released", accessory, host: host, style: style)
                continue
            }
            switch change {
            case .connected(let host, let accessory, let claim), .disconnected(let host, let accessory, let claim):
                guard shows(host: host), filter.matches(accessory) else {
                    continue
                }
                let type: String
                if case .connected = change { type = "connect" } else { type = "disconnect" }
                text +=
                    json
                    ? jsonLine(
                        AccessoryLine(type: type, host: host, accessory: FleetAccessory(accessory, claim: claim)))
                    : humanLine(type, accessory, host: host, style: style)
            case .unconfirmed(let host, let accessory), .confirmed(let host, let accessory):
                // Not a disconnection: a read of the host again did not find it, or found it again (docs/MQTT.md §5).
                guard shows(host: host), filter.matches(accessory) else { continue }
                let type: String
                if case .unconfirmed = change { type = "unconfirmed" } else { type = "confirmed" }
                text +=
                    json
                    ? jsonLine(AccessoryLine(type: type, host: host, accessory: FleetAccessory(accessory, claim: nil)))
                    : humanLine(type, accessory, host: host, style: style)
            case .status(let host, let status, let stale):
                guard shows(host: host) else { continue }
                let state = stale ? "stale" : status?.state.rawValue ?? "unknown"
                text +=
                    json
                    ? jsonLine(StatusLine(host: host, state: state, status: status))
                    : statusLine(host, status, stale: stale, style: style)
            }
        }
        return text
    }
}

/// A host and a connection of it.
struct ClaimKey: Hashable {
    var host: String
    var connection: ConnectionID
}

/// Who holds a claim, since when, why, and how many wait: the end of a human line.
func claimDetail(_ claim: FleetClaim, style: Style, lead: String = "claimed by") -> String {
    style.paint(
        "\(lead) \(ClaimsCommand.userLabel(claim.holder)) since \(clockTime(claim.since))"
            + (claim.reason.isEmpty ? "" : ": \(quotedIfNeeded(claim.reason))")
            + (claim.waiting > 0 ? " (\(claim.waiting) waiting)" : ""), "35")
}

/// A host's status as one human line: time, host, its state (online, offline, stale or unknown), and which run.
func statusLine(_ host: String, _ status: HostStatus?, stale: Bool = false, style: Style) -> String {
    let state = stale ? "stale" : status?.state.rawValue ?? "unknown"
    let painted = style.paint(state.padding(10), state == "online" ? "32" : state == "stale" ? "33" : "31")
    let detail =
        status.map {
            "machine=\($0.machineID.prefix(8)) run=\($0.runID.prefix(8))\($0.reason.map { " (\($0))" } ?? "")"
        } ?? ""
    return [timestamp(), quotedIfNeeded(host), painted, detail].joined(separator: "  ") + "\n"
}
