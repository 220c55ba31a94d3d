import AccmonClient
import AccmonMQTT
import AccmonProtocol
import AccmonTestSupport
import Foundation
import Glibc
import Testing

/// Claims across the fleet through a real mosquitto with the password file and ACL of docs/MQTT.md §8, real
/// `accmond --simulate` hosts and their real bridges.
extension BridgeProcessTests {
    @Suite struct RemoteClaims {
        static func adapter(_ serial: String) -> Accessory {
            var accessory = Accessory(
                kind: .serial, name: "FT232R USB UART", serialNumber: serial, vendorID: "0403", productID: "6001")
            accessory.deviceNodes = ["/dev/ttyUSB-\(serial)"]
            accessory.accessoryID = accessory.derivedAccessoryID
            return accessory
        }

        static func plug(_ serial: String, on host: BridgedHost) async throws -> ConnectionID {
            let connection = try await host.connect("plugger")
            defer { connection.close() }
            return try await connection.simulateConnect(adapter(serial))
        }

        static func byFilter(_ serial: String, wait: Bool = false) -> RemoteClaimRequest {
            RemoteClaimRequest(op: .claim, nonce: "", serial: serial, wait: wait, reason: "test")
        }

        @Test(arguments: BrokerKind.allCases) func aRemoteClaimByFilterIsHeldShownRetainedAndReleased(
            kind: BrokerKind
        ) async throws {
            let fleet = try await ClaimFleet(on: kind)
            let host = fleet.hosts[0]
            let board = try await Self.plug("F1", on: host)
            #expect(await fleet.waitUntilTakingRequests(), "\(host.logTail())")
            let ci = try fleet.claimer("ci")
            let reply = try #require(try ci.ask(Self.byFilter("F1"), host: "lab-1"), "\(host.logTail())")
            #expect(reply.kind == .held && reply.accessories?.first?.connectionID == board, "\(reply)")
            #expect(reply.leaseSeconds == 30 && reply.renewSeconds == 10)
            let claimID = try #require(reply.claimID)
            let listed = try await host.accmon(["claims"])
            #expect(listed.stdout.contains("ci") && listed.stdout.contains(claimID), "\(listed)")
            // The claim state, retained, for every reader of the fleet.
            var states: [RemoteClaimState] = []
            #expect(await eventuallyHolds { states = (try? ci.readClaims(timeout: 0.3)) ?? []; return states.count == 1 })
            #expect(states.first?.holder.user == "ci" && states.first?.holder.remote == true, "\(states)")
            #expect(states.first?.connectionID == board.rawValue && states.first?.host == "lab-1")
            let released = try ci.ask(RemoteClaimRequest(op: .release, nonce: "", claimIDs: [claimID]), host: "lab-1")
            #expect(released?.kind == .released, "\(String(describing: released))")
            #expect(await eventuallyHolds { (try? ci.readClaims(timeout: 0.3))?.isEmpty == true })
            #expect(try await host.accmon(["claims"]).stdout == "no claims\n")
        }

        @Test func twoRemoteUsersAndALocalOneShareOneLine() async throws {
            let fleet = try await ClaimFleet()
            let host = fleet.hosts[0]
            _ = try await Self.plug("C1", on: host)
            #expect(await fleet.waitUntilTakingRequests(), "\(host.logTail())")
            let ci = try fleet.claimer("ci")
            let qa = try fleet.claimer("qa")
            let held = try #require(try ci.ask(Self.byFilter("C1"), host: "lab-1"))
            try #require(held.kind == .held, "\(held)")
            let conflict = try #require(try qa.ask(Self.byFilter("C1"), host: "lab-1"))
            #expect(conflict.kind == .error && conflict.code == "claim-conflict", "\(conflict)")
            #expect(conflict.holders?.first?.holder.user == "ci", "\(conflict)")
            // The holder hears of the contention, with the remote user's name.
            #expect(
                await eventuallyHolds {
                    try? ci.pump(milliseconds: 20)
                    return ci.takeInbox().contains { $0.kind == .contention && $0.by?.user == "qa" }
                })
            // A local claimer gets 75 naming the remote holder.
            let local = try await host.accmon(["claim", "--serial", "C1", "--", "true"])
            #expect(local.termination == .exited(75) && local.stderr.contains("ci"), "\(local)")
            // qa waits in line; ci releases; qa is granted.
            let waiting = try #require(try qa.ask(Self.byFilter("C1", wait: true), host: "lab-1"))
            #expect(waiting.kind == .waiting && waiting.position == 1, "\(waiting)")
            _ = try ci.ask(RemoteClaimRequest(op: .release, nonce: "", claimIDs: [held.claimID!]), host: "lab-1")
            #expect(
                await eventuallyHolds {
                    try? qa.pump(milliseconds: 20)
                    return qa.takeInbox().contains { $0.kind == .granted && $0.claimID == waiting.claimID }
                }, "\(host.logTail())")
            let listed = try await host.accmon(["claims"])
            #expect(listed.stdout.contains("qa") && !listed.stdout.contains(" ci "), "\(listed)")
        }

        /// The broker's ACL (mosquitto's, or ejabberd's form of it) keeps mallory off ci's request topic.
        @Test(arguments: BrokerKind.allCases) func aCapturedRequestReplayedByAnotherUserNeverClaimsInTheFirstUsersName(
            kind: BrokerKind
        ) async throws {
            let fleet = try await ClaimFleet(on: kind)
            let host = fleet.hosts[0]
            _ = try await Self.plug("R1", on: host)
            #expect(await fleet.waitUntilTakingRequests(), "\(host.logTail())")
            let ci = try fleet.claimer("ci")
            let mallory = try fleet.claimer("mallory")
            // mallory sends ci's request word for word (same nonce) on her own topic: it is hers, and she may not claim.
            var captured = Self.byFilter("R1")
            captured.nonce = "ci-nonce-1"
            let replayed = try #require(try mallory.ask(captured, host: "lab-1"), "\(host.logTail())")
            #expect(replayed.kind == .error && replayed.code == "no-match", "\(replayed)")
            // On ci's topic the broker refuses her (the ACL): nothing arrives, nothing is claimed.
            let request = try JSONEncoder().encode(captured)
            let published = try await run(
                URL(fileURLWithPath: "/usr/bin/mosquitto_pub"),
                [
                    "-p", String(fleet.broker.port), "-u", "mallory", "-P", "pw-mallory", "-V", "mqttv5", "-q", "1",
                    "-t", "accmon/lab-1/claim-requests/ci", "-D", "publish", "message-expiry-interval", "30",
                    "-m", String(decoding: request, as: UTF8.self),
                ], in: fleet.directory)
            // mosquitto_pub warns of a refusal (mosquitto: "Not authorized", ejabberd: "Topic Name invalid").
            #expect(published.termination == .exited(0) || published.stderr.contains("authoriz"), "\(published)")
            if kind == .ejabberd { #expect(published.stderr.contains("Topic Name invalid"), "\(published)") }
            try await Task.sleep(for: .milliseconds(500))
            #expect(try await host.accmon(["claims"]).stdout == "no claims\n")
            // ci's own request with that nonce is taken once; the same nonce again is a replay, ignored.
            let first = try #require(try ci.ask(captured, host: "lab-1"))
            try #require(first.kind == .held, "\(first)")
            let again = try ci.ask(captured, host: "lab-1", timeout: 1)
            #expect(again == nil, "a repeated nonce is not answered")
            // A request too big to be one is refused unread.
            var big = Self.byFilter("R1")
            big.reason = String(repeating: "x", count: 20_000)
            #expect(try ci.ask(big, host: "lab-1", timeout: 2) == nil)
            #expect(ci.takeInbox().contains { $0.kind == .error && $0.message?.contains("longer than 16384") == true })
            // mallory cannot renew or release ci's claim.
            let renewed = try #require(
                try mallory.ask(RemoteClaimRequest(op: .renew, nonce: "", claimIDs: [first.claimID!]), host: "lab-1"))
            #expect(renewed.unknown == [first.claimID!], "\(renewed)")
            let release = try #require(
                try mallory.ask(RemoteClaimRequest(op: .release, nonce: "", claimIDs: [first.claimID!]), host: "lab-1"))
            #expect(release.kind == .error, "\(release)")
            #expect(try await host.accmon(["claims"]).stdout.contains(first.claimID!))
        }

        @Test func aRetainedRequestOrOneWithoutExpiryIsNotTaken() async throws {
            let fleet = try await ClaimFleet()
            let host = fleet.hosts[0]
            _ = try await Self.plug("X1", on: host)
            #expect(await fleet.waitUntilTakingRequests(), "\(host.logTail())")
            var request = Self.byFilter("X1")
            request.nonce = "retained-1"
            let body = String(decoding: try JSONEncoder().encode(request), as: UTF8.self)
            for extra in [["-r", "-D", "publish", "message-expiry-interval", "30"], []] {
                let published = try await run(
                    URL(fileURLWithPath: "/usr/bin/mosquitto_pub"),
                    ["-p", String(fleet.broker.port), "-u", "ci", "-P", "pw-ci", "-V", "mqttv5", "-q", "1",
                     "-t", "accmon/lab-1/claim-requests/ci", "-m", body] + extra, in: fleet.directory)
                #expect(published.termination == .exited(0), "\(published)")
                request.nonce += "x"
            }
            // The retained one also reaches a bridge that starts later: still not taken.
            _ = await host.stopBridge()
            try host.startBridge()
            #expect(await fleet.waitUntilTakingRequests())
            try await Task.sleep(for: .milliseconds(500))
            #expect(try await host.accmon(["claims"]).stdout == "no claims\n", "\(host.logTail())")
        }
    }
}
