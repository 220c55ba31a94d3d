import AccmonClient
import AccmonOptions
import AccmonSys
import Glibc

struct ClaimCommand: Command {
    static let name = "claim"
    static let abstract = "Claim accessories for exclusive use while a command runs (as flock(1) does for a file)."
    static let usage = """
        Usage: accmon claim [FILTER OPTIONS | --connection ID ...] [--count N] [--wait] [--timeout SECONDS]
                            [--reason TEXT] [--max-duration SECONDS] [--conflict-exit-code N] [--socket PATH]
                            -- COMMAND [ARGS...]

        \(abstract)
        While the claim holds, the accessories' device nodes open for this user and root only; other users get
        EACCES (docs/CLAIMS.md). COMMAND runs with ACCMON_CLAIM_NODE (the first device node of the first
        accessory), ACCMON_CLAIM_NODES (all, separated by spaces), ACCMON_CLAIM_CONNECTIONS,
        ACCMON_CLAIM_ACCESSORIES, ACCMON_CLAIM_ID and, where udev gives one, ACCMON_CLAIM_STABLE_NODE (a
        /dev/serial/by-id/ or by-path/ link, which survives a re-enumeration). The claim is released when COMMAND
        exits, and kept across a restart of accmond. If the claim is broken (by an admin), COMMAND gets SIGTERM,
        then SIGKILL 10 s later; if accmon claim is killed, COMMAND is killed and the claim ends at once.

            accmon claim --kind serial --vendor 0403 --wait --timeout 600 --reason "nightly flash" -- \\
                sh -c 'stm32flash -w fw.bin "$ACCMON_CLAIM_NODE"'

        Across the fleet (--broker URL, docs/MQTT.md §12): a free matching accessory on any host the bridges of the
        broker serve (--host GLOB narrows), or --connection HOST:ID ...; the claim is a lease renewed while COMMAND
        runs; ACCMON_CLAIM_HOST names its host (ACCMON_CLAIM_NODE is the node's path there).

        Options:
          --connection ID    claim this connection (repeat for several: all or none); with --broker, HOST:ID
                             (several hosts are taken in host order, each host's all or none)
          --serial TEXT      only the accessory with exactly this serial number
          --count N          claim N matching accessories, all or none (default 1)
          --wait             wait in line (first come, first served) while what is asked for is held, or not
                             plugged in yet
          --timeout SECONDS  wait at most this long (implies --wait), then exit as for a conflict
          --reason TEXT      why: shown to the holder, to whoever waits, and in `accmon claims`
          --max-duration SECONDS
                             end the claim after this long at the latest (the manifest may cap it)
          --conflict-exit-code N
                             the exit status when what is asked for is held (default 75)
        \(filterOptionsHelp)
        \(CommonOptions.help)
        \(FleetOptions.claimHelp)

        Exit status: COMMAND's (128 + the signal if a signal ended it); 75 (or --conflict-exit-code) when what was
        asked for is held and --wait was not given or --timeout passed, or when the claim was broken, its accessory
        did not come back, or it reached its maximum duration; 77 not permitted; 69 accmond unreachable; 64 usage;
        1 when nothing matches or a node could not be enforced; 126/127 when COMMAND cannot be run.

        """

    var common: CommonOptions
    var filter = AccessoryFilter()
    var serial: String?
    var connections: [ConnectionID] = []
    var count: Int?
    var wait = false
    var timeout: Double?
    var reason = ""
    var maxSeconds: Double?
    var conflictExitCode: Int32 = ExitCode.timedOut.rawValue
    var command: [String] = []
    /// With `--broker`: the fleet's broker and login, `--host`.
    var fleet = FleetOptions()
    /// With `--broker`: `--connection HOST:ID`.
    var remoteConnections: [HostConnection] = []

    struct HostConnection: Hashable {
        var host: String
        var connection: ConnectionID
    }

    init(_ arguments: inout OptionCursor, socket: String?) throws(UsageError) {
        common = CommonOptions(socket: socket)
        var filtered = false
        while let option = try arguments.nextOption(commandInto: &command) {
            switch option {
            case "--connection":
                let text = try arguments.value(for: option)
                if let colon = text.lastIndex(of: ":") {
                    guard let number = UInt64(text[text.index(after: colon)...]), colon != text.startIndex else {
                        throw UsageError("--connection: '\(text)' is not HOST:ID (a host name and a connection id)")
                    }
                    remoteConnections.append(
                        HostConnection(host: String(text[..<colon]), connection: ConnectionID(number)))
                    continue
                }
                guard let number = UInt64(text) else {
                    throw UsageError("--connection: '\(text)' is not a connection id (a number such as 12)")
                }
                connections.append(ConnectionID(number))
            case "--serial":
                serial = try arguments.value(for: option)
                filtered = true
            case "--count": count = try arguments.integer(for: option, in: 1...ClaimRequest.maximumCount)
            case "--wait": wait = true
            case "--timeout":
                timeout = try arguments.seconds(for: option, in: 0...Double.greatestFiniteMagnitude)
                wait = true
            case "--reason": reason = try arguments.value(for: option)
            case "--max-duration": maxSeconds = try arguments.seconds(for: option, in: 0.001...31_536_000)
            case "--conflict-exit-code": conflictExitCode = Int32(try arguments.integer(for: option, in: 0...255))
            default:
                if try fleet.parse(option, &arguments) { continue }
                if try common.parse(option, &arguments) { continue }
                if try parseFilterOption(option, &arguments, into: &filter) {
                    filtered = true
                    continue
                }
                throw UsageError("unknown option '\(option)'")
            }
        }
        guard !command.isEmpty else { throw UsageError("a command to run is required, after --") }
        if try fleet.validate(restoreID: nil, all: false) {
            if !connections.isEmpty { throw UsageError("--connection: with --broker, name the host: HOST:ID") }
            if !remoteConnections.isEmpty && (filtered || count != nil) {
                throw UsageError("--connection claims those connections: it does not go with filter options or --count")
            }
            if maxSeconds != nil { throw UsageError("--max-duration does not go with --broker (the lease ends it)") }
            if fleet.username == nil { throw UsageError("--broker: a claimer is an MQTT user: give --username") }
        } else if !remoteConnections.isEmpty {
            throw UsageError("--connection HOST:ID needs --broker URL")
        }
        if Set(remoteConnections).count != remoteConnections.count {
            throw UsageError("--connection: a connection is given twice")
        }
        if !connections.isEmpty && (filtered || count != nil) {
            throw UsageError("--connection claims those connections: it does not go with filter options or --count")
        }
        if Set(connections).count != connections.count { throw UsageError("--connection: an id is given twice") }
        if connections.count > ClaimRequest.maximumCount {
            throw UsageError("--connection: at most \(ClaimRequest.maximumCount) connections")
        }
        if reason.utf8.count > ClaimRequest.maximumReasonLength {
            throw UsageError("--reason: longer than \(ClaimRequest.maximumReasonLength) bytes")
        }
    }

    var target: ClaimRequest.Target {
        connections.isEmpty ? .matching(filter, serial: serial, count: count ?? 1) : .connections(connections)
    }

    func run() async throws(AccmonError) {
        guard let executable = TiedChild.resolve(command[0], path: environmentValue("PATH")) else {
            writeError("accmon: claim: \(command[0]): command not found\n")
            exit(127)
        }
        if fleet.url != nil {
            var remote = try RemoteClaim(command: self, fleet: fleet)
            try remote.run(executable: executable)
        }
        let first = try await AccmonConnection.connect(socketPath: common.socket, clientName: "accmon claim")
        let held = try await obtain(on: first)
        let (claim, connection) = (held.claim, held.connection)
        var run = ClaimRun(
            command: ClaimRun.Command(executable: executable, arguments: command), claim: claim,
            connection: connection, socket: common.socket, conflictExitCode: conflictExitCode)
        exit(await run.run())
    }

    /// Claims, waiting in line if asked to; exits with the conflict code when what is asked for stays held. A wait
    /// that a restart of accmond cut is taken up again with the waiter's token on a new connection, as a holder's
    /// claim is (``ClaimRun``): the place in line is kept. Returns the claim and the connection it holds on.
    private func obtain(on first: AccmonConnection) async throws(AccmonError) -> HeldClaim {
        let timedOut = Flag()
        let lastWait = Latest<ClaimInfo>()
        let attempt = Task { [self] () async throws(AccmonError) -> HeldClaim in
            try await claimInLine(on: first, lastWait: lastWait)
        }
        let timer = timeout.map { seconds in
            Task {
                guard (try? await Task.sleep(for: .seconds(seconds))) != nil else { return }  // try?: claimed first
                timedOut.raise()
                attempt.cancel()
            }
        }
        defer { timer?.cancel() }
        switch await attempt.result {
        case .success(let held): return held
        case .failure(let error as AccmonError):
            if timedOut.isRaised {
                let holders = (lastWait.value?.blockers ?? []).map(describe).joined(separator: "; ")
                writeError(
                    "accmon: claim: still not free after \(Int(timeout ?? 0)) s"
                        + (holders.isEmpty ? "\n" : "; held: \(holders)\n"))
                exit(conflictExitCode)
            }
            try failed(error)
        case .failure(let error):
            throw AccmonError(.connectionClosed, "accmon: claim: \(error)")
        }
    }

    /// The claim, granted at once or after waiting in line; a wait cut by a restart of accmond goes on with the
    /// waiter's token on a new connection.
    private func claimInLine(on first: AccmonConnection, lastWait: Latest<ClaimInfo>) async throws(AccmonError)
        -> HeldClaim
    {
        let resumed = Flag()
        var connection = first
        var target = target
        while true {
            do {
                let claim = try await connection.claim(
                    target, wait: wait, reason: reason, maxSeconds: maxSeconds,
                    whileWaiting: { info in
                        lastWait.set(info)
                        if resumed.isRaised {
                            writeError(
                                "accmon: claim: \(info.claimID)'s place in line taken up again (place \(info.position ?? 1))\n")
                            return
                        }
                        let holders = (info.blockers ?? []).map(describe).joined(separator: "; ")
                        writeError(
                            "accmon: claim: \(info.claimID) waits in line (place \(info.position ?? 1))"
                                + (holders.isEmpty ? ": nothing matching is free or plugged in yet\n" : ": held: \(holders)\n"))
                    })
                return HeldClaim(claim: claim, connection: connection)
            } catch let error {
                guard let token = error.claimToken, !Task.isCancelled else { throw error }
                connection.close()
                writeError("accmon: claim: accmond closed the connection; taking the place in line up again\n")
                guard let again = await ClaimRun.reconnect(socket: common.socket) else { throw error }
                connection = again
                target = .resume(token: token)
                resumed.raise()
            }
        }
    }

    /// Reports a refused claim and exits with its status; rethrows what is not a refusal.
    private func failed(_ error: AccmonError) throws(AccmonError) -> Never {
        guard let refusal = error.protocolError else { throw error }
        switch refusal.code {
        case .claimConflict:
            let holders = (refusal.holders ?? []).map(describe).joined(separator: "; ")
            writeError("accmon: claim: held: \(holders.isEmpty ? refusal.message : holders)\n")
            exit(conflictExitCode)
        case .permissionDenied:
            writeError("accmon: \(refusal.message)\n")
            exit(.permissionDenied)
        default:
            writeError("accmon: \(refusal.message)\n")
            exit(.failure)
        }
    }
}

/// A claim granted, and the connection it holds on (another than the first after a restart of accmond).
struct HeldClaim: Sendable {
    var claim: AccmonClaim
    var connection: AccmonConnection
}

/// A claim for people: `c-3 by alice (uid 1000, pid 42, accmon) since 10:04:05: "flashing"`.
func describe(_ summary: ClaimSummary) -> String {
    "\(summary.claimID) by \(named(summary.holder)) since \(clockTime(summary.since))"
        + (summary.reason.isEmpty ? "" : ": \"\(summary.reason)\"")
        + (summary.state == .returning ? " (its accessory is away, expected back)" : "")
}

/// A party with its user name, looked up here when accmond did not know it yet.
func named(_ party: Party) -> Party {
    guard !party.remote, party.user.isEmpty, let uid = party.uid, let name = Accounts.userName(uid) else { return party }
    var named = party
    named.user = name
    return named
}

/// The local time of day of a wall-clock time, `HH:MM:SS`.
func clockTime(_ seconds: Double) -> String {
    var time = time_t(seconds)
    var parts = tm()
    localtime_r(&time, &parts)
    func pad(_ value: Int32) -> String { value < 10 ? "0\(value)" : String(value) }
    return "\(pad(parts.tm_hour)):\(pad(parts.tm_min)):\(pad(parts.tm_sec))"
}
