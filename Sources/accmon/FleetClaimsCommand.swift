import AccmonClient
import AccmonMQTT
import Glibc

/// `accmon claims --broker`: the claims of the hosts `--host` selects, from their retained `claims/` topics, read with
/// their statuses and accessories in the fleet view's windows (docs/MQTT.md §5), with the host's state (a claim of a
/// host that is not online is shown with the state `unknown`: it may have ended meanwhile).
struct FleetClaims {
    let fleet: FleetOptions
    let json: Bool

    struct Output: Encodable {
        var version = jsonOutputVersion
        var claims: [Row]
    }

    struct Row: Encodable {
        var host: String
        /// `held` or `returning` from an online host; `unknown` when the host is offline or has no status.
        var state: String
        var claim: RemoteClaimState
    }

    func run() async throws(AccmonError) {
        let settings = try fleet.settings()
        let read: FleetReadResult
        do {
            read = try await FleetReader.state(settings: settings, topics: fleet.topics, options: fleet.readOptions)
        } catch {
            throw fleetError(error)
        }
        for warning in read.warnings { writeError(warning + "\n") }
        var rows: [Row] = []
        for host in read.state.sortedHosts where fleet.shows(host: host.name) {
            for (connection, claim) in host.claims {
                rows.append(
                    Row(
                        host: host.name, state: host.stateName == "online" ? claim.state : "unknown",
                        claim: RemoteClaimState(host: host.name, connectionID: connection, claim: claim)))
            }
        }
        rows.sort {
            ($0.host, $0.claim.accessoryID, $0.claim.connectionID) < ($1.host, $1.claim.accessoryID, $1.claim.connectionID)
        }
        if json {
            writeOut(jsonLine(Output(claims: rows)))
            return try incompleteness(read)
        }
        guard !rows.isEmpty else {
            writeOut("no claims\n")
            return try incompleteness(read)
        }
        writeOut(
            AccmonCLI.table(
                ["HOST", "STATE", "CLAIM", "CONN", "ACCESSORY", "HOLDER", "SINCE", "WAITING", "REASON"],
                rows.map { row in
                    [
                        row.host, row.state, row.claim.claimID, String(row.claim.connectionID), row.claim.accessoryID,
                        ClaimsCommand.userLabel(row.claim.holder), clockTime(row.claim.since),
                        String(row.claim.waiting), quotedIfNeeded(row.claim.reason),
                    ]
                }))
        try incompleteness(read)
    }

    /// Exit 1 after the output when the read is known to miss something (the warnings above say what).
    private func incompleteness(_ read: FleetReadResult) throws(AccmonError) {
        guard read.complete else {
            throw AccmonError(.invalidResponse, "accmon: the claims above may be incomplete (see the warnings)")
        }
    }
}
