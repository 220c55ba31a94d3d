import AccmonSys
import AccmonSystemd
import Glibc
import Synchronization

/// The pid of the command `accmon open` runs, for the signal handlers that pass SIGTERM and SIGHUP on to it.
private let openChild = Atomic<Int32>(0)

/// Runs the command of `accmon open` with the node's descriptor as its descriptor 3, while the claim holds: the bus
/// connection stays open meanwhile (the claim lives as long as its holder is on the bus), a `Broken` claim ends the
/// command, and the claim is released when the command exits.
struct OpenRun {
    let command: ClaimRun.Command
    let opened: OpenedNode
    let bus: BusConnection

    /// How long a command whose claim was broken has between SIGTERM and SIGKILL.
    static let terminationGraceSeconds: Int32 = 10

    /// Runs the command; returns the exit status for `accmon open`.
    mutating func run() async -> Int32 {
        var environment = processEnvironment().filter { !$0.hasPrefix("ACCMON_OPEN_") }
        environment += [
            "ACCMON_OPEN_FD=3", "ACCMON_OPEN_NODE=\(opened.node)", "ACCMON_OPEN_CLAIM=\(opened.claimPath)",
            "ACCMON_OPEN_CONNECTION=\(opened.connection)",
        ]
        // The descriptor blocks for the command (shell tools read and write as files do); accmond hands it over
        // non-blocking (an app's event loop wants that).
        let flags = fcntl(opened.descriptor.rawValue, F_GETFL)
        if flags >= 0 { _ = fcntl(opened.descriptor.rawValue, F_SETFL, flags & ~O_NONBLOCK) }
        let pid: pid_t
        do {
            pid = try TiedChild.spawn(
                command.executable, arguments: command.arguments, environment: environment, passing: opened.descriptor)
        } catch {
            writeError("accmon: open: \(command.arguments[0]): cannot run: \(error)\n")
            release()
            return error.rawValue == EACCES || error.rawValue == EISDIR || error.rawValue == ENOEXEC ? 126 : 127
        }
        opened.descriptor.close()  // the command has it
        openChild.store(pid, ordering: .sequentiallyConsistent)
        signal(SIGINT, SIG_IGN)  // the terminal sends it to the command too; its exit ends the claim
        for forwarded in [SIGTERM, SIGHUP] {
            signal(forwarded) { signal in
                let child = openChild.load(ordering: .sequentiallyConsistent)
                if child > 0 { kill(child, signal) }
            }
        }
        // The command's end, told through an eventfd the loop below waits on beside the bus.
        let exits = Latest<TiedChild.Exit>()
        let ended: WakeupEvent
        do {
            ended = try WakeupEvent()
            try startThread(name: "accmon-child") {
                exits.set(TiedChild.wait(pid))
                ended.signal()
            }
        } catch {
            kill(pid, SIGKILL)
            return ExitCode.failure.rawValue
        }
        let outcome = follow(pid: pid, childEnded: ended.descriptor.rawValue, exits: exits)
        openChild.store(0, ordering: .sequentiallyConsistent)
        return outcome
    }

    /// Waits for the command's end and the claim's signals on this thread (the bus connection's).
    private func follow(pid: pid_t, childEnded: Int32, exits: Latest<TiedChild.Exit>) -> Int32 {
        var ending: UInt64?  // when SIGKILL is due, once the claim ended
        while true {
            // What sd-bus has read already first: while its read queue holds messages it asks poll for no POLLIN.
            let ended: String?
            do {
                ended = try brokenReason()
            } catch {
                ended = "the bus connection was lost (\(error)), and the claim with it"
            }
            if let ended, ending == nil {
                writeError("accmon: open: \(ended); ending \(command.arguments[0]) (SIGTERM)\n")
                kill(pid, SIGTERM)
                ending = monotonicNanoseconds() + UInt64(Self.terminationGraceSeconds) * 1_000_000_000
            }
            var waits = [
                pollfd(fd: childEnded, events: Int16(POLLIN), revents: 0),
                pollfd(fd: bus.descriptor.rawValue, events: bus.pollEvents, revents: 0),
            ]
            let timeout: Int32 = ending.map { due in
                let now = monotonicNanoseconds()
                return due > now ? Int32((due - now) / 1_000_000 + 1) : 0
            } ?? -1
            _ = waits.withUnsafeMutableBufferPointer { poll($0.baseAddress, 2, timeout) }
            if let exit = exits.value {
                if ending != nil { return ExitCode.timedOut.rawValue }
                release()
                return exit.shellStatus
            }
            if let due = ending, monotonicNanoseconds() >= due {
                writeError(
                    "accmon: open: \(command.arguments[0]) still runs \(Self.terminationGraceSeconds) s after SIGTERM: "
                        + "SIGKILL\n")
                kill(pid, SIGKILL)
                ending = UInt64.max
            }
        }
    }

    /// Reads what the bus sent: the reason of a `Broken` claim, if it was.
    private func brokenReason() throws(SystemdBusError) -> String? {
        while let message = try bus.next() {
            guard message.isSignal("org.accmon.Accmon1.Claim", "Broken"), message.path == opened.claimPath,
                let details = try message.readArguments().first?.stringKeyedEntries
            else { continue }
            let values = Dictionary(details, uniquingKeysWith: { first, _ in first })
            let kind = values["kind"]?.text ?? "broken"
            let by = values["by"]?.text.map { " by \($0)" } ?? ""
            let reason = values["reason"]?.text.map { ": \($0)" } ?? ""
            return "the claim was \(kind)\(by)\(reason)"
        }
        return nil
    }

    /// Releases the claim (the command ended); a failure only means it ends with this connection anyway.
    private func release() {
        guard
            let call = try? bus.methodCall(  // try?: see above
                destination: "org.accmon.Accmon1", path: opened.claimPath, interface: "org.accmon.Accmon1.Claim",
                member: "Release")
        else { return }
        _ = try? bus.call(call, timeoutMicroseconds: 25_000_000)  // try?: see above
    }
}
