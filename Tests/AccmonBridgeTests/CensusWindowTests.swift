import AccmonMQTT
import AccmonTestSupport
import Foundation
import Testing

extension BridgeProcessTests {
    /// The census's window (docs/MQTT.md §5): a reader asks the bridges to spread their answers over it and waits it;
    /// hosts known only through the census are all found, or the read says it may have missed some and exits 1.
    /// Against mosquitto, with hosts that publish nothing retained (as a cluster node's reader sees the hosts whose
    /// bridge is on another node).
    @Suite struct CensusWindows {
        private static func names(_ count: Int) -> [String] { (0..<count).map { String(format: "far-%04d", $0) } }

        private func list(_ broker: Mosquitto, _ extra: [String] = []) async throws -> CommandResult {
            try await run(
                try Binaries.accmon, ["list", "--broker", broker.url, "--json"] + extra, in: broker.directory,
                timeout: .seconds(60))
        }

        /// Half the bridges answer at once, half near the window's end: a lull longer than the quiet time after an
        /// answer does not end the census (a request without a window, as an older reader sends, gets the same lull,
        /// 0.3 s). Every host is found and the read is whole.
        @Test func hostsThatAnswerAnywhereInTheWindowAreAllFound() async throws {
            let broker = try await Mosquitto.start()
            let answerer = try await CensusAnswerer(broker: broker, hosts: Self.names(30)) { request, host in
                host % 2 == 0 ? 0 : 0.9 * (request.window ?? 0.3 / 0.9)
            }
            defer { answerer.stop() }
            let listed = try await list(broker)
            #expect(listed.termination == .exited(0), "\(listed)")
            #expect(try fleetHosts(listed.stdout).keys.sorted() == Self.names(30), "\(listed)")
            let request = try #require(answerer.received.first)
            #expect(request.window == CensusWindow.shortest && request.host == nil, "\(answerer.received)")
        }

        /// Bridges still answering when the longest wait ends (the window, then as long again, 1 s at least): the
        /// read names the census as cut short and exits 1 after its output.
        @Test func bridgesStillAnsweringWhenTheCensusEndsMakeTheReadIncomplete() async throws {
            let broker = try await Mosquitto.start()
            let answerer = try await CensusAnswerer(broker: broker, hosts: Self.names(100)) { _, host in
                0.04 * Double(host)
            }
            defer { answerer.stop() }
            let listed = try await list(broker, ["--census-wait", "0.2"])
            #expect(listed.termination == .exited(1), "\(listed)")
            #expect(
                listed.stderr.contains("bridges still answered the census when it ended 1.2 s after its request"),
                "\(listed.stderr)")
            #expect(listed.stderr.components(separatedBy: "bridges still answered").count == 2, "\(listed.stderr)")
            #expect(listed.stderr.contains("the fleet view above is incomplete"), "\(listed.stderr)")
            let found = try fleetHosts(listed.stdout).count
            #expect(found > 20 && found < 100, "\(found)")
        }

        /// More bridges answer than the window carries through the broker's queue (`--broker-queue 16`: room for 6
        /// at once, 0.05 s at 5,000 answers per second: 256): the reader asks again in a window sized for twice the
        /// answers, and the read is whole. With the window given (`--census-wait 0.1`), no other round: the read
        /// says answers may have been dropped and exits 1.
        @Test func moreBridgesThanTheWindowCarriesAreAskedAgainInALargerWindow() async throws {
            let broker = try await Mosquitto.start()
            let answerer = try await CensusAnswerer(broker: broker, hosts: Self.names(700)) { request, _ in
                var random = SystemRandomNumberGenerator()
                return Double(request.answerDelay(using: &random)) / 1e9
            }
            defer { answerer.stop() }
            let listed = try await list(broker, ["--broker-queue", "16"])
            #expect(listed.termination == .exited(0), "\(listed)")
            #expect(try fleetHosts(listed.stdout).count == 700, "\(listed.stderr)")
            let windows = answerer.received.map { $0.window ?? -1 }
            #expect(windows == [CensusWindow.shortest, CensusWindow.seconds(hosts: 1400, room: 6)], "\(windows)")

            let given = try await list(broker, ["--broker-queue", "16", "--census-wait", "0.1"])
            #expect(given.termination == .exited(1), "\(given)")
            #expect(
                given.stderr.contains(
                    "700 bridges answered the census, more than its window of 0.1 s carries through a broker queue "
                        + "of 16 messages"), "\(given.stderr)")
            #expect(answerer.received.count == 3)
        }

        /// A real bridge answers a request naming its host, within the window, and not one naming another host.
        @Test func aBridgeAnswersOnlyARequestForItsHostOrForEveryHost() async throws {
            let broker = try await Mosquitto.start()
            let host = try await BridgedHost.start(name: "lab-1", broker: broker.url)
            #expect(try await waitForFleet([host], broker: broker).isEmpty, "\(host.logTail())")
            let answerTopic = "accmon/$readers/probe/census"
            let subscriber = try ChildProcess(
                URL(fileURLWithPath: "/usr/bin/mosquitto_sub"),
                ["-V", "5", "-p", "\(broker.port)", "-t", answerTopic, "-F", "%p"], name: "census-sub",
                directory: broker.directory)
            defer { subscriber.kill() }
            func ask(_ request: String) async throws {
                let published = try await run(
                    URL(fileURLWithPath: "/usr/bin/mosquitto_pub"),
                    ["-V", "5", "-p", "\(broker.port)", "-t", "accmon/$census/probe", "-m", request,
                     "-D", "publish", "response-topic", answerTopic, "-D", "publish", "correlation-data", "c"],
                    in: broker.directory)
                #expect(published.termination == .exited(0), "\(published)")
            }
            func answers() -> Int {
                subscriber.stdout.split(separator: "\n").filter { $0.hasPrefix(#"{"accessories""#) }.count
            }
            // Its own host, at once, until the subscriber (subscribed at a moment it does not say) hears it.
            var primed = false
            for _ in 0..<25 where !primed {
                try await ask(#"{"host":"lab-1"}"#)
                primed = await eventuallyHolds(timeout: .milliseconds(200)) { answers() > 0 }
            }
            #expect(primed && subscriber.stdout.contains(#""host":"lab-1""#), "\(subscriber.stdout)")
            try await Task.sleep(for: .milliseconds(300))
            var heard = answers()
            // Its own host, within the window.
            try await ask(#"{"host":"lab-1","window":0.5}"#)
            #expect(await eventuallyHolds(timeout: .seconds(3)) { answers() == heard + 1 }, "\(subscriber.stdout)")
            heard += 1
            // Another host: no answer in twice its window.
            try await ask(#"{"host":"lab-9","window":0.5}"#)
            try await Task.sleep(for: .seconds(1))
            #expect(answers() == heard, "\(subscriber.stdout)")
            // Every host (a request without a window, as an older reader sends): answered.
            try await ask("{}")
            #expect(await eventuallyHolds(timeout: .seconds(3)) { answers() == heard + 1 }, "\(subscriber.stdout)")
        }
    }
}
