import AccmonClient
import AccmonMQTT
import AccmonSys
import Glibc
import Synchronization

/// The pid of the command `accmon claim --broker` runs, for the handlers that pass SIGTERM and SIGHUP on to it.
private let remoteChild = Atomic<Int32>(0)

/// Runs the command of `accmon claim --broker` while its remote claims hold: renews their leases, prints contention
/// and the end of a claim on standard error, ends the command (SIGTERM, SIGKILL 10 s later) when a claim ends under
/// it, and returns the exit status (the command's, or 75 when a claim was lost).
struct RemoteClaimRun {
    var claim: RemoteClaim
    let executable: String

    mutating func run() throws(MQTTError) -> Int32 {
        let pid: pid_t
        do {
            pid = try TiedChild.spawn(executable, arguments: claim.command.command, environment: environment())
        } catch {
            writeError("accmon: claim: \(claim.command.command[0]): cannot run: \(error)\n")
            return error.rawValue == EACCES || error.rawValue == EISDIR || error.rawValue == ENOEXEC ? 126 : 127
        }
        remoteChild.store(pid, ordering: .sequentiallyConsistent)
        signal(SIGINT, SIG_IGN)  // the terminal sends it to the command too; its exit ends the claim
        for forwarded in [SIGTERM, SIGHUP] {
            signal(forwarded) { signal in
                let child = remoteChild.load(ordering: .sequentiallyConsistent)
                if child > 0 { kill(child, signal) }
            }
        }
        var endingSince: UInt64?
        while true {
            var status: Int32 = 0
            let waited = waitpid(pid, &status, WNOHANG)
            if waited == pid {
                remoteChild.store(0, ordering: .sequentiallyConsistent)
                if endingSince != nil { return claim.command.conflictExitCode }
                return Self.shellStatus(status)
            }
            if let since = endingSince, monotonicNanoseconds() - since > UInt64(ClaimRun.terminationGraceSeconds * 1e9) {
                writeError("accmon: claim: \(claim.command.command[0]) still runs \(Int(ClaimRun.terminationGraceSeconds)) s after SIGTERM: SIGKILL\n")
                kill(pid, SIGKILL)
                endingSince = .max / 2
            }
            claim.renewIfDue()
            do {
                try claim.client.pump(milliseconds: 100)
            } catch {
                // The broker is away: the host's lease clocks stop too; keep going and reconnect is not attempted
                // here (the claims end with their leases if the broker never comes back to this claimer).
                writeError("accmon: claim: \(error.message)\n")
                usleep(100_000)
            }
            for notice in claim.client.takeInbox() where endingSince == nil {
                if let end = ended(notice) {
                    writeError("accmon: claim: \(end); ending \(claim.command.command[0]) (SIGTERM)\n")
                    kill(pid, SIGTERM)
                    endingSince = monotonicNanoseconds()
                }
            }
        }
    }

    /// What ends the run in `notice`, or `nil` (a contention is printed).
    private mutating func ended(_ notice: RemoteClaimReply) -> String? {
        guard let index = claim.held.firstIndex(where: { $0.host == notice.host && $0.claimID == notice.claimID })
        else {
            if notice.kind == .renewed, let unknown = notice.unknown,
                let lost = claim.held.first(where: { $0.host == notice.host && unknown.contains($0.claimID) })
            {
                claim.held.removeAll { $0.host == lost.host && $0.claimID == lost.claimID }
                return "\(lost.claimID) on \(lost.host) is no longer held (its lease ended)"
            }
            return nil
        }
        let held = claim.held[index]
        switch notice.kind {
        case .contention:
            claim.reportContention(notice)
            return nil
        case .returning:
            writeError("accmon: claim: \(held.claimID) on \(held.host): its accessory went away, expected back\n")
            return nil
        case .returned:
            let node = notice.accessories?.first?.deviceNodes.first ?? ""
            writeError("accmon: claim: \(held.claimID) on \(held.host): its accessory is back (\(node))\n")
            return nil
        case .broken, .lost, .expired, .leaseExpired, .cancelled:
            claim.held.remove(at: index)
            let by = notice.by.map { " by \(named($0))" } ?? ""
            return "\(held.claimID) on \(held.host) \(notice.kind == .broken ? "was broken" : "ended (\(notice.kind.rawValue))")\(by)"
                + (notice.reason.map { ": \"\($0)\"" } ?? "")
        default: return nil
        }
    }

    private func environment() -> [String] {
        let accessories = claim.held.flatMap(\.accessories)
        let nodes = accessories.flatMap(\.deviceNodes)
        var variables: [String: String] = [
            "ACCMON_CLAIM_HOST": claim.held.first?.host ?? "",
            "ACCMON_CLAIM_HOSTS": claim.held.map(\.host).joined(separator: " "),
            "ACCMON_CLAIM_NODE": accessories.first?.deviceNodes.first ?? "",
            "ACCMON_CLAIM_NODES": nodes.joined(separator: " "),
            "ACCMON_CLAIM_CONNECTIONS": accessories.map(\.connectionID.description).joined(separator: " "),
            "ACCMON_CLAIM_ACCESSORIES": accessories.map(\.accessoryID).joined(separator: " "),
            "ACCMON_CLAIM_ID": claim.held.map(\.claimID).joined(separator: " "),
        ]
        let stable = nodes.first { $0.hasPrefix("/dev/serial/by-id/") } ?? nodes.first { $0.hasPrefix("/dev/serial/by-path/") }
        if let stable { variables["ACCMON_CLAIM_STABLE_NODE"] = stable }
        return processEnvironment().filter { !$0.hasPrefix("ACCMON_CLAIM_") }
            + variables.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
    }

    static func shellStatus(_ status: Int32) -> Int32 {
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : 128 + signal
    }
}
