import AccmonClient
import AccmonSys
import Glibc
import Synchronization

/// The pid of the command `accmon claim` runs, for the signal handlers that pass SIGTERM and SIGHUP on to it.
private let runningChild = Atomic<Int32>(0)

/// The latest value one task sets and another reads.
final class Latest<Value: Sendable>: Sendable {
    private let stored = Mutex<Value?>(nil)
    func set(_ value: Value) { stored.withLock { $0 = value } }
    var value: Value? { stored.withLock { $0 } }
}

/// Runs the command of `accmon claim` while the claim holds: passes the claim to it in its environment, tells the
/// user of contention and changes on standard error, ends it when the claim is broken or lost, takes the claim up
/// again after a restart of accmond, and releases it when the command exits.
struct ClaimRun {
    struct Command {
        var executable: String
        var arguments: [String]
    }

    /// What the run waits for.
    private enum Happening: Sendable {
        case exited(TiedChild.Exit)
        case notice(ClaimNotice)
        /// The claim's notices ended: the connection closed (accmond restarted or stopped).
        case disconnected
        case deadline
    }

    let command: Command
    var claim: AccmonClaim
    var connection: AccmonConnection
    let socket: String?
    let conflictExitCode: Int32
    /// How long to try to take the claim up again after accmond went away: its reclaim window, with room to restart.
    static let reconnectSeconds = 60.0
    /// How long a command whose claim was broken has between SIGTERM and SIGKILL.
    static let terminationGraceSeconds = 10.0

    init(command: Command, claim: AccmonClaim, connection: AccmonConnection, socket: String?, conflictExitCode: Int32) {
        self.command = command
        self.claim = claim
        self.connection = connection
        self.socket = socket
        self.conflictExitCode = conflictExitCode
    }

    /// Runs the command; returns the exit status for `accmon claim`.
    mutating func run() async -> Int32 {
        for opener in claim.info.openers {
            writeError("accmon: claim: \(opener.path) was open already: pid \(opener.pid) (\(opener.command)) of "
                + "\(opener.user ?? "uid \(opener.uid)"); it keeps its descriptor\n")
        }
        let unenforced = claim.info.nodes.filter { !$0.enforced }
        if !unenforced.isEmpty && unenforced.count == claim.info.nodes.count {
            writeError("accmon: claim: no device node is enforced: "
                + unenforced.map { "\($0.path): \($0.note ?? "")" }.joined(separator: "; ") + "\n")
        }
        let pid: pid_t
        do {
            pid = try TiedChild.spawn(
                command.executable, arguments: command.arguments, environment: environment(for: claim.info))
        } catch {
            writeError("accmon: claim: \(command.arguments[0]): cannot run: \(error)\n")
            try? await claim.release()  // try?: exiting with the command's failure anyway
            return error.rawValue == EACCES || error.rawValue == EISDIR || error.rawValue == ENOEXEC ? 126 : 127
        }
        runningChild.store(pid, ordering: .sequentiallyConsistent)
        signal(SIGINT, SIG_IGN)  // the terminal sends it to the command too; its exit ends the claim
        for forwarded in [SIGTERM, SIGHUP] {
            signal(forwarded) { signal in
                let child = runningChild.load(ordering: .sequentiallyConsistent)
                if child > 0 { kill(child, signal) }
            }
        }
        let (happenings, sink) = AsyncStream<Happening>.makeStream()
        do {
            try startThread(name: "accmon-child") { sink.yield(.exited(TiedChild.wait(pid))) }
        } catch {
            kill(pid, SIGKILL)
            return ExitCode.failure.rawValue
        }
        follow(claim, into: sink)
        var ending: (notice: String, deadline: Task<Void, Never>?)?
        for await happening in happenings {
            switch happening {
            case .exited(let exit):
                ending?.deadline?.cancel()
                runningChild.store(0, ordering: .sequentiallyConsistent)
                if ending != nil { return conflictExitCode }
                try? await claim.release()  // try?: accmond gone: the claim ends with the connection anyway
                connection.close()
                return exit.shellStatus
            case .notice(let notice):
                if let end = report(notice), ending == nil {
                    writeError("accmon: claim: \(end); ending \(command.arguments[0]) (SIGTERM)\n")
                    kill(pid, SIGTERM)
                    ending = (end, Task {
                        try? await Task.sleep(for: .seconds(Self.terminationGraceSeconds))  // try?: cancelled: it ended
                        if !Task.isCancelled { sink.yield(.deadline) }
                    })
                }
            case .deadline:
                writeError("accmon: claim: \(command.arguments[0]) still runs \(Int(Self.terminationGraceSeconds)) s "
                    + "after SIGTERM: SIGKILL\n")
                kill(pid, SIGKILL)
            case .disconnected:
                guard ending == nil else { continue }
                if let resumed = await takeUp() {
                    claim = resumed.claim
                    connection = resumed.connection
                    follow(claim, into: sink)
                } else {
                    kill(pid, SIGTERM)
                    ending = ("the claim could not be taken up again", Task {
                        try? await Task.sleep(for: .seconds(Self.terminationGraceSeconds))  // try?: see above
                        if !Task.isCancelled { sink.yield(.deadline) }
                    })
                }
            }
        }
        return conflictExitCode
    }

    /// Passes `claim`'s notices on, then `disconnected` when they end without a release.
    private func follow(_ claim: AccmonClaim, into sink: AsyncStream<Happening>.Continuation) {
        Task {
            for await notice in claim.notices { sink.yield(.notice(notice)) }
            sink.yield(.disconnected)
        }
    }

    /// Prints a notice on standard error; returns why the claim ended when it did.
    private func report(_ notice: ClaimNotice) -> String? {
        let by = notice.by.map { named($0).description } ?? "someone"
        let reason = notice.reason.map { $0.isEmpty ? "" : ": \"\($0)\"" } ?? ""
        switch notice.kind {
        case .contention:
            writeError("accmon: claim: \(by) asked for \(notice.claimID)\(reason)\n")
        case .returning:
            writeError("accmon: claim: \(notice.accessory?.accessoryID ?? "the accessory") went away; the claim waits for it\n")
        case .returned:
            let node = notice.claim?.accessories.first?.deviceNodes.first ?? ""
            writeError("accmon: claim: \(notice.accessory?.accessoryID ?? "the accessory") is back as connection "
                + "\(notice.accessory?.connectionID.description ?? "?")\(node.isEmpty ? "" : ", \(node)")\n")
        case .broken: return "broken by \(by)\(reason)"
        case .lost: return "lost: \(notice.reason ?? "the accessory did not come back")"
        case .expired: return "ended at its maximum duration"
        case .granted, .cancelled: break
        }
        return nil
    }

    /// After the connection closed: connects again and takes the claim up with its token, until accmond's reclaim
    /// window has surely passed.
    private func takeUp() async -> (claim: AccmonClaim, connection: AccmonConnection)? {
        writeError("accmon: claim: accmond closed the connection; taking the claim up again\n")
        guard let connection = await Self.reconnect(socket: socket) else { return nil }
        do {
            let claim = try await connection.claim(.resume(token: claim.token))
            writeError("accmon: claim: \(claim.claimID) taken up again\n")
            return (claim, connection)
        } catch {
            writeError("accmon: claim: cannot take \(claim.claimID) up again: \(error.message)\n")
            connection.close()
            return nil
        }
    }

    /// Connects to accmond again after it closed the connection, until its reclaim window has surely passed
    /// (``reconnectSeconds``) or the task is cancelled; `nil` then, said on standard error.
    static func reconnect(socket: String?) async -> AccmonConnection? {
        let deadline = ContinuousClock.now + .seconds(reconnectSeconds)
        var delay = 0.1
        while ContinuousClock.now < deadline {
            do {
                return try await AccmonConnection.connect(socketPath: socket, clientName: "accmon claim")
            } catch {
                // try?: a cancelled sleep ends the attempts (an `accmon claim --timeout` that ran out)
                guard (try? await Task.sleep(for: .seconds(delay))) != nil else { return nil }
                delay = min(delay * 2, 2)
            }
        }
        writeError("accmon: claim: accmond did not come back within \(Int(reconnectSeconds)) s\n")
        return nil
    }

    /// The command's environment: this one's, with the claim's variables.
    private func environment(for info: ClaimInfo) -> [String] {
        let nodes = info.accessories.flatMap(\.deviceNodes)
        let stable = nodes.first { $0.hasPrefix("/dev/serial/by-id/") } ?? nodes.first { $0.hasPrefix("/dev/serial/by-path/") }
        var variables: [String: String] = [
            "ACCMON_CLAIM_NODE": info.accessories.first?.deviceNodes.first ?? "",
            "ACCMON_CLAIM_NODES": nodes.joined(separator: " "),
            "ACCMON_CLAIM_CONNECTIONS": info.accessories.map(\.connectionID.description).joined(separator: " "),
            "ACCMON_CLAIM_ACCESSORIES": info.accessories.map(\.accessoryID).joined(separator: " "),
            "ACCMON_CLAIM_ID": info.claimID,
        ]
        if let stable { variables["ACCMON_CLAIM_STABLE_NODE"] = stable }
        var environment = processEnvironment().filter { entry in
            !entry.hasPrefix("ACCMON_CLAIM_")
        }
        environment += variables.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
        return environment
    }
}

/// This process's environment, as `NAME=value` strings.
func processEnvironment() -> [String] {
    var entries: [String] = []
    var pointer = environ
    while let entry = pointer.pointee {
        entries.append(String(cString: entry))
        pointer += 1
    }
    return entries
}
