import AccmonClient
import AccmonMQTT
import AccmonProtocol
import AccmonTestSupport
import Foundation
import Glibc
import Testing

/// `accmon claim --broker` and `accmon claims --broker` against a real mosquitto with the documented ACL and real
/// hosts with their bridges.
extension BridgeProcessTests {
    @Suite struct RemoteClaimCommands {
        static func accmon(_ arguments: [String], in fleet: ClaimFleet, timeout: Duration = .seconds(60)) async throws
            -> CommandResult
        {
            try await run(try Binaries.accmon, arguments, in: fleet.directory, timeout: timeout)
        }

        @Test(arguments: BrokerKind.allCases) func aClaimByFilterFindsTheHostRunsTheCommandThereAndReleases(
            kind: BrokerKind
        ) async throws {
            let fleet = try await ClaimFleet(hosts: ["lab-1", "lab-2"], on: kind)
            _ = try await RemoteClaims.plug("OTHER", on: fleet.hosts[0])
            let board = try await RemoteClaims.plug("S1", on: fleet.hosts[1])
            #expect(await fleet.waitUntilTakingRequests())
            #expect(await fleet.waitUntilPublished(["OTHER", "S1"]))
            let marker = fleet.directory.file("ran")
            let result = try await Self.accmon(
                ["claim"] + (try fleet.login("ci")) + [
                    "--serial", "S1", "--reason", "flash", "--", "sh", "-c",
                    "echo \"$ACCMON_CLAIM_HOST $ACCMON_CLAIM_NODE $ACCMON_CLAIM_CONNECTIONS\" > \(marker); "
                        + "\(try Binaries.accmon.path) --socket \(fleet.hosts[1].socketPath) claims",
                ], in: fleet)
            #expect(result.termination == .exited(0), "\(result)\n\(fleet.hosts[1].logTail())")
            #expect(
                (try? String(contentsOfFile: marker, encoding: .utf8)) == "lab-2 /dev/ttyUSB-S1 \(board.rawValue)\n")
            #expect(result.stdout.contains("ci (remote)") && result.stdout.contains("flash"), "\(result.stdout)")
            #expect(try await fleet.hosts[1].accmon(["claims"]).stdout == "no claims\n")
            // The command's status is accmon claim's.
            let failing = try await Self.accmon(
                ["claim"] + (try fleet.login("ci")) + ["--serial", "S1", "--", "sh", "-c", "exit 3"], in: fleet)
            #expect(failing.termination == .exited(3), "\(failing)")
            let nothing = try await Self.accmon(
                ["claim"] + (try fleet.login("ci")) + ["--serial", "NONE", "--", "true"], in: fleet)
            #expect(nothing.termination == .exited(1), "\(nothing)")
            // mallory is not in the entry's remote list: accmond answers her as for an accessory she cannot see.
            let mallory = try await Self.accmon(
                ["claim"] + (try fleet.login("mallory")) + ["--serial", "S1", "--", "true"], in: fleet)
            #expect(mallory.termination == .exited(1) && mallory.stderr.contains("lab-2"), "\(mallory)")
        }

        @Test func heldElsewhereExits75NamingTheHolderAndHostAndClaimsShowsIt() async throws {
            let fleet = try await ClaimFleet(hosts: ["lab-1", "lab-2"])
            let host = fleet.hosts[0]
            _ = try await RemoteClaims.plug("H1", on: host)
            #expect(await fleet.waitUntilTakingRequests())
            #expect(await fleet.waitUntilPublished(["H1"]))
            let ci = try fleet.claimer("ci")
            let held = try #require(try ci.ask(RemoteClaims.byFilter("H1"), host: "lab-1"))
            try #require(held.kind == .held)
            let refused = try await Self.accmon(
                ["claim"] + (try fleet.login("qa")) + ["--serial", "H1", "--", "true"], in: fleet)
            #expect(refused.termination == .exited(75), "\(refused)")
            #expect(refused.stderr.contains("ci (remote)") && refused.stderr.contains("on lab-1"), "\(refused)")
            let waited = try await Self.accmon(
                ["claim"] + (try fleet.login("qa")) + ["--serial", "H1", "--timeout", "1", "--", "true"], in: fleet)
            #expect(waited.termination == .exited(75) && waited.stderr.contains("waits in line on lab-1"), "\(waited)")
            let listed = try await Self.accmon(["claims"] + (try fleet.login("qa")), in: fleet)
            #expect(listed.termination == .exited(0), "\(listed)")
            #expect(
                listed.stdout.contains("lab-1") && listed.stdout.contains("held")
                    && listed.stdout.contains("ci (remote)"), "\(listed.stdout)")
            let json = try await Self.accmon(["claims", "--json"] + (try fleet.login("qa")), in: fleet)
            #expect(json.stdout.contains(#""host":"lab-1""#) && json.stdout.contains(#""remote":true"#), "\(json)")
            let list = try await Self.accmon(["list"] + (try fleet.login("qa")), in: fleet)
            let row = list.stdout.split(separator: "\n").first { $0.contains("H1") }.map(String.init) ?? ""
            #expect(list.stdout.hasPrefix("HOST") && list.stdout.contains("HOLDER"), "\(list)")
            #expect(row.hasPrefix("lab-1") && row.hasSuffix("ci (remote)"), "\(list)")
            // The host goes offline: its claims are shown as unknown, not free.
            _ = await host.stopBridge()
            let offline = try await Self.accmon(["claims"] + (try fleet.login("qa")), in: fleet)
            #expect(offline.stdout.contains("unknown") && offline.stdout.contains("ci (remote)"), "\(offline.stdout)")
        }

        @Test func aPairAcrossTwoHostsClaimedInOppositeOrdersNeverDeadlocks() async throws {
            let fleet = try await ClaimFleet(hosts: ["lab-1", "lab-2"])
            let a = try await RemoteClaims.plug("PA", on: fleet.hosts[0])
            let b = try await RemoteClaims.plug("PB", on: fleet.hosts[1])
            #expect(await fleet.waitUntilTakingRequests())
            #expect(await fleet.waitUntilPublished(["PA", "PB"]))
            let first = ["--connection", "lab-1:\(a.rawValue)", "--connection", "lab-2:\(b.rawValue)"]
            let second = ["--connection", "lab-2:\(b.rawValue)", "--connection", "lab-1:\(a.rawValue)"]
            let both = fleet.directory.file("both")
            let command = ["--wait", "--timeout", "60", "--", "sh", "-c", "echo x >> \(both)"]
            for round in 0..<50 {
                async let one = Self.accmon(["claim"] + (try fleet.login("ci")) + first + command, in: fleet)
                async let two = Self.accmon(["claim"] + (try fleet.login("qa")) + second + command, in: fleet)
                let (x, y) = try await (one, two)
                #expect(x.termination == .exited(0) && y.termination == .exited(0), "round \(round): \(x)\n\(y)")
                if x.termination != .exited(0) || y.termination != .exited(0) { break }
            }
            let lines = (try? String(contentsOfFile: both, encoding: .utf8))?.split(separator: "\n").count
            #expect(lines == 100)
            #expect(try await fleet.hosts[0].accmon(["claims"]).stdout == "no claims\n")
            #expect(try await fleet.hosts[1].accmon(["claims"]).stdout == "no claims\n")
        }
    }
}

extension BridgeProcessTests.RemoteClaimCommands {
    @Test func aKilledClaimerTakesItsCommandWithItAndItsClaimEndsWithItsLease() async throws {
        let fleet = try await ClaimFleet(lease: (renew: 1, expiry: 3))
        _ = try await BridgeProcessTests.RemoteClaims.plug("KC1", on: fleet.hosts[0])
        #expect(await fleet.waitUntilTakingRequests())
        #expect(await fleet.waitUntilPublished(["KC1"]))
        let marker = fleet.directory.file("running")
        let claimer = try ChildProcess(
            try Binaries.accmon,
            ["claim"] + (try fleet.login("ci")) + ["--serial", "KC1", "--", "sh", "-c", "echo $$ > \(marker); exec sleep 300"],
            name: "claimer", directory: fleet.directory)
        #expect(await eventuallyHolds { FileManager.default.fileExists(atPath: marker) }, "\(claimer.stderr)")
        let command = try #require(pid_t(try String(contentsOfFile: marker, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)))
        #expect(try await fleet.hosts[0].accmon(["claims"]).stdout.contains("ci (remote)"))
        claimer.kill()
        #expect(await eventuallyHolds { kill(command, 0) != 0 }, "the command died with accmon claim")
        #expect(
            await eventuallyHolds(timeout: .seconds(10)) {
                (try? await fleet.hosts[0].accmon(["claims"]).stdout) == "no claims\n"
            }, "its lease ended it")
    }

    @Test func usageAnUnreachableBrokerAndAWrongPasswordExitAsTheLocalForm() async throws {
        let fleet = try await ClaimFleet(hosts: [])
        let usage = try await Self.accmon(
            ["claim"] + (try fleet.login("ci")) + ["--connection", "3", "--", "true"], in: fleet)
        #expect(usage.termination == .exited(64) && usage.stderr.contains("HOST:ID"), "\(usage)")
        let noUser = try await Self.accmon(["claim", "--broker", fleet.broker.url, "--", "true"], in: fleet)
        #expect(noUser.termination == .exited(64), "\(noUser)")
        let port = try freeTCPPort()
        let unreachable = try await Self.accmon(
            ["claim", "--broker", "mqtt://127.0.0.1:\(port)", "--username", "ci", "--", "true"], in: fleet)
        #expect(unreachable.termination == .exited(69), "\(unreachable)")
        let wrong = fleet.directory.file("wrong.password")
        try "nope\n".write(toFile: wrong, atomically: false, encoding: .utf8)
        chmod(wrong, 0o600)
        let refused = try await Self.accmon(
            ["claim", "--broker", fleet.broker.url, "--username", "ci", "--password-file", wrong, "--", "true"],
            in: fleet)
        #expect(refused.termination == .exited(77), "\(refused)")
    }
}
