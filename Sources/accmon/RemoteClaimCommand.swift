import AccmonClient
import AccmonMQTT
import AccmonSys
import Glibc

/// `accmon claim --broker`: claims accessories on any host of the fleet through its bridge (docs/MQTT.md §12), runs the
/// command while renewing the leases, and releases at its end; the same exit statuses as the local form.
struct RemoteClaim {
    /// One claim held (or waited for) on one host.
    struct Held {
        var host: String
        var claimID: String
        var accessories: [Accessory]
    }

    let command: ClaimCommand
    let fleet: FleetOptions
    let settings: BrokerSettings
    let client: RemoteClaimClient
    var held: [Held] = []
    /// Claims waiting in line, by host and claim id.
    var waiting: [(host: String, claimID: String)] = []
    var renewSeconds = 10.0
    var lastRenewal: UInt64 = 0

    init(command: ClaimCommand, fleet: FleetOptions) throws(AccmonError) {
        self.command = command
        self.fleet = fleet
        let settings = try fleet.settings()
        self.settings = settings
        let user = settings.username ?? ""
        do {
            client = try RemoteClaimClient(
                settings: settings, topics: fleet.topics,
                clientID: "accmon-claim-\(user)-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        } catch {
            throw fleetError(error)
        }
    }

    var request: RemoteClaimRequest {
        RemoteClaimRequest(
            op: .claim, nonce: "", filter: command.filter, serial: command.serial, count: command.count ?? 1,
            wait: false, reason: command.reason)
    }

    /// Claims, runs the command, releases; never returns.
    mutating func run(executable: String) throws(AccmonError) -> Never {
        do {
            try obtain()
            var running = RemoteClaimRun(claim: self, executable: executable)
            let status = try running.run()
            self = running.claim
            releaseAll()
            exit(status)
        } catch {
            releaseAll()
            throw fleetError(error)
        }
    }

    // MARK: Obtaining

    private mutating func obtain() throws(MQTTError) {
        // The hosts `--host` selects, read as the fleet view reads them: in windows, nothing dropped.
        let read = try FleetReader.stateNow(settings: settings, topics: fleet.topics, options: fleet.readOptions)
        for warning in read.warnings { writeError(warning + "\n") }
        let hosts = read.state.sortedHosts.filter { $0.stateName == "online" && fleet.shows(host: $0.name) }.map {
            (host: $0.name, accessories: $0.sortedAccessories)
        }
        let deadline = command.timeout.map { monotonicNanoseconds() + UInt64($0 * 1e9) }
        if !command.remoteConnections.isEmpty {
            try obtainAcrossHosts(hosts.map(\.host), deadline: deadline)
            return
        }
        let count = command.count ?? 1
        let candidates = hosts.filter { host in
            host.accessories.filter { accessory in
                command.filter.matches(accessory) && (command.serial.map { $0 == accessory.serialNumber } ?? true)
            }.count >= count
        }.map(\.host)
        var refusals: [RemoteClaimReply] = []
        for host in candidates {
            guard let reply = try client.ask(request, host: host) else {
                refusals.append(Self.noAnswer(host))
                continue
            }
            if reply.kind == .held {
                take(reply)
                return
            }
            refusals.append(reply)
        }
        let waitOn = candidates.isEmpty ? hosts.map(\.host) : candidates
        guard command.wait, !waitOn.isEmpty else { fail(refusals, candidates: candidates) }
        // Wait in line on every candidate host; the first grant wins, the other places are given up.
        var waitRequest = request
        waitRequest.wait = true
        for host in waitOn {
            guard let reply = try client.ask(waitRequest, host: host) else { continue }
            switch reply.kind {
            case .held:
                take(reply)
            case .waiting:
                waiting.append((host, reply.claimID ?? ""))
                renewSeconds = reply.renewSeconds ?? renewSeconds
                let holders = (reply.holders ?? []).map(describe).joined(separator: "; ")
                writeError(
                    "accmon: claim: \(reply.claimID ?? "") waits in line on \(host) (place \(reply.position ?? 1))"
                        + (holders.isEmpty ? ": nothing matching is free or plugged in yet\n" : ": held: \(holders)\n"))
            default: refusals.append(reply)
            }
            if !held.isEmpty { break }
        }
        if held.isEmpty, waiting.isEmpty { fail(refusals, candidates: candidates) }
        while held.isEmpty {
            if let deadline, monotonicNanoseconds() >= deadline { timedOut() }
            try step()
        }
        giveUpWaiting()
    }

    /// `--connection HOST:ID ...`: by host in name order, each host's all at once, waiting in that order when asked
    /// to; a refusal releases what was taken (two claimers of the same accessories never hold some each for good).
    private mutating func obtainAcrossHosts(_ online: [String], deadline: UInt64?) throws(MQTTError) {
        let byHost = Dictionary(grouping: command.remoteConnections, by: \.host)
        for host in byHost.keys.sorted() {
            guard online.contains(host) else {
                releaseAll()
                writeError("accmon: claim: host '\(host)' is not online\n")
                exit(ExitCode.unavailable.rawValue)
            }
            let connections = byHost[host]!.map(\.connection.rawValue).sorted()
            let ask = RemoteClaimRequest(
                op: .claim, nonce: "", connections: connections, wait: command.wait, reason: command.reason)
            guard let reply = try client.ask(ask, host: host) else { fail([Self.noAnswer(host)], candidates: [host]) }
            switch reply.kind {
            case .held: take(reply)
            case .waiting:
                waiting.append((host, reply.claimID ?? ""))
                while !waiting.isEmpty {
                    if let deadline, monotonicNanoseconds() >= deadline { timedOut() }
                    try step()
                }
            default: fail([reply], candidates: [host])
            }
        }
    }

    private mutating func take(_ reply: RemoteClaimReply) {
        held.append(Held(host: reply.host, claimID: reply.claimID ?? "", accessories: reply.accessories ?? []))
        renewSeconds = reply.renewSeconds ?? renewSeconds
    }

    /// One turn while waiting: renew, and take a grant.
    private mutating func step() throws(MQTTError) {
        renewIfDue()
        try client.pump(milliseconds: 100)
        for notice in client.takeInbox() {
            guard let index = waiting.firstIndex(where: { $0.host == notice.host && $0.claimID == notice.claimID })
            else {
                if notice.kind == .contention { reportContention(notice) }
                continue
            }
            switch notice.kind {
            case .granted:
                waiting.remove(at: index)
                held.append(
                    Held(host: notice.host, claimID: notice.claimID ?? "", accessories: notice.accessories ?? []))
            case .cancelled, .leaseExpired, .lost:
                waiting.remove(at: index)
                writeError("accmon: claim: \(notice.claimID ?? "") on \(notice.host) left the line: \(notice.reason ?? notice.kind.rawValue)\n")
                if waiting.isEmpty, held.isEmpty { timedOut() }
            default: break
            }
        }
    }

    /// Renews every claim and place in line held when a renewal is due (the replies are not awaited).
    mutating func renewIfDue() {
        let now = monotonicNanoseconds()
        guard now - lastRenewal >= UInt64(renewSeconds * 1e9) else { return }
        lastRenewal = now
        var byHost: [String: [String]] = [:]
        for claim in held { byHost[claim.host, default: []].append(claim.claimID) }
        for place in waiting { byHost[place.host, default: []].append(place.claimID) }
        for (host, claimIDs) in byHost {
            _ = try? client.send(RemoteClaimRequest(op: .renew, nonce: "", claimIDs: claimIDs), to: host)  // try?: the next renewal
        }
    }

    func reportContention(_ notice: RemoteClaimReply) {
        let who = notice.by.map { named($0).description } ?? "someone"
        writeError(
            "accmon: claim: \(who) asked for \(notice.claimID ?? "") on \(notice.host)"
                + (notice.reason.map { ": \"\($0)\"" } ?? "") + "\n")
    }

    private mutating func giveUpWaiting() {
        for place in waiting {
            _ = try? client.ask(RemoteClaimRequest(op: .release, nonce: "", claimIDs: [place.claimID]), host: place.host, timeout: 5)  // try?: its lease ends it
        }
        waiting = []
    }

    /// Releases everything held and every place in line (each within 5 s; what is not answered ends with its lease).
    mutating func releaseAll() {
        giveUpWaiting()
        for claim in held {
            _ = try? client.ask(RemoteClaimRequest(op: .release, nonce: "", claimIDs: [claim.claimID]), host: claim.host, timeout: 5)  // try?: its lease ends it
        }
        held = []
        client.disconnect()
    }

    private mutating func timedOut() -> Never {
        releaseAll()
        writeError("accmon: claim: still not free after \(Int(command.timeout ?? 0)) s\n")
        exit(command.conflictExitCode)
    }

    private static func noAnswer(_ host: String) -> RemoteClaimReply {
        var reply = RemoteClaimReply(kind: .error, host: host)
        reply.code = "unavailable"
        reply.message = "host '\(host)' did not answer (is its bridge running and does the broker's ACL let you ask it?)"
        return reply
    }

    /// Reports why nothing was claimed and exits: 75 (held, naming holder and host), 77, 69 or 1.
    private mutating func fail(_ refusals: [RemoteClaimReply], candidates: [String]) -> Never {
        releaseAll()
        let conflicts = refusals.filter { $0.code == "claim-conflict" }
        if !conflicts.isEmpty {
            let holders = conflicts.flatMap { reply in (reply.holders ?? []).map { "\(describe($0)) on \(reply.host)" } }
            writeError("accmon: claim: held: \(holders.joined(separator: "; "))\n")
            exit(command.conflictExitCode)
        }
        for reply in refusals { writeError("accmon: claim: \(reply.host): \(reply.message ?? reply.kind.rawValue)\n") }
        if candidates.isEmpty && refusals.isEmpty {
            writeError("accmon: claim: no online host has \(command.count ?? 1) matching accessories\n")
        }
        if refusals.contains(where: { $0.code == "permission-denied" }) { exit(ExitCode.permissionDenied.rawValue) }
        if !refusals.isEmpty, refusals.allSatisfy({ $0.code == "unavailable" }) { exit(ExitCode.unavailable.rawValue) }
        exit(ExitCode.failure.rawValue)
    }
}
