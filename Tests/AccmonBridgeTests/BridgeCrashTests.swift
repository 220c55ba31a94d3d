import AccmonClient
import AccmonMQTT
import AccmonProtocol
import AccmonTestSupport
import Foundation
import Glibc
import Testing

extension BridgeProcessTests {
    @Suite struct BridgeCrashes {
        /// The bridge killed with SIGKILL at a random moment of a plug storm, then started again, trial after trial
        /// (`ACCMON_BRIDGE_TRIALS`, default 50): each time the broker's retained state ends equal to the truth. accmond
        /// kept the session for the restore id and replayed what the dead bridge had not acknowledged.
        /// On ejabberd, a fifth of the trials (its broker is the slower to start and to take publications).
        @Test(arguments: BrokerKind.allCases) func bridgeKilledMidStormLosesNothing(kind: BrokerKind) async throws {
            let configured = ProcessInfo.processInfo.environment["ACCMON_BRIDGE_TRIALS"].flatMap { Int($0) } ?? 50
            let trials = kind == .mosquitto ? configured : max(1, configured / 5)
            let name = kind == .mosquitto ? "crash/1" : "crash-1"
            let broker = try await startBroker(kind, bridges: [name])
            let host = try await BridgedHost.start(name: name, on: broker, settings: ["keepAlive": "5"])
            let seed = SplitMix64.testSeed()
            var random = SplitMix64(seed: seed)
            let connection = try await host.connect()
            defer { connection.close() }
            var plugger = Plugger(connection)
            #expect(await waitFor("mqtt: synchronized") { host.bridgeLog }, "\(host.logTail())")
            var restored = 0
            for trial in 1...trials {
                let killAfter = Duration.milliseconds(Int(random.next(below: 40)))
                let stormSeed = random.next()
                let storm = Task { [plugger] in
                    var plugger = plugger
                    var random = SplitMix64(seed: stormSeed)
                    try await plugger.storm(steps: 25, target: 15, using: &random)
                    return plugger
                }
                try await Task.sleep(for: killAfter)
                host.killBridge()
                plugger = try await storm.value
                try host.startBridge(logLevel: "info")
                #expect(await waitFor("mqtt: synchronized") { host.bridgeLog }, "\(host.logTail())")
                let difference = try await waitForFleet([host], broker: broker, timeout: .seconds(20))
                #expect(difference.isEmpty, "trial \(trial) (seed \(seed)): \(difference)\n\(host.logTail())")
                if !difference.isEmpty { break }
                if host.bridgeLog.contains("session 'accmon-mqtt' restored") { restored += 1 }
            }
            #expect(restored == trials, "every restart reclaimed the session")
        }
    }

    @Suite struct DaemonRestarts {
        /// accmond stopped (SIGTERM) or killed (SIGKILL) and started again on the same state: the bridge reclaims its
        /// session through the restore id; the simulated accessories, which stand for hardware, stay connected with
        /// their connection ids, and the broker keeps showing them.
        @Test(arguments: [SIGTERM, SIGKILL]) func theBridgeResumesThroughItsRestoreID(signal: Int32) async throws {
            let broker = try await Mosquitto.start()
            let host = try await BridgedHost.start(name: "lab-5", broker: broker.url)
            var random = SplitMix64(seed: SplitMix64.testSeed())
            do {
                let connection = try await host.connect()
                defer { connection.close() }
                var plugger = Plugger(connection)
                try await plugger.storm(steps: 20, target: 12, using: &random)
                try await plugger.plug(using: &random)  // at least one connected
            }
            #expect(try await waitForFleet([host], broker: broker).isEmpty)
            #expect(try await fleetState(broker).hosts["lab-5"]?.accessories.isEmpty == false)
            let before = try await host.truth()
            // accmond's state file is at most ~100 ms behind (PROTOCOL §11): a SIGKILL sooner could take the last
            // plugs with it, which the simulated accessories (kept across restarts, as hardware) would then miss.
            if signal == SIGKILL { try await Task.sleep(for: .milliseconds(300)) }

            try await host.restartDaemon(signal: signal)
            #expect(
                await waitFor("accmond: session 'accmon-mqtt' restored") { host.bridgeLog }, "\(host.logTail())")
            #expect(host.bridgeLog.contains("reconnecting in"), "\(host.logTail())")
            #expect(try await waitForFleet([host], broker: broker).isEmpty, "\(host.logTail())")
            #expect(try await host.truth() == before, "simulated accessories outlive the daemon")

            let connection = try await host.connect()
            defer { connection.close() }
            var plugger = Plugger(connection)
            try await plugger.storm(steps: 10, target: 8, using: &random)
            try await plugger.plug(using: &random)
            let difference = try await waitForFleet([host], broker: broker)
            #expect(difference.isEmpty, "\(difference)\n\(host.logTail())")
            #expect(try await fleetState(broker).hosts["lab-5"]?.accessories.isEmpty == false)
        }
    }
}
