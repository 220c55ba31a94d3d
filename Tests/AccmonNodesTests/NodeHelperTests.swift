import AccmonNodes
import AccmonSys
import AccmonTestSupport
import Foundation
import Glibc
import Testing

/// A real `accmon-nodes` behind `systemd-socket-activate`, in a umockdev test bed (Tests/umockdev/node_helper.py)
/// whose serial ports are marked for accmon or not; its nodes are made with mknod in a directory of the test, given
/// to the helper as its `--dev`.
final class HelperFixture {
    struct Port: Encodable {
        var name: String
        var dev: String
        var port: String
        var properties: [String: String]
    }

    let directory: TemporaryDirectory
    let socket: String
    let dev: String
    let state: String
    private(set) var helper: ChildProcess?

    init(directory: TemporaryDirectory? = nil) throws {
        self.directory = try directory ?? traversableDirectory()
        socket = self.directory.file("nodes.sock")
        dev = self.directory.file("dev")
        state = self.directory.file("state")
        if !FileManager.default.fileExists(atPath: dev) { #expect(mkdir(dev, 0o755) == 0) }
    }

    /// Starts the helper serving `allowedUser`, with the test bed's `ports`.
    func start(allowing allowedUser: String, ports: [Port]) async throws {
        let devices = String(decoding: try JSONEncoder().encode(ports), as: UTF8.self)
        let helper = try ChildProcess(
            URL(fileURLWithPath: "/usr/bin/umockdev-wrapper"),
            [
                "/usr/bin/python3", Repository.file("Tests/umockdev/node_helper.py").path, socket, devices, "--",
                try Binaries.url("accmon-nodes").path, "--allow-user", allowedUser, "--state-directory", state, "--dev",
                dev,
            ],
            name: "helper-\(UUID().uuidString.prefix(8))", directory: directory)
        self.helper = helper
        guard await eventually(timeout: .seconds(20), { helper.stdout.contains("\"ready\": true") }) else {
            throw Binaries.LocateError(description: "node_helper.py did not start: \(helper.stderr)")
        }
        // The socket's mode is not what is tested here: its peer-credential check is.
        #expect(chmod(socket, 0o666) == 0)
    }

    /// Stops the helper (SIGTERM through the test bed script) and returns how it ended.
    func stop() async -> Termination? {
        helper?.send(SIGTERM)
        return await helper?.waitForExit(timeout: .seconds(15))
    }

    /// A node made with mknod below `dev/`, root:dialout 0660 as udev's rules make serial ports.
    func node(_ name: String, _ dev: String) throws -> String {
        let parts = dev.split(separator: ":").compactMap { UInt64($0) }
        let path = "\(self.dev)/\(name)"
        guard mknod(path, S_IFCHR | 0o660, dev_t(parts[0] << 8 | parts[1])) == 0, chown(path, 0, 20) == 0,
            chmod(path, 0o660) == 0
        else { throw Errno.current }
        return path
    }

    /// `accmon-nodes --request LINE` as the user `uid`.
    func request(as uid: UInt32, _ line: String) async throws -> CommandResult {
        try await run(
            URL(fileURLWithPath: "/usr/bin/setpriv"),
            [
                "--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "--", try Binaries.url("accmon-nodes").path,
                "--socket", socket, "--request", line,
            ], in: directory)
    }

    deinit { helper?.kill() }
}

@Suite struct NodeHelperTests {
    static let marked = HelperFixture.Port(
        name: "ttyUSB7", dev: "188:7", port: "1-3", properties: ["ACCMON_KIND": "serial"])
    static let unmarked = HelperFixture.Port(name: "ttyUSB8", dev: "188:8", port: "1-4", properties: [:])
    static let claimed = HelperFixture.Port(
        name: "ttyUSB9", dev: "188:9", port: "1-5", properties: ["ACCMON_KIND": "serial", "ACCMON_CLAIMED_PORT": "1-5"])
    let holder = NodeHolder(uid: 4001, gids: [4001, 20])

    @Test func itServesOnlyItsUserByPeerCredentials() async throws {
        let fixture = try HelperFixture()
        try await fixture.start(allowing: "4005", ports: [Self.marked])
        let path = try fixture.node("ttyUSB7", Self.marked.dev)
        let link = NodeHelperLink(socketPath: fixture.socket, timeout: .seconds(5))
        #expect {
            try link.hold(path, holder: holder)
        } throws: { error in
            "\(error)" == "accmon-nodes: uid 0 (pid \(getpid())): only uid 4005 may use this helper"
        }
        let other = try await fixture.request(as: 4006, #"{"v":1,"id":1,"op":"held"}"#)
        #expect(other.termination == .exited(1) && other.stdout.contains(#""code":"not-permitted""#), "\(other)")
        let allowed = try await fixture.request(
            as: 4005, #"{"v":1,"id":7,"op":"hold","path":"\#(path)","holder":{"uid":4001,"gids":[20],"grant":false}}"#)
        #expect(allowed.termination == .exited(0) && allowed.stdout.contains(#""change":"applied""#), "\(allowed)")
        #expect(try await observedState(path, in: fixture.directory).owner == 0)
        let unversioned = try await fixture.request(as: 4005, #"{"v":2,"id":8,"op":"held"}"#)
        #expect(
            unversioned.stdout.contains(#""code":"bad-request""#) && unversioned.stdout.contains("version 2, not 1"))
        #expect(await fixture.stop() == .exited(0))
    }

    @Test func itHoldsMarkedDevicesOnlyAndRestoresAllAfterARestart() async throws {
        let fixture = try HelperFixture()
        try await fixture.start(allowing: "0", ports: [Self.marked, Self.unmarked, Self.claimed])
        let marked = try fixture.node("ttyUSB7", Self.marked.dev)
        let unmarked = try fixture.node("ttyUSB8", Self.unmarked.dev)
        let claimed = try fixture.node("ttyUSB9", Self.claimed.dev)
        let link = NodeHelperLink(socketPath: fixture.socket, timeout: .seconds(5))
        let before = NodeState(owner: 0, group: 20, mode: 0o660)

        #expect {
            try link.hold(unmarked, holder: holder)
        } throws: { error in
            (error as? NodeError)?.code == .notMarked
                && "\(error)".contains("is not marked for accmon (no ACCMON_KIND)")
        }
        #expect(
            try await observedState(unmarked, in: fixture.directory) == before, "an unmarked device's node was touched")
        let held: HoldOutcome
        do { held = try link.hold(marked, holder: holder) } catch {
            Issue.record("\(error): \(fixture.helper?.stderr ?? "")")
            return
        }
        #expect(held.change == .applied && held.original == before && !held.restoresThroughUdev)
        #expect(try await observedState(marked, in: fixture.directory) == before.enforced(holder: holder))
        do { try link.markPort("1-5") } catch {
            Issue.record("\(error): \(fixture.helper?.stderr ?? "")")
            return
        }
        #expect(try link.hold(claimed, holder: holder).restoresThroughUdev)
        #expect(try link.release(claimed).udevChange == .afterUnmark)
        #expect(try link.unmarkPort("1-5") == ["/sys/devices/usb1/1-5/1-5:1.0/ttyUSB9"])
        #expect(try link.cut(marked).method == .reauthorized)
        let state = try link.held()
        #expect(state.nodes.map(\.path) == [marked] && state.nodes.first?.port == "1-3" && state.ports.isEmpty)

        // A restarted helper knows what it held.
        #expect(await fixture.stop() == .exited(0))
        let restarted = try HelperFixture(directory: fixture.directory)
        try await restarted.start(allowing: "0", ports: [Self.marked])
        #expect(try link.held().nodes.map(\.path) == [marked], "the link reconnects to the new helper")
        #expect(await restarted.stop() == .exited(0))

        // The package's prerm: every node restored, exactly.
        let restore = try await run(
            try Binaries.url("accmon-nodes"),
            ["--restore-all", "--state-directory", fixture.state, "--dev", fixture.dev],
            in: fixture.directory)
        #expect(
            restore.termination == .exited(0) && restore.stdout == "\(marked): restored to 0:20 0660\n", "\(restore)")
        #expect(try await observedState(marked, in: fixture.directory) == before)
        let again = try await run(
            try Binaries.url("accmon-nodes"),
            ["--restore-all", "--state-directory", fixture.state, "--dev", fixture.dev],
            in: fixture.directory)
        #expect(again.termination == .exited(0) && again.stdout.isEmpty, "nothing left to restore: \(again)")
    }
}
