import AccmonProtocol
import AccmonTestSupport
import Foundation
import Testing

@testable import AccmondKit

/// The state file (``PersistedState/json()``): random states, with every awkward string, must come back whole.
@Suite("State file encoding")
struct PersistedStateTests {
    static func randomState(_ random: inout SplitMix64) -> PersistedState {
        func below(_ bound: Int) -> Int { Int(random.next(below: UInt64(bound))) }
        func pick(_ values: [String]) -> String { values[below(values.count)] }
        let texts = [
            "", "FT232R USB UART", "quote \" back\\slash", "/dev/serial/by-id/x", "tab\tnl\ncr\r\u{1}",
            "é€🎹", "\u{7F}del", String(repeating: "long ", count: 60),
        ]
        func accessory() -> Accessory {
            Accessory(
                kind: AccessoryKind.allCases[below(AccessoryKind.allCases.count)], accessoryID: pick(texts),
                connectionID: ConnectionID(random.next()), name: pick(texts), manufacturer: pick(texts),
                modelNumber: pick(texts), serialNumber: pick(texts), firmwareRevision: pick(texts),
                hardwareRevision: pick(texts), vendorID: pick(["", "1209"]), productID: pick(["", "a000"]),
                protocolStrings: (0..<below(3)).map { _ in pick(texts) },
                deviceNodes: (0..<below(3)).map { _ in pick(texts) }, sysfsPath: pick(texts), portPath: pick(texts),
                interfaceNumber: pick(["", "00"]), descriptorsSHA256: pick(["", String(repeating: "ab", count: 32)]))
        }
        func optional(_ values: [String]) -> String? { below(2) == 0 ? nil : pick(values) }
        let sessions = (0..<below(4)).map { _ in
            PersistedState.PreservedEntry(
                uid: UInt32(random.next(below: 1 << 32)),
                gids: (0..<below(4)).map { _ in UInt32(random.next(below: 70_000)) },
                restoreID: pick(texts), clientName: pick(texts),
                filter: AccessoryFilter(
                    kind: below(2) == 0 ? nil : AccessoryKind.allCases[below(AccessoryKind.allCases.count)],
                    vendorID: optional(["1209", "05ac"]), productID: optional(["a000"]),
                    protocolString: optional(texts)),
                acknowledged: random.next(), known: (0..<below(4)).map { _ in accessory() },
                replay: (0..<below(4)).map { _ in
                    PersistedState.ReplayedEvent(
                        change: below(2) == 0 ? .connect : .disconnect, seq: random.next(), accessory: accessory())
                },
                preservedAt: pick(["0", "1764500000", "1764500000.25", "1764500123.456789", "1e-7", "-3.5", "1e300"])
                    .doubleValue)
        }
        return PersistedState(
            sequenceCeiling: random.next(), connectionCeiling: random.next(),
            connected: (0..<below(4)).map { _ in PersistedState.ConnectedEntry(key: pick(texts), accessory: accessory())
            },
            sessions: sessions)
    }

    @Test func randomStatesReadBackWhole() throws {
        let seed = SplitMix64.testSeed()
        var random = SplitMix64(seed: seed)
        for _ in 0..<500 {
            let state = Self.randomState(&random)
            let bytes = try state.json()
            let decoded = try JSONDecoder().decode(PersistedState.self, from: Data(bytes))
            #expect(decoded == state, "ACCMON_TEST_SEED=\(seed)")
        }
    }
}

extension String {
    fileprivate var doubleValue: Double { Double(self)! }
}
