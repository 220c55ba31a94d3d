import AccmonClient
import AccmonProtocol
import AccmonTestSupport
import Foundation
import Testing

/// Property: whenever a client subscribes, its snapshot plus the events that follow is exactly the daemon's truth,
/// even while accessories are plugged and unplugged at the same moment.
@Suite("Snapshot and stream atomicity", .timeLimit(.minutes(1)))
struct SnapshotAtomicityTests {
    static let rounds = 20

    /// Filters the clients pick from: kinds, vendor ids written differently from the accessories' (leading zero,
    /// case), protocols, and combinations.
    static let filters: [AccessoryFilter] = [
        .all,
        AccessoryFilter(kind: .usb),
        AccessoryFilter(kind: .serial),
        AccessoryFilter(vendorID: "403"),
        AccessoryFilter(vendorID: "1A86"),
        AccessoryFilter(protocolString: "com.acme.gps"),
        AccessoryFilter(kind: .bluetoothHID, protocolString: "com.acme.sensor"),
        AccessoryFilter(kind: .usb, vendorID: "0403", protocolString: "com.acme.sensor"),
    ]

    @Test func snapshotPlusEventsEqualsDaemonListUnderConcurrentPlugs() async throws {
        let seed = SplitMix64.testSeed()
        var rng = SplitMix64(seed: seed)
        let replay = "seed \(seed) (replay with ACCMON_TEST_SEED=\(seed))"
        let daemon = try await Accmond.start()
        let bag = ConnectionBag()
        let driver = bag.add(try await daemon.connect("driver"))
        var plugged: [ConnectionID] = []  // what the driver has connected and not yet disconnected
        var totalEventsApplied = 0
        var nonEmptySnapshots = 0
        var clientsChecked = 0
        var anyRoundFailed = false

        for round in 0..<Self.rounds {
            let context = "\(replay), round \(round)"
            let steps = Int.random(in: 15...45, using: &rng)
            let progress = Progress()

            // Clients subscribe at random moments of the driver's run (some before it starts, some after it ends).
            let clientCount = Int.random(in: 2...6, using: &rng)
            var clientTasks: [Task<ClientRun, any Error>] = []
            for index in 0..<clientCount {
                let filter = Self.filters.randomElement(using: &rng)!
                let after = Int.random(in: 0...steps, using: &rng)
                clientTasks.append(
                    Task {
                        await progress.wait(until: after)
                        let connection = bag.add(try await daemon.connect("client-\(round)-\(index)"))
                        let subscription = try await connection.subscribe(filter)
                        return ClientRun(
                            index: index, filter: filter, subscribedAfter: after, connection: connection,
                            log: EventLog(subscription))
                    })
            }

            // The driver: bursts of 1 to 3 concurrent connects and disconnects on its own connection.
            var driverRNG = SplitMix64(seed: rng.next())
            let startPlugged = plugged
            let driverTask = Task { () throws -> [ConnectionID] in
                var plugged = startPlugged
                for step in 0..<steps {
                    let burst = Int.random(in: 1...3, using: &driverRNG)
                    var connects: [Accessory] = []
                    var disconnects: [ConnectionID] = []
                    for item in 0..<burst {
                        if plugged.count > disconnects.count && Int.random(in: 0..<100, using: &driverRNG) < 45 {
                            var target: ConnectionID
                            repeat {
                                target = plugged.randomElement(using: &driverRNG)!
                            } while disconnects.contains(target)
                            disconnects.append(target)
                        } else {
                            connects.append(Self.randomAccessory(&driverRNG, name: "r\(round)-s\(step)-\(item)"))
                        }
                    }
                    let added = try await withThrowingTaskGroup(of: ConnectionID?.self) { group in
                        for accessory in connects { group.addTask { try await driver.simulateConnect(accessory) } }
                        for id in disconnects {
                            group.addTask {
                                try await driver.simulateDisconnect(id)
                                return nil
                            }
                        }
                        var added: [ConnectionID] = []
                        for try await id in group { if let id { added.append(id) } }
                        return added
                    }
                    plugged.removeAll { disconnects.contains($0) }
                    plugged += added
                    await progress.advance()
                }
                return plugged
            }
            let driverResult = await driverTask.result
            await progress.finish()  // releases waiting clients even if the driver failed
            plugged = try driverResult.get()
            var clients: [ClientRun] = []
            for task in clientTasks { clients.append(try await task.value) }

            // Sentinels, plugged after the driver stopped, one per filter in use: a client that has received every
            // sentinel its filter matches has received every event up to the final sequence number.
            var sentinels: [Accessory] = []
            for filter in Set(clients.map(\.filter)) {
                var sentinel = Self.sentinel(matching: filter, name: "sentinel-r\(round)-\(sentinels.count)")
                try #require(filter.matches(sentinel), "test bug: sentinel does not match \(filter)")
                sentinel.connectionID = try await driver.simulateConnect(sentinel)
                sentinels.append(sentinel)
            }
            let finalSequence = try await driver.status().sequence
            let everything = try await driver.list()
            #expect(everything.sequence == finalSequence, "\(context): list and status disagree on the sequence")

            var roundFailed = false
            for client in clients {
                let clientContext =
                    "\(context), client \(client.index) (filter \(client.filter), subscribed after step "
                    + "\(client.subscribedAfter) of \(steps), snapshot seq \(client.log.snapshot.sequence))"
                let awaited = Set(sentinels.filter(client.filter.matches).map(\.connectionID))
                let caughtUp = await client.log.waitUntil { events in
                    awaited.isSubset(of: events.filter { $0.change == .connect }.map(\.accessory.connectionID))
                }
                #expect(caughtUp, "\(clientContext): the sentinel events did not arrive within 10 s")

                let expected = try await driver.list(client.filter)
                let outcome = Self.replay(client.log.snapshot, client.log.events, filter: client.filter)
                var problems = outcome.problems
                if let late = client.log.events.first(where: { $0.sequence > finalSequence }) {
                    problems.append("event seq \(late.sequence) after the final sequence \(finalSequence)")
                }
                if outcome.view != expected.accessories {
                    problems.append(
                        "view \(Self.summary(outcome.view)) != daemon list \(Self.summary(expected.accessories))")
                }
                let locallyFiltered = everything.accessories.filter(client.filter.matches)
                if expected.accessories != locallyFiltered {
                    problems.append(
                        "daemon list with filter \(Self.summary(expected.accessories)) != unfiltered list filtered"
                            + " here \(Self.summary(locallyFiltered))")
                }
                #expect(problems.isEmpty, "\(clientContext): \(problems.prefix(5).joined(separator: "; "))")
                roundFailed = roundFailed || !problems.isEmpty || !caughtUp
                totalEventsApplied += client.log.events.count
                if !client.log.snapshot.accessories.isEmpty { nonEmptySnapshots += 1 }
                clientsChecked += 1
                client.connection.close()
            }
            if roundFailed {
                anyRoundFailed = true
                break  // one failing round is enough to read; the seed replays it
            }

            for sentinel in sentinels { try await driver.simulateDisconnect(sentinel.connectionID) }
        }

        // The property is only worth something if clients really saw both halves.
        guard !anyRoundFailed else { return }
        #expect(clientsChecked >= Self.rounds * 2, "\(replay)")
        #expect(totalEventsApplied > 100, "\(replay): too few events reached clients to test anything")
        #expect(nonEmptySnapshots > 5, "\(replay): too few non-empty snapshots to test anything")
        bag.closeAll()
    }

    struct ClientRun: Sendable {
        var index: Int
        var filter: AccessoryFilter
        var subscribedAfter: Int
        var connection: AccmonConnection
        var log: EventLog
    }

    /// Applies `events` to `snapshot` as a client would, listing every rule broken on the way.
    static func replay(
        _ snapshot: Snapshot, _ events: [AccessoryEvent], filter: AccessoryFilter
    )
        -> (view: [Accessory], problems: [String])
    {
        var problems: [String] = []
        var view: [ConnectionID: Accessory] = [:]
        for accessory in snapshot.accessories {
            if view.updateValue(accessory, forKey: accessory.connectionID) != nil {
                problems.append("snapshot lists connection \(accessory.connectionID) twice")
            }
            if !filter.matches(accessory) { problems.append("snapshot holds \(accessory.connectionID), not matching") }
        }
        var last = snapshot.sequence
        for event in events {
            let id = event.accessory.connectionID
            if event.sequence <= snapshot.sequence {
                problems.append("event seq \(event.sequence) not after the snapshot's seq \(snapshot.sequence)")
            }
            if event.sequence <= last { problems.append("event seq \(event.sequence) after seq \(last)") }
            last = event.sequence
            if !filter.matches(event.accessory) { problems.append("event seq \(event.sequence) does not match") }
            switch event.change {
            case .connect:
                if view[id] != nil { problems.append("connect seq \(event.sequence) of \(id), already in view") }
                view[id] = event.accessory
            case .disconnect:
                if let known = view.removeValue(forKey: id) {
                    if known != event.accessory {
                        problems.append(
                            "disconnect seq \(event.sequence) of \(id) carries other fields than its connect")
                    }
                } else {
                    problems.append("disconnect seq \(event.sequence) of \(id), not in view")
                }
            }
        }
        return (view.values.sorted { $0.connectionID < $1.connectionID }, problems)
    }

    static func summary(_ accessories: [Accessory]) -> String {
        "[" + accessories.map { String($0.connectionID.rawValue) }.joined(separator: ",") + "]"
    }

    static func randomAccessory(_ rng: inout SplitMix64, name: String) -> Accessory {
        let protocols = ["com.acme.sensor", "com.acme.gps"].filter { _ in Bool.random(using: &rng) }
        let serial = Bool.random(using: &rng) ? String(rng.next() % 1_000_000) : ""
        return Accessory(
            kind: AccessoryKind.allCases.randomElement(using: &rng)!, name: name,
            manufacturer: "Acme", serialNumber: serial,
            vendorID: ["0403", "1a86", "05ac", ""].randomElement(using: &rng)!,
            productID: String(format: "%04x", Int.random(in: 0...0xFFFF, using: &rng)),
            protocolStrings: protocols, deviceNodes: ["/dev/sim\(rng.next() % 100)"])
    }

    /// An accessory that `filter` matches.
    static func sentinel(matching filter: AccessoryFilter, name: String) -> Accessory {
        Accessory(
            kind: filter.kind ?? .usb, name: name, vendorID: filter.vendorID ?? "ffff",
            productID: filter.productID ?? "fffe", protocolStrings: filter.protocolString.map { [$0] } ?? [])
    }
}

/// How many steps the driver has taken, so that clients can wait for "after step k".
actor Progress {
    private var done = 0
    private var waiters: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []

    func advance() {
        done += 1
        let ready = waiters.filter { $0.count <= done }
        waiters.removeAll { $0.count <= done }
        for waiter in ready { waiter.continuation.resume() }
    }

    /// Releases every waiter.
    func finish() {
        done = Int.max
        for waiter in waiters { waiter.continuation.resume() }
        waiters = []
    }

    func wait(until count: Int) async {
        if done >= count { return }
        await withCheckedContinuation { waiters.append((count, $0)) }
    }
}
