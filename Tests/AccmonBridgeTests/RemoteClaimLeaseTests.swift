import AccmonClient
import AccmonMQTT
import AccmonProtocol
import AccmonTestSupport
import Foundation
import Glibc
import Testing

/// The leases of remote claims, with short settings (renew every second, expire after 3 s): a claimer that stops
/// renewing loses its claim; a broker restart and a bridge killed with SIGKILL take nothing.
extension BridgeProcessTests {
    @Suite struct RemoteClaimLeases {
        static let lease = (renew: 1, expiry: 3)

        /// Asks until a reply comes (a request published while the host's gateway is not subscribed is lost).
        static func askUntilAnswered(
            _ claimer: RemoteClaimClient, _ request: RemoteClaimRequest, host: String = "lab-1"
        ) async throws -> RemoteClaimReply? {
            for _ in 0..<30 {
                if let reply = try claimer.ask(request, host: host, timeout: 0.5) { return reply }
            }
            return nil
        }

        static func renew(_ claimID: String) -> RemoteClaimRequest {
            RemoteClaimRequest(op: .renew, nonce: "", claimIDs: [claimID])
        }

        @Test func aClaimerThatStopsRenewingLosesItsClaimAndOneThatRenewsKeepsIt() async throws {
            let fleet = try await ClaimFleet(lease: Self.lease)
            let host = fleet.hosts[0]
            _ = try await RemoteClaims.plug("L1", on: host)
            _ = try await RemoteClaims.plug("L2", on: host)
            #expect(await fleet.waitUntilTakingRequests(), "\(host.logTail())")
            let ci = try fleet.claimer("ci")
            let kept = try #require(try ci.ask(RemoteClaims.byFilter("L1"), host: "lab-1"))
            #expect(kept.leaseSeconds == 3 && kept.renewSeconds == 1, "\(kept)")
            // A claimer process killed with its claim: it renews nothing.
            let doomed = try fleet.claimer("qa")
            let lost = try #require(try doomed.ask(RemoteClaims.byFilter("L2"), host: "lab-1"))
            try #require(lost.kind == .held)
            doomed.disconnect()
            let began = ContinuousClock.now
            // ci renews every second for 5 s (past the expiry): kept; qa's ends within its 3 s and a turn.
            while ContinuousClock.now - began < .seconds(5) {
                let renewed = try #require(try ci.ask(Self.renew(kept.claimID!), host: "lab-1"))
                #expect(renewed.unknown == [], "\(renewed)")
                try await Task.sleep(for: .seconds(1))
            }
            let listed = try await host.accmon(["claims"])
            #expect(listed.stdout.contains(kept.claimID!) && !listed.stdout.contains(lost.claimID! + " "), "\(listed)")
            #expect(host.bridgeLog.contains("the lease of \(lost.claimID!) of MQTT user 'qa' expired"), "\(host.logTail())")
            // ci stops: its claim ends too.
            #expect(await eventuallyHolds(timeout: .seconds(10)) { (try? await host.accmon(["claims"]).stdout) == "no claims\n" })
        }

        @Test func aBrokerRestartMidClaimTakesNothing() async throws {
            let fleet = try await ClaimFleet(lease: Self.lease)
            let host = fleet.hosts[0]
            _ = try await RemoteClaims.plug("B1", on: host)
            #expect(await fleet.waitUntilTakingRequests(), "\(host.logTail())")
            let ci = try fleet.claimer("ci")
            let held = try #require(try ci.ask(RemoteClaims.byFilter("B1"), host: "lab-1"))
            try #require(held.kind == .held, "\(held)")
            fleet.broker.kill9()
            // Longer than the lease: nobody could renew meanwhile, and the clocks stopped.
            try await Task.sleep(for: .seconds(5))
            #expect(try await host.accmon(["claims"]).stdout.contains(held.claimID!))
            try await fleet.broker.restart()
            let again = try fleet.claimer("ci")
            let renewed = try #require(try await Self.askUntilAnswered(again, Self.renew(held.claimID!)), "\(host.logTail())")
            #expect(renewed.unknown == [], "\(renewed)")
            let listed = try await host.accmon(["claims"])
            #expect(listed.stdout.contains(held.claimID!) && listed.stdout.contains("ci"), "\(listed)")
        }

        @Test func aBridgeKilledMidClaimTakesNothing() async throws {
            let fleet = try await ClaimFleet(lease: Self.lease)
            let host = fleet.hosts[0]
            _ = try await RemoteClaims.plug("K1", on: host)
            #expect(await fleet.waitUntilTakingRequests(), "\(host.logTail())")
            let ci = try fleet.claimer("ci")
            let held = try #require(try ci.ask(RemoteClaims.byFilter("K1"), host: "lab-1"))
            try #require(held.kind == .held, "\(held)")
            host.killBridge()
            try await Task.sleep(for: .seconds(4))
            try host.startBridge()
            // The restarted bridge finds the claim in accmond (kept with its session) and gives it a fresh lease.
            let renewed = try #require(try await Self.askUntilAnswered(ci, Self.renew(held.claimID!)), "\(host.logTail())")
            #expect(renewed.unknown == [], "\(renewed)")
            let listed = try await host.accmon(["claims"])
            #expect(listed.stdout.contains(held.claimID!) && listed.stdout.contains("ci"), "\(listed)")
            var states: [RemoteClaimState] = []
            #expect(await eventuallyHolds { states = (try? ci.readClaims(timeout: 0.3)) ?? []; return states.count == 1 })
            #expect(states.first?.holder == Party(user: "ci", remote: true), "\(states)")
            // It still ends when ci stops renewing, and is released in ci's name.
            #expect(await eventuallyHolds(timeout: .seconds(10)) { (try? await host.accmon(["claims"]).stdout) == "no claims\n" })
        }
    }
}

extension BridgeProcessTests.RemoteClaimLeases {
    @Test func anAccmondKilledMidClaimTakesNothing() async throws {
        let fleet = try await ClaimFleet(lease: Self.lease)
        let host = fleet.hosts[0]
        _ = try await BridgeProcessTests.RemoteClaims.plug("D1", on: host)
        #expect(await fleet.waitUntilTakingRequests(), "\(host.logTail())")
        let ci = try fleet.claimer("ci")
        let held = try #require(try ci.ask(BridgeProcessTests.RemoteClaims.byFilter("D1"), host: "lab-1"))
        try #require(held.kind == .held, "\(held)")
        // accmond's state file is at most ~100 ms behind.
        try await Task.sleep(for: .milliseconds(300))
        try await host.restartDaemon(signal: SIGKILL)
        for _ in 0..<8 {
            let renewed = try #require(try await Self.askUntilAnswered(ci, Self.renew(held.claimID!)))
            #expect(renewed.unknown == [], "\(renewed)\n\(host.logTail())")
            try await Task.sleep(for: .milliseconds(500))
        }
        let listed = try await host.accmon(["claims"])
        #expect(listed.stdout.contains(held.claimID!) && listed.stdout.contains("ci (remote)"), "\(listed)")
    }
}
