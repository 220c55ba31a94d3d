import AccmonDevices
import AccmonProtocol
import AccmonTestSupport
import Testing

@testable import AccmondKit

/// One step of a random source history.
private enum Operation: CustomStringConvertible {
    /// A device (one of a few identities per key) appears under the key.
    case attach(key: Int, identity: Int)
    /// The device under the key goes.
    case detach(key: Int)
    /// The source reports the device already under the key again, unchanged.
    case duplicate(key: Int)
    /// The source reports the device under the key again with a changed property.
    case update(key: Int, name: String)

    var description: String {
        switch self {
        case .attach(let key, let identity): "attach(k\(key), #\(identity))"
        case .detach(let key): "detach(k\(key))"
        case .duplicate(let key): "duplicate(k\(key))"
        case .update(let key, let name): "update(k\(key), \(name))"
        }
    }
}

private let keyCount = 8
private let identitiesPerKey = 3

/// The accessories that can appear under each key: #0 and #2 share an accessory id but not a kind.
private let identities: [[Accessory]] = (0..<keyCount).map { key in
    (0..<identitiesPerKey).map { identity in
        Accessory(
            kind: identity == 2 ? .serial : .usb, accessoryID: "dev-\(key)-\(identity % 2)",
            name: "device \(key).\(identity)", serialNumber: "SN-\(key)-\(identity)", vendorID: "0403",
            productID: "600\(identity)", sysfsPath: "/sys/k\(key)")
    }
}
private let sourceKeys = (0..<keyCount).map { "/sys/k\($0)" }

/// What the registry must hold: the device under each key, with the connection id it got.
private struct Model {
    var connected: [Int: Accessory] = [:]
    var nextConnectionID: UInt64 = 1

    var snapshot: [Accessory] { connected.values.sorted { $0.connectionID < $1.connectionID } }
}

/// What a batch of histories exercised, so that the property cannot pass vacuously.
private struct Coverage {
    var connects = 0
    var disconnects = 0
    var replacements = 0  // a different accessory under a live key: disconnect then connect in one step
    var silentUpdates = 0
}

/// Runs one random history and checks the registry against the model at every step.
///
/// - Returns: whether every check passed (so that a failing seed stops at its first failure).
@discardableResult
private func checkRandomHistory(seed: UInt64, coverage: inout Coverage) -> Bool {
    var random = SplitMix64(seed: seed)
    var registry = Registry()
    var model = Model()
    var replayed: [ConnectionID: Accessory] = [:]  // the state a client rebuilds from the events alone
    var updated: Set<ConnectionID> = []  // connections whose properties changed without an event
    var issued: Set<ConnectionID> = []
    var lastSequence: UInt64 = 0
    var history: [Operation] = []
    let length = 50 + Int(random.next(below: 151))

    /// What is wrong with the registry's snapshot, compared with the model and with the replayed events.
    func snapshotProblem() -> String? {
        let snapshot = registry.snapshot()
        return if snapshot.sequence != lastSequence {
            "snapshot sequence \(snapshot.sequence) != last event's \(lastSequence)"
        } else if snapshot.accessories != model.snapshot {
            "snapshot \(snapshot.accessories.map(\.connectionID)) differs from the model's "
                + "\(model.snapshot.map(\.connectionID))"
        } else if snapshot.accessories.count != replayed.count
            || !snapshot.accessories.allSatisfy({ replayed[$0.connectionID]?.accessoryID == $0.accessoryID })
        {
            "replayed connections \(replayed.keys.sorted()) differ from the snapshot's"
        } else if !snapshot.accessories.allSatisfy({
            updated.contains($0.connectionID) || replayed[$0.connectionID] == $0
        }) {
            "a replayed accessory differs from the snapshot's (and its properties were never updated)"
        } else {
            nil
        }
    }

    for step in 0..<length {
        let key = Int(random.next(below: UInt64(keyCount)))
        let operation: Operation
        switch random.next(below: 10) {
        case 0..<4: operation = .attach(key: key, identity: Int(random.next(below: UInt64(identitiesPerKey))))
        case 4..<7: operation = .detach(key: key)
        case 7..<9: operation = .duplicate(key: key)
        default: operation = .update(key: key, name: "renamed \(random.next(below: 1000))")
        }
        history.append(operation)
        // Built only for a report: string interpolation on every step would dominate the run time.
        func where_() -> String { "seed \(seed) step \(step), last operations \(history.suffix(6))" }

        // Apply to the registry and to the model; work out the events the model expects.
        var expected: [(AccessoryEvent.Change, Accessory)] = []
        let events: [AccessoryEvent]
        switch operation {
        case .attach(let key, let identityIndex):
            let accessory = identities[key][identityIndex]
            events = registry.attach(key: sourceKeys[key], accessory)
            if let current = model.connected[key], current.accessoryID == accessory.accessoryID,
                current.kind == accessory.kind
            {
                var kept = accessory
                kept.connectionID = current.connectionID
                model.connected[key] = kept
                if kept != current { updated.insert(kept.connectionID) }
            } else {
                if let current = model.connected.removeValue(forKey: key) { expected.append((.disconnect, current)) }
                var new = accessory
                new.connectionID = ConnectionID(model.nextConnectionID)
                model.nextConnectionID += 1
                model.connected[key] = new
                expected.append((.connect, new))
            }
        case .detach(let key):
            events = registry.detach(key: sourceKeys[key])
            if let current = model.connected.removeValue(forKey: key) { expected.append((.disconnect, current)) }
        case .duplicate(let key):
            guard let current = model.connected[key] else { continue }
            var again = current
            again.connectionID = ConnectionID(0)  // a source does not know connection ids
            events = registry.attach(key: sourceKeys[key], again)
        case .update(let key, let name):
            guard var current = model.connected[key] else { continue }
            current.name = name
            events = registry.attach(key: sourceKeys[key], current)
            model.connected[key] = current
            updated.insert(current.connectionID)
        }

        if events.count == 2 { coverage.replacements += 1 }
        if events.isEmpty, case .update = operation { coverage.silentUpdates += 1 }

        // The events are the model's, numbered one after another.
        guard events.count == expected.count else {
            Issue.record("\(where_()): events \(events.map(\.change)), expected \(expected.map(\.0))")
            return false
        }
        for (event, (change, accessory)) in zip(events, expected) {
            let ok = event.change == change && event.accessory == accessory && event.sequence == lastSequence + 1
            #expect(ok, "\(where_()): got \(event.change) seq \(event.sequence) of \(event.accessory.connectionID)")
            if !ok { return false }
            lastSequence = event.sequence

            // Replay: a disconnect ends a live connection; a connect starts a connection never seen before.
            let id = event.accessory.connectionID
            switch event.change {
            case .connect:
                coverage.connects += 1
                let fresh = issued.insert(id).inserted && replayed[id] == nil
                #expect(fresh, "\(where_()): connection \(id) connected twice")
                if !fresh { return false }
                replayed[id] = event.accessory
            case .disconnect:
                coverage.disconnects += 1
                let live = replayed.removeValue(forKey: id) != nil && registry.key(of: id) == nil
                #expect(live, "\(where_()): disconnect of \(id), which is not connected or stays connected")
                if !live { return false }
            }
        }

        // The registry's view is the model's, and the events alone rebuild it. A snapshot copies every accessory,
        // so it is compared every few steps and at the end, which keeps 2,000 histories to a couple of seconds.
        if registry.sequence != lastSequence || registry.count != model.connected.count {
            Issue.record("\(where_()): sequence \(registry.sequence) or count \(registry.count) is off")
            return false
        }
        if step % 8 == 7, let problem = snapshotProblem() {
            Issue.record("\(where_()): \(problem)")
            return false
        }
    }
    if let problem = snapshotProblem() {
        Issue.record("seed \(seed), at the end of \(history.count) operations: \(problem)")
        return false
    }
    return true
}

@Test func registryAgreesWithAModelOverRandomHistories() {
    let masterSeed: UInt64 = 0xACC0_2026
    var seeds = SplitMix64(seed: masterSeed)
    var failures = 0
    var coverage = Coverage()
    for _ in 0..<2_000 {
        if !checkRandomHistory(seed: seeds.next(), coverage: &coverage) {
            failures += 1
            if failures >= 3 { break }  // a few seeds to replay are enough
        }
    }
    #expect(failures == 0, "master seed \(masterSeed)")
    #expect(coverage.connects > 10_000 && coverage.disconnects > 10_000, "\(coverage)")
    #expect(coverage.replacements > 1_000 && coverage.silentUpdates > 1_000, "\(coverage)")
}

/// One history on its own: put a seed printed by a failure here to replay it.
@Test func registryAgreesWithAModelOverOneChosenHistory() {
    var coverage = Coverage()
    #expect(checkRandomHistory(seed: 0x5EED, coverage: &coverage))
}
