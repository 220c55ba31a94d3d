import AccmonClient
import AccmonOptions

struct ClaimsCommand: Command {
    static let name = "claims"
    static let abstract = "List the claims and the claimers waiting in line."
    static let usage = """
        Usage: accmon claims [--json] [--socket PATH]
               accmon claims --broker URL [--host GLOB] [--json] [BROKER OPTIONS]

        \(abstract)
        Shows the claims on the accessories this user sees (and this user's own): accessory, holder (user name, uid
        and pid), since when, why, and how many wait; then the claimers waiting, in line order.

        With --broker, every host's claims from the broker (docs/MQTT.md §12): HOST, its STATE (held, returning, or
        unknown for a host that is not online), the holder (remote for an MQTT user).

        Options:
          --json             print {"version":1,"claims":[...],"waiters":[...]} with sorted keys (with --broker:
                             {"version":1,"claims":[{"host":...,"state":...,"claim":{...}}]})
        \(CommonOptions.help)
        \(FleetOptions.claimHelp)

        """

    var common: CommonOptions
    var json = false
    var fleet = FleetOptions()

    init(_ arguments: inout OptionCursor, socket: String?) throws(UsageError) {
        common = CommonOptions(socket: socket)
        while let option = try arguments.next() {
            if option == "--json" {
                json = true
            } else if try !fleet.parse(option, &arguments), try !common.parse(option, &arguments) {
                throw UsageError("unknown option '\(option)'")
            }
        }
        _ = try fleet.validate(restoreID: nil, all: false)
    }

    struct Output: Encodable {
        var version = jsonOutputVersion
        var claims: [ClaimSummary]
        var waiters: [ClaimWaiter]
    }

    func run() async throws(AccmonError) {
        if fleet.url != nil {
            try await FleetClaims(fleet: fleet, json: json).run()
            return
        }
        let connection = try await common.connect()
        let list = try await connection.claims()
        connection.close()
        let claims = list.claims.map { summary in
            var named = summary
            named.holder = AccmonCLI.named(summary.holder)
            return named
        }
        if json {
            writeOut(jsonLine(Output(claims: claims, waiters: list.waiters)))
            return
        }
        writeOut(Self.table(claims, list.waiters))
    }

    static func table(_ claims: [ClaimSummary], _ waiters: [ClaimWaiter]) -> String {
        guard !claims.isEmpty || !waiters.isEmpty else { return "no claims\n" }
        var text = AccmonCLI.table(
            ["CLAIM", "CONN", "ACCESSORY", "HOLDER", "UID", "PID", "SINCE", "WAITING", "REASON"],
            claims.map { claim in
                [
                    claim.claimID,
                    claim.connections.isEmpty ? "-" : claim.connections.map(\.description).joined(separator: ","),
                    claim.accessoryIDs.joined(separator: ","), userLabel(claim.holder),
                    claim.holder.uid.map(String.init) ?? "-", claim.holder.pid.map(String.init) ?? "-",
                    clockTime(claim.since) + (claim.state == .returning ? " (away)" : ""), String(claim.waiting),
                    quotedIfNeeded(claim.reason),
                ]
            })
        if !waiters.isEmpty {
            text += "\n"
                + AccmonCLI.table(
                    ["WAITING", "PLACE", "CLAIMER", "UID", "PID", "SINCE", "WANTS", "REASON"],
                    waiters.map { waiter in
                        let party = AccmonCLI.named(waiter.party)
                        return [
                            waiter.claimID, String(waiter.position), userLabel(party),
                            party.uid.map(String.init) ?? "-", party.pid.map(String.init) ?? "-",
                            clockTime(waiter.since),
                            waiter.connections.isEmpty
                                ? "\(waiter.count) matching" : waiter.connections.map(\.description).joined(separator: ","),
                            quotedIfNeeded(waiter.reason),
                        ]
                    })
        }
        return text
    }

    static func userLabel(_ party: Party) -> String {
        if party.remote { return "\(party.user) (remote)" }
        return party.user.isEmpty ? party.uid.map { "uid \($0)" } ?? "?" : party.user
    }
}

struct ReleaseCommand: Command {
    static let name = "release"
    static let abstract = "Release a claim; with --force, an admin breaks another's."
    static let usage = """
        Usage: accmon release CONNECTION|ACCESSORY-ID|CLAIM-ID [--force --reason TEXT] [--socket PATH]

        \(abstract)
        Names the claim by a connection it holds (a number), an accessory id it holds, or its id (c-N). Without
        --force, only the claim's own user may release it. With --force (root and the manifest's admins), the claim
        is broken: its holder is told by whom and why, and its command (accmon claim) is ended.

        Options:
          --force            break another user's claim (admins)
          --reason TEXT      why, told to the holder (with --force)
        \(CommonOptions.help)

        Exit status: 0 released, 77 not permitted, 69 accmond unreachable, 64 usage, 1 no such claim.

        """

    var common: CommonOptions
    var target: ReleaseRequest.Target
    var force = false
    var reason = ""

    init(_ arguments: inout OptionCursor, socket: String?) throws(UsageError) {
        common = CommonOptions(socket: socket)
        var named: String?
        while let option = try arguments.next() {
            switch option {
            case "--force": force = true
            case "--reason": reason = try arguments.value(for: option)
            default:
                if try common.parse(option, &arguments) { continue }
                guard !arguments.isOption(option), named == nil else { throw UsageError("unknown option '\(option)'") }
                named = option
            }
        }
        guard let named else { throw UsageError("name the claim: a connection id, an accessory id or a claim id") }
        if !reason.isEmpty && !force { throw UsageError("--reason goes with --force (it is told to the holder)") }
        if let number = UInt64(named) {
            target = .connection(ConnectionID(number))
        } else if named.hasPrefix("c-"), UInt64(named.dropFirst(2)) != nil {
            target = .claim(named)
        } else {
            target = .accessory(named)
        }
    }

    func run() async throws(AccmonError) {
        let connection = try await common.connect()
        defer { connection.close() }
        do {
            try await connection.release(target, force: force, reason: reason)
        } catch {
            if error.protocolError?.code == .noSuchClaim {
                writeError("\(error.message)\n")
                exit(.failure)
            }
            throw error
        }
    }
}

/// The CLI's own helpers, named where a type's member of the same name would hide them.
enum AccmonCLI {
    static func named(_ party: Party) -> Party { accmon.named(party) }
    static func table(_ header: [String], _ rows: [[String]]) -> String { accmon.table(header, rows) }
}
