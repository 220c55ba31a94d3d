import AccmonLogging
import AccmonNodes
import AccmonSys
import AccmonTestSupport
import Foundation
import Glibc
import Testing

@testable import AccmondKit

/// accmond's node guard against a real helper that is killed in the middle of a release: the release fails, and the
/// guard asks the restarted helper what it holds and releases what no claim covers.
@Suite struct NodeLedgerTests {
    static let serial = HelperFixture.Port(
        name: "ttyUSB6", dev: "188:6", port: "1-2", properties: ["ACCMON_KIND": "serial"])

    /// The helper's own process: systemd-socket-activate, a child of the test bed script, execs it.
    static func helperPID(_ fixture: HelperFixture) throws -> pid_t {
        let script = try #require(fixture.helper?.pid)
        let children = try String(contentsOfFile: "/proc/\(script)/task/\(script)/children", encoding: .utf8)
        return try #require(children.split(separator: " ").compactMap { pid_t($0) }.first)
    }

    @Test func aReleaseLostWithAKilledHelperIsDoneOnceItIsBack() async throws {
        let fixture = try HelperFixture()
        try await fixture.start(allowing: "0", ports: [Self.serial])
        let path = try fixture.node("ttyUSB6", Self.serial.dev)
        let before = try await observedState(path, in: fixture.directory)
        var routing = NodeRouting(simulatedNodes: nil, helperSocket: fixture.socket)
        routing.helperTimeout = .milliseconds(500)
        let wakeup = try WakeupEvent()
        let results = Mailbox<NodeGuard.BatchResult>(wakeup: wakeup)
        let guardian = try NodeGuard(
            router: NodeRouter(routing), results: results, logger: Logger(label: "test", level: .critical))
        let holder = AccmondKit.NodeHolder(uid: 4001, gids: [4001, 20], grant: false)
        #expect(guardian.runNow([(.hold(path, holder), simulated: false)]).map(\.step) == [.done])
        #expect(try await observedState(path, in: fixture.directory) != before)

        // Killed mid-release: the request reaches a helper that never answers, then dies.
        let helper = try Self.helperPID(fixture)
        #expect(kill(helper, SIGSTOP) == 0)
        let batch = guardian.submit([(.release(path), simulated: false)])
        #expect(await eventually(timeout: .seconds(10)) { results.take().contains { $0.number == batch } })
        #expect(kill(helper, SIGKILL) == 0)
        fixture.helper?.kill()  // the test bed goes with it
        #expect(try await observedState(path, in: fixture.directory) != before, "the release never happened")

        let restarted = try HelperFixture(directory: fixture.directory)
        try await restarted.start(allowing: "0", ports: [Self.serial])
        // The guard tries again by itself (2 s after the failure): nothing is submitted meanwhile.
        #expect(await eventually(timeout: .seconds(20)) { (try? await observedState(path, in: fixture.directory)) == before })
        #expect(try NodeHelperLink(socketPath: fixture.socket).held().nodes.isEmpty)
        #expect(await restarted.stop() == .exited(0))
    }

    /// A node held for a claim that ended while accmond was down (here: held by hand) is released at start, when
    /// the restored claims have been enforced again.
    @Test func atStartWhatNoClaimCoversIsReleased() async throws {
        let fixture = try HelperFixture()
        try await fixture.start(allowing: "0", ports: [Self.serial])
        let path = try fixture.node("ttyUSB6", Self.serial.dev)
        let before = try await observedState(path, in: fixture.directory)
        let link = NodeHelperLink(socketPath: fixture.socket)
        _ = try link.hold(path, holder: AccmonNodes.NodeHolder(uid: 4001, gids: [20]))
        try link.markPort("1-2")
        let guardian = try NodeGuard(
            router: NodeRouter(NodeRouting(simulatedNodes: nil, helperSocket: fixture.socket)),
            results: Mailbox(wakeup: try WakeupEvent()), logger: Logger(label: "test", level: .critical))
        #expect(guardian.runNow([]).isEmpty)
        #expect(try await observedState(path, in: fixture.directory) == before)
        let held = try link.held()
        #expect(held.nodes.isEmpty && held.ports.isEmpty, "\(held)")
        let stopped = await fixture.stop()
        #expect(stopped == .exited(0), "\(String(describing: stopped)): \(fixture.helper?.stderr ?? "")")
    }
}
