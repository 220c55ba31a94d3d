import AccmonClient
import AccmonTestSupport
import Foundation
import Glibc
import Testing

/// `accmon claim -- COMMAND` as flock(1): the environment, the exit status, conflicts, waiting, breaks, a killed
/// claimer, a restart of accmond; `accmon claims` and `accmon release`.
@Suite(.serialized) struct ClaimCommandTests {
    @Test func theCommandRunsWithTheClaimInItsEnvironmentAndItsStatusIsAccmonClaims() async throws {
        let daemon = try await ClaimDaemon()
        var adapter = ClaimDaemon.adapter("ENV1")
        adapter.deviceNodes = ["/dev/ttyUSB3", "/dev/serial/by-id/usb-FTDI_FT232R_ENV1-if00-port0"]
        let plugger = try await daemon.connect()
        let connection = try await plugger.simulateConnect(adapter)
        plugger.close()
        let run = try await daemon.accmon([
            "claim", "--serial", "ENV1", "--reason", "env test", "--",
            "sh", "-c", "env | grep '^ACCMON_CLAIM_' | sort; exit 7",
        ])
        #expect(run.termination == .exited(7), "\(run)")
        let expected = [
            "ACCMON_CLAIM_ACCESSORIES=\(adapter.accessoryID)", "ACCMON_CLAIM_CONNECTIONS=\(connection)",
            "ACCMON_CLAIM_ID=c-1", "ACCMON_CLAIM_NODE=/dev/ttyUSB3",
            "ACCMON_CLAIM_NODES=/dev/ttyUSB3 /dev/serial/by-id/usb-FTDI_FT232R_ENV1-if00-port0",
            "ACCMON_CLAIM_STABLE_NODE=/dev/serial/by-id/usb-FTDI_FT232R_ENV1-if00-port0",
        ]
        #expect(run.stdout.split(separator: "\n").map(String.init) == expected, "\(run)")
        // Released when the command exited.
        #expect(try await daemon.accmon(["claims"]).stdout == "no claims\n")
        // A signal's status is 128 + the signal, as a shell gives it.
        let killed = try await daemon.accmon(["claim", "--serial", "ENV1", "--", "sh", "-c", "kill -TERM $$"])
        #expect(killed.termination == .exited(128 + SIGTERM), "\(killed)")
        let missing = try await daemon.accmon(["claim", "--serial", "ENV1", "--", "no-such-command-here"])
        #expect(missing.termination == .exited(127) && missing.stderr.contains("command not found"), "\(missing)")
    }

    @Test func whatIsHeldMakesItExitWithTheConflictCodeNamingTheHolder() async throws {
        let daemon = try await ClaimDaemon()
        let board = try await daemon.plug("HELD1")
        let holder = try daemon.startAccmon(
            ["claim", "--connection", String(board.rawValue), "--reason", "long flash", "--", "sleep", "30"],
            name: "holder")
        #expect(await eventually { (try? await daemon.accmon(["claims"]).stdout.contains("long flash")) == true })
        // As another user: refused at once with 75, naming root.
        let other = try await daemon.accmon(["claim", "--connection", String(board.rawValue), "--", "true"], as: asNobody)
        #expect(other.termination == .exited(75), "\(other)")
        #expect(other.stderr.contains("c-1 by root") && other.stderr.contains("\"long flash\""), "\(other)")
        let custom = try await daemon.accmon(
            ["claim", "--serial", "HELD1", "--conflict-exit-code", "9", "--", "true"], as: asNobody)
        #expect(custom.termination == .exited(9), "\(custom)")
        // Waiting with a timeout: 75 after it, naming the holder.
        let started = ContinuousClock.now
        let waited = try await daemon.accmon(["claim", "--serial", "HELD1", "--timeout", "1", "--", "true"])
        #expect(waited.termination == .exited(75), "\(waited)")
        #expect(ContinuousClock.now - started >= .seconds(1))
        #expect(waited.stderr.contains("still not free after 1 s") && waited.stderr.contains("by root"), "\(waited)")
        #expect(try await daemon.accmon(["claims", "--json"]).stdout.contains("\"waiters\":[]"), "left the line")
        // The holder heard of each.
        #expect(await eventually { holder.stderr.components(separatedBy: "asked for c-1").count >= 4 }, "\(holder.stderr)")
        holder.send(SIGTERM)
        #expect(await holder.waitForExit() == .exited(128 + SIGTERM))
    }

    @Test func aUserTheManifestDoesNotLetClaimGets77() async throws {
        let daemon = try await ClaimDaemon(manifest: ClaimDaemon.manifest(claim: #"{"users": [0]}"#))
        let board = try await daemon.plug("DENY1")
        let refused = try await daemon.accmon(["claim", "--connection", String(board.rawValue), "--", "true"], as: asNobody)
        // nobody sees the accessory but may not claim it.
        #expect(refused.termination == .exited(77) && refused.stderr.contains("may not claim it"), "\(refused)")
        let byFilter = try await daemon.accmon(["claim", "--serial", "DENY1", "--", "true"], as: asNobody)
        #expect(byFilter.termination == .exited(77) && byFilter.stderr.contains("0 of them yours"), "\(byFilter)")
        let nothing = try await daemon.accmon(["claim", "--serial", "NONE", "--", "true"])
        #expect(nothing.termination == .exited(1) && nothing.stderr.contains("0 connected accessories"), "\(nothing)")
        let unreachable = try await run(
            try Binaries.accmon, ["--socket", daemon.directory.file("none"), "claim", "--", "true"],
            in: daemon.directory)
        #expect(unreachable.termination == .exited(69), "\(unreachable)")
        let usage = try await daemon.accmon(["claim", "--connection", "1", "--kind", "serial", "--", "true"])
        #expect(usage.termination == .exited(64), "\(usage)")
        #expect(try await daemon.accmon(["claim"]).termination == .exited(64))
        // A bridge's remote user name is refused to a client the manifest's bridges do not name.
        let raw = try RawSocket(path: daemon.socketPath)
        try raw.send(#"{"type":"claim","id":1,"connections":[\#(board.rawValue)],"remoteUser":"ci"}"# + "\n")
        #expect(await raw.readObject()?["code"] as? String == "permission-denied")
    }

    @Test func aWaitingClaimerGetsItWhenTheHolderEnds() async throws {
        let daemon = try await ClaimDaemon()
        _ = try await daemon.plug("LINE1")
        let marker = daemon.directory.file("second-ran")
        let first = try daemon.startAccmon(["claim", "--serial", "LINE1", "--", "sleep", "1"], name: "first")
        #expect(await eventually { (try? await daemon.accmon(["claims"]).stdout.contains("c-1")) == true })
        let second = try await daemon.accmon(
            ["claim", "--serial", "LINE1", "--wait", "--", "sh", "-c", "echo \"$ACCMON_CLAIM_ID\" > \(marker)"],
            timeout: .seconds(20))
        #expect(second.termination == .exited(0), "\(second)")
        #expect(second.stderr.contains("c-2 waits in line (place 1): held: c-1 by root"), "\(second)")
        #expect((try? String(contentsOfFile: marker, encoding: .utf8)) == "c-2\n")
        #expect(await first.waitForExit() == .exited(0))
    }

    @Test func aBrokenClaimEndsTheCommandAndExits75() async throws {
        let daemon = try await ClaimDaemon()
        let board = try await daemon.plug("BREAK1")
        let running = daemon.directory.file("running")
        let holder = try daemon.startAccmon(
            ["claim", "--connection", String(board.rawValue), "--", "sh", "-c", "trap 'echo TERM; exit 0' TERM; "
                + "touch \(running); while :; do sleep 0.1; done"],
            name: "holder")
        #expect(await eventually { FileManager.default.fileExists(atPath: running) }, "\(holder.stderr)")
        let broken = try await daemon.accmon(["release", String(board.rawValue), "--force", "--reason", "lab reset"])
        #expect(broken.termination == .exited(0), "\(broken)")
        #expect(await holder.waitForExit(timeout: .seconds(15)) == .exited(75), "\(holder.stderr)")
        #expect(holder.stderr.contains("broken by root") && holder.stderr.contains("\"lab reset\""), "\(holder.stderr)")
        #expect(holder.stdout.contains("TERM"), "the command got SIGTERM first")
    }

    @Test func aKilledClaimerTakesItsCommandAndItsClaimWithIt() async throws {
        let daemon = try await ClaimDaemon()
        let board = try await daemon.plug("KILL1")
        // A duration no other process sleeps: its command line finds it.
        let duration = "300.\(getpid())\(Int.random(in: 100_000..<1_000_000))"
        let holder = try daemon.startAccmon(
            ["claim", "--connection", String(board.rawValue), "--", "sleep", duration], as: [], name: "holder")
        #expect(await eventually { !pids(running: ["sleep", duration]).isEmpty }, "\(holder.stderr)\n\(daemon.log)")
        holder.send(SIGKILL)
        #expect(await eventually { pids(running: ["sleep", duration]).isEmpty }, "the command died with accmon claim")
        #expect(await eventually { (try? await daemon.accmon(["claims"]).stdout) == "no claims\n" })
    }

    @Test func aRestartOfAccmondTakesNothingFromARunningCommand() async throws {
        let daemon = try await ClaimDaemon()
        _ = try await daemon.plug("RESTART1")
        let flag = daemon.directory.file("go")
        let running = daemon.directory.file("running")
        let holder = try daemon.startAccmon(
            [
                "claim", "--serial", "RESTART1", "--", "sh", "-c",
                "touch \(running); while [ ! -e \(flag) ]; do sleep 0.1; done",
            ],
            name: "holder")
        // The command runs: the holder has heard of its claim (the daemon tells it once the claim is on disk).
        #expect(await eventually { FileManager.default.fileExists(atPath: running) }, "\(holder.stderr)")
        for (index, signal) in [SIGTERM, SIGKILL].enumerated() {
            try await daemon.restart(signal: signal)
            #expect(
                await eventually(timeout: .seconds(10)) {
                    holder.stderr.components(separatedBy: "c-1 taken up again").count == index + 2
                }, "\(holder.stderr)")
            let list = try await daemon.accmon(["claims", "--json"])
            #expect(list.stdout.contains("\"claimID\":\"c-1\""), "\(list)\n\(daemon.log)\n\(holder.stderr)")
            // Held for it meanwhile: another claimer is refused.
            let other = try await daemon.accmon(["claim", "--serial", "RESTART1", "--", "true"], as: asNobody)
            #expect(other.termination == .exited(75), "\(other)")
        }
        try #require(FileManager.default.createFile(atPath: flag, contents: nil), "cannot create \(flag)")
        #expect(await holder.waitForExit() == .exited(0), "\(holder.stderr)")
        #expect(await eventually { (try? await daemon.accmon(["claims"]).stdout) == "no claims\n" })
    }

    /// A waiter keeps its place across a restart of accmond: `accmon claim --wait` takes it up with its token, as the
    /// holder takes up its claim, and its command runs once the holder ends.
    @Test func aWaiterKeepsItsPlaceAcrossARestartOfAccmond() async throws {
        let daemon = try await ClaimDaemon()
        let board = try await daemon.plug("WAITER1")
        let marker = try ClaimEnforcementTests.sharedDirectory(in: daemon) + "/waiter-ran"
        let (holder, flag) = try await Self.holding(board, on: daemon)
        let waiter = try daemon.startAccmon(
            [
                "claim", "--connection", String(board.rawValue), "--wait", "--timeout", "120", "--", "sh", "-c",
                "echo \"$ACCMON_CLAIM_ID\" > \(marker)",
            ], as: asNobody, name: "waiter")
        #expect(await eventually { waiter.stderr.contains("c-2 waits in line") }, "\(waiter.stderr)")
        try await daemon.restart(signal: SIGKILL)
        #expect(await eventually(timeout: .seconds(15)) { holder.stderr.contains("c-1 taken up again") }, "\(holder.stderr)")
        #expect(
            await eventually(timeout: .seconds(15)) { waiter.stderr.contains("c-2's place in line taken up again") },
            "\(waiter.stderr)")
        try #require(FileManager.default.createFile(atPath: flag, contents: nil), "cannot create \(flag)")
        #expect(await holder.waitForExit() == .exited(0), "\(holder.stderr)")
        #expect(await waiter.waitForExit(timeout: .seconds(20)) == .exited(0), "\(waiter.stderr)\n\(daemon.log)")
        #expect((try? String(contentsOfFile: marker, encoding: .utf8)) == "c-2\n")
    }

    /// A waiter gone while accmond was down is granted nothing meanwhile, and its place is dropped when the reclaim
    /// window ends.
    @Test func aWaiterGoneAcrossARestartGetsNothingAndLosesItsPlace() async throws {
        let daemon = try await ClaimDaemon(arguments: ["--claim-reclaim", "3"])
        let board = try await daemon.plug("WAITER2")
        let (holder, flag) = try await Self.holding(board, on: daemon)
        let waiter = try daemon.startAccmon(
            ["claim", "--connection", String(board.rawValue), "--wait", "--", "true"], as: asNobody, name: "waiter")
        #expect(await eventually { waiter.stderr.contains("c-2 waits in line") }, "\(waiter.stderr)")
        // The waiter's place is in the state file once the list says so.
        #expect(await eventually { (try? await daemon.accmon(["claims", "--json"]).stdout.contains("c-2")) == true })
        try await Task.sleep(for: .milliseconds(300))
        await daemon.stop(signal: SIGKILL)
        waiter.send(SIGKILL)
        _ = await waiter.waitForExit()
        try await daemon.start()
        #expect(await eventually(timeout: .seconds(15)) { holder.stderr.contains("c-1 taken up again") }, "\(holder.stderr)")
        try #require(FileManager.default.createFile(atPath: flag, contents: nil), "cannot create \(flag)")
        #expect(await holder.waitForExit() == .exited(0), "\(holder.stderr)")
        let meanwhile = try await daemon.accmon(["claims", "--json"])
        #expect(!meanwhile.stdout.contains("\"holder\""), "nothing granted to the waiter that is gone: \(meanwhile)")
        #expect(await eventually(timeout: .seconds(10)) { (try? await daemon.accmon(["claims"]).stdout) == "no claims\n" })
        #expect(daemon.log.contains("waiting claim cancelled: its claimer did not come back"), "\(daemon.log)")
    }

    /// `accmon claim --connection BOARD` whose command runs until the file `flag` exists, once its command runs.
    static func holding(_ board: ConnectionID, on daemon: ClaimDaemon) async throws -> (ChildProcess, flag: String) {
        let flag = daemon.directory.file("go")
        let running = daemon.directory.file("running")
        let holder = try daemon.startAccmon(
            [
                "claim", "--connection", String(board.rawValue), "--", "sh", "-c",
                "touch \(running); while [ ! -e \(flag) ]; do sleep 0.1; done",
            ], name: "holder")
        #expect(await eventually { FileManager.default.fileExists(atPath: running) }, "\(holder.stderr)")
        return (holder, flag)
    }
}
