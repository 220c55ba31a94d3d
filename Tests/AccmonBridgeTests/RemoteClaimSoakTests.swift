import AccmonClient
import AccmonMQTT
import AccmonProtocol
import AccmonTestSupport
import Foundation
import Glibc
import Testing

/// Claimers cycling `accmon claim --broker` on a fleet, each command checking that nobody else holds its accessory
/// (a file per host and connection, created exclusively, removed at its end); at the end, every claim has ended.
/// `make test`: 3 hosts of one accessory, 4 claimers, 8 s. `make soak`: `ACCMON_CLAIM_SOAK_HOSTS` (50),
/// `ACCMON_CLAIM_SOAK_CLAIMERS` (20), `ACCMON_CLAIM_SOAK_SECONDS` (300).
extension BridgeProcessTests {
    @Suite struct RemoteClaimSoak {
        static func setting(_ name: String, _ fallback: Int) -> Int {
            ProcessInfo.processInfo.environment[name].flatMap(Int.init) ?? fallback
        }

        @Test func claimersCyclingOnAFleetNeverHoldOneAccessoryTwiceAndEveryClaimEnds() async throws {
            let hostCount = Self.setting("ACCMON_CLAIM_SOAK_HOSTS", 3)
            let claimerCount = Self.setting("ACCMON_CLAIM_SOAK_CLAIMERS", 4)
            let seconds = Self.setting("ACCMON_CLAIM_SOAK_SECONDS", 8)
            let names = (0..<hostCount).map { String(format: "soak-%02d", $0) }
            let fleet = try await ClaimFleet(hosts: names)
            for host in fleet.hosts { _ = try await RemoteClaims.plug("SOAK", on: host) }
            #expect(await fleet.waitUntilTakingRequests())
            // Every host's accessory on the broker: a claimer that finds none would exit 1.
            #expect(await eventuallyHolds(timeout: .seconds(60)) {
                fleet.onlineAccessories(as: "qa").values.filter { !$0.isEmpty }.count == hostCount
            })
            let held = fleet.directory.file("held")
            try FileManager.default.createDirectory(atPath: held, withIntermediateDirectories: true)
            // Exit 99 when the accessory's file exists: someone else holds it now.
            let check =
                "set -C; f=\(held)/$ACCMON_CLAIM_HOST-$ACCMON_CLAIM_CONNECTIONS; : > \"$f\" || exit 99; "
                + "sleep 0.$(( $$ % 3 + 1 )); rm -f \"$f\""
            let deadline = ContinuousClock.now + .seconds(seconds)
            let logins = [try fleet.login("ci"), try fleet.login("qa")]
            let outcomes = try await withThrowingTaskGroup(of: [Int32: Int].self) { group in
                for index in 0..<claimerCount {
                    group.addTask {
                        var counts: [Int32: Int] = [:]
                        while ContinuousClock.now < deadline {
                            let result = try await run(
                                try Binaries.accmon,
                                ["claim"] + logins[index % 2]
                                    + ["--serial", "SOAK", "--timeout", "30", "--reason", "soak \(index)", "--", "sh", "-c", check],
                                in: fleet.directory, timeout: .seconds(90))
                            let code: Int32 = if case .exited(let status) = result.termination { status } else { -1 }
                            counts[code, default: 0] += 1
                            if code != 0 && code != 75 { print("claimer \(index): \(result)") }
                        }
                        return counts
                    }
                }
                var total: [Int32: Int] = [:]
                for try await counts in group { total.merge(counts, uniquingKeysWith: +) }
                return total
            }
            print("claim soak: \(hostCount) hosts, \(claimerCount) claimers, \(seconds) s: exits \(outcomes)")
            #expect(outcomes[99] == nil, "an accessory was held by two at once: \(outcomes)")
            #expect((outcomes[0] ?? 0) > 0 && Set(outcomes.keys).isSubset(of: [0, 75]), "\(outcomes)")
            for host in fleet.hosts {
                #expect(try await host.accmon(["claims"]).stdout == "no claims\n", "\(host.name)")
            }
            let reader = try fleet.claimer("qa")
            defer { reader.disconnect() }
            var left: [RemoteClaimState] = []
            #expect(
                await eventuallyHolds {
                    left = (try? reader.readClaims()) ?? [left.first].compactMap { $0 }
                    return left.isEmpty
                }, "\(left)")
        }
    }
}
