import AccmonClient
import AccmonMQTT
import Glibc

/// `accmon claims --broker`: every host's claims from the retained `claims/` topics, with the host's state (a claim
/// of a host that is not online is shown, with the state `unknown`: it may have ended meanwhile).
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

    func run() throws(AccmonError) {
        var settings = try fleet.settings()
        settings.keepAliveSeconds = 10
        let rows: [Row]
        do {
            let client = try RemoteClaimClient(
                settings: settings, topics: fleet.topics,
                clientID: "accmon-claims-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
            let hosts = try client.readFleet(selection: fleet.readOptions.selection)
            let online = Set(hosts.filter { $0.state == "online" }.map(\.host))
            rows = try client.readClaims().filter { fleet.shows(host: $0.host) }.map { claim in
                Row(host: claim.host, state: online.contains(claim.host) ? claim.state : "unknown", claim: claim)
            }
            client.disconnect()
        } catch {
            throw fleetError(error)
        }
        if json {
            writeOut(jsonLine(Output(claims: rows)))
            return
        }
        guard !rows.isEmpty else {
            writeOut("no claims\n")
            return
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
    }
}
