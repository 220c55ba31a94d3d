import AccmonClient
import AccmonDevices
import AccmonProtocol
import AccmonSys
import AccmonTestSupport
import Foundation
import Glibc
import Synchronization
import Testing

@testable import AccmonLogging
@testable import AccmondKit

@Suite("The service notifier's policy, in process")
struct ServiceNotifierTests {
    final class Recorder: Sendable {
        let sent = Mutex<[String]>([])
        let wakeups = Atomic<Int>(0)
        var messages: [String] { sent.withLock { $0 } }
    }

    private func makeNotifier(
        _ recorder: Recorder, watchdogMicroseconds: UInt64?, helperThreadName: String = "accmond-notify",
        onWake: @escaping @Sendable () -> Void = {}
    )
        throws -> ServiceNotifier
    {
        try ServiceNotifier(
            logger: Logger(label: "test", level: .critical), watchdogMicroseconds: watchdogMicroseconds,
            wakeLoop: {
                recorder.wakeups.add(1, ordering: .relaxed)
                onWake()
            },
            send: { state throws(Errno) in recorder.sent.withLock { $0.append(state) } },
            helperThreadName: helperThreadName)
    }

    @Test func watchdogPingsOnlyWhenTheLoopTurns() async throws {
        let recorder = Recorder()
        let notifier = try makeNotifier(recorder, watchdogMicroseconds: 20_000)
        try notifier.start()
        defer { notifier.finish() }
        // The helper asks every 10 ms, but a loop that does not turn answers nothing.
        #expect(await eventually(timeout: .seconds(5)) { recorder.wakeups.load(ordering: .relaxed) >= 5 })
        #expect(!recorder.messages.contains("WATCHDOG=1"), "pinged for a stuck loop: \(recorder.messages)")
        // One turn: READY=1 (the first turn) and one ping for the pending request.
        notifier.loopTurned(LoopTurn(accessories: 3, clients: 0, stopping: false))
        #expect(await eventually(timeout: .seconds(5)) { recorder.messages.contains("WATCHDOG=1") })
        #expect(recorder.messages.first == "READY=1\nSTATUS=Serving 0 clients; 3 accessories connected")
        // Still no other turn: no more pings, however many requests.
        let wakeups = recorder.wakeups.load(ordering: .relaxed)
        #expect(await eventually(timeout: .seconds(5)) { recorder.wakeups.load(ordering: .relaxed) >= wakeups + 5 })
        #expect(recorder.messages.filter { $0 == "WATCHDOG=1" }.count == 1, "\(recorder.messages)")
    }

    @Test func aLoopThatTurnsOnEveryWakeupPingsEveryTime() async throws {
        let recorder = Recorder()
        let box = Mutex<ServiceNotifier?>(nil)
        let notifier = try makeNotifier(recorder, watchdogMicroseconds: 20_000) {
            box.withLock { $0 }?.loopTurned(LoopTurn(accessories: 0, clients: 0, stopping: false))
        }
        box.withLock { $0 = notifier }
        try notifier.start()
        notifier.loopTurned(LoopTurn(accessories: 0, clients: 0, stopping: false))
        #expect(await eventually(timeout: .seconds(5)) { recorder.messages.filter { $0 == "WATCHDOG=1" }.count >= 5 })
        notifier.finish()
        box.withLock { $0 = nil }
    }

    @Test func statusUpdatesArePacedAndEndOnTheLatestCounts() async throws {
        let recorder = Recorder()
        let notifier = try makeNotifier(recorder, watchdogMicroseconds: nil)
        try notifier.start()
        defer { notifier.finish() }
        notifier.loopTurned(LoopTurn(accessories: 0, clients: 1, stopping: false))
        #expect(await eventually(timeout: .seconds(5)) { !recorder.messages.isEmpty })
        let clock = ContinuousClock()
        let start = clock.now
        for count in 1...5000 { notifier.loopTurned(LoopTurn(accessories: count, clients: 1, stopping: false)) }
        let last = "STATUS=Serving 1 client; 5000 accessories connected"
        // Generous: the suite runs beside every other test on 2 cores; the pacing bound below is what is checked.
        #expect(
            await eventually(timeout: .seconds(30)) { recorder.messages.last == last }, "\(recorder.messages.suffix(3))"
        )
        let elapsed = clock.now - start
        let statusCount = recorder.messages.filter { $0.hasPrefix("STATUS=") }.count
        // At most one per 100 ms, plus READY's.
        let allowed = Int(elapsed / .milliseconds(100)) + 2
        #expect(statusCount <= allowed, "\(statusCount) STATUS= updates in \(elapsed)")
        #expect(!recorder.messages.contains("WATCHDOG=1"))
    }

    @Test func aStormOfCountChangesWakesTheHelperAboutOncePerSpacing() async throws {
        let recorder = Recorder()
        // A name of its own: other tests' notifiers run in this process at the same time.
        let notifier = try makeNotifier(recorder, watchdogMicroseconds: nil, helperThreadName: "notify-storm")
        try notifier.start()
        defer { notifier.finish() }
        notifier.loopTurned(LoopTurn(accessories: 0, clients: 1, stopping: false))
        #expect(await eventually(timeout: .seconds(5)) { !recorder.messages.isEmpty })
        let helper = try #require(threadNamed("notify-storm"))
        let before = try voluntaryContextSwitches(ofThread: helper)
        // 2,000 changes over ≥ 400 ms: one turn every ≥ 200 µs, like a daemon in a plug storm.
        let clock = ContinuousClock()
        let start = clock.now
        for count in 1...2000 {
            notifier.loopTurned(LoopTurn(accessories: count, clients: 1, stopping: false))
            usleep(200)
        }
        let elapsed = clock.now - start
        #expect(
            await eventually(timeout: .seconds(30)) {
                recorder.messages.last == "STATUS=Serving 1 client; 2000 accessories connected"
            })
        // Each wake-up of the helper is one voluntary switch: about one per 100 ms of storm plus the last recheck,
        // where waking it for every change would make about 2,000.
        let switches = try voluntaryContextSwitches(ofThread: helper) - before
        let allowed = 2 * (Int(elapsed / .milliseconds(100)) + 3)
        #expect(switches <= allowed, "\(switches) wake-ups of the helper in \(elapsed) for 2,000 changes")
    }

    /// The id of this process's thread called `name`, from /proc/self/task/*/comm.
    private func threadNamed(_ name: String) -> String? {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []  // try?: none
        return tasks.first { task in
            let comm = try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8)  // try?: gone
            return comm?.trimmingCharacters(in: .whitespacesAndNewlines) == name
        }
    }

    private func voluntaryContextSwitches(ofThread task: String) throws -> Int {
        let status = try String(contentsOfFile: "/proc/self/task/\(task)/status", encoding: .utf8)
        let line = try #require(status.split(separator: "\n").first { $0.hasPrefix("voluntary_ctxt_switches:") })
        return try #require(Int(line.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)))
    }

    @Test func stoppingIsSentOnceAndNothingButItFollows() async throws {
        let recorder = Recorder()
        let notifier = try makeNotifier(recorder, watchdogMicroseconds: nil)
        try notifier.start()
        notifier.loopTurned(LoopTurn(accessories: 1, clients: 2, stopping: false))
        #expect(await eventually(timeout: .seconds(5)) { !recorder.messages.isEmpty })
        notifier.loopTurned(LoopTurn(accessories: 1, clients: 2, stopping: true))
        notifier.loopTurned(LoopTurn(accessories: 0, clients: 0, stopping: true))
        notifier.finish()
        #expect(
            recorder.messages == [
                "READY=1\nSTATUS=Serving 2 clients; 1 accessory connected",
                "STOPPING=1\nSTATUS=Stopping: saying goodbye to 2 clients",
            ], "\(recorder.messages)")
    }

    @Test func theFirstLoopTurnHasTheColdplugApplied() async throws {
        // A source whose start-up enumeration finds three accessories, delivered before start returns, as the udev
        // source does: the first end-of-turn report (which sends READY=1) already counts them.
        final class ColdplugSource: EventSource {
            let name = "coldplug"
            func start(delivering sink: EventSink) throws {
                sink.deliver(
                    (1...3).map { .attached(key: "test/\($0)", Accessory(kind: .usb, serialNumber: "c\($0)")) })
            }
            func stop() {}
        }
        let directory = try TemporaryDirectory()
        let turns = Mutex<[LoopTurn]>([])
        var configuration = DaemonConfiguration(
            socketPath: directory.file("accmond.sock"), simulate: false, watchesUdev: false,
            stateDirectory: nil, handlesSignals: false, logger: Logger(label: "test", level: .critical))
        configuration.notifiesServiceManager = false
        configuration.onLoopTurn = { turn in turns.withLock { $0.append(turn) } }
        let daemon = try Daemon(configuration: configuration, sources: [ColdplugSource()])
        let finished = Mutex(false)
        try startThread(name: "test-daemon") {
            try? daemon.run()  // try?: the assertions below see a daemon that did not run
            finished.withLock { $0 = true }
        }
        #expect(await eventually { !turns.withLock { $0 }.isEmpty }, "the loop never turned")
        #expect(turns.withLock { $0.first } == LoopTurn(accessories: 3, clients: 0, stopping: false))
        daemon.requestStop()
        #expect(await eventually { finished.withLock { $0 } })
        #expect(turns.withLock { $0.last?.stopping } == true)
    }
}
