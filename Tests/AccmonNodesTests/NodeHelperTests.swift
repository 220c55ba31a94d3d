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
    /// A device of the test bed (Tests/umockdev/node_helper.py): `type` `serial` (the default), `usbfs` or
    /// `bluetooth-input`; `switched` (usbfs): whether its hub switches the port's power.
    struct Port: Encodable {
        var name: String
        var dev: String
        var port: String
        var properties: [String: String]
        var type: String? = nil
        var switched: Bool? = nil
    }

    let directory: TemporaryDirectory
    let socket: String
    let dev: String
    let state: String
    /// The opener scanner's socket: a real `accmon-nodes --scan-openers` runs beside the helper.
    let scannerSocket: String
    private(set) var helper: ChildProcess?
    private(set) var scanner: ChildProcess?
    private var holders: [ChildProcess] = []

    init(directory: TemporaryDirectory? = nil) throws {
        self.directory = try directory ?? traversableDirectory()
        socket = self.directory.file("nodes.sock")
        dev = self.directory.file("dev")
        state = self.directory.file("state")
        scannerSocket = self.directory.file("scan.sock")
        if !FileManager.default.fileExists(atPath: dev) { #expect(mkdir(dev, 0o755) == 0) }
    }

    /// Starts the helper serving `allowedUser`, with the test bed's `ports`.
    func start(allowing allowedUser: String, ports: [Port]) async throws {
        if scanner == nil {
            unlink(scannerSocket)
            let scanner = try ChildProcess(
                try Binaries.url("accmon-nodes"), ["--scan-openers", "--socket", scannerSocket],
                name: "scanner-\(UUID().uuidString.prefix(8))", directory: directory)
            self.scanner = scanner
            guard await eventually(timeout: .seconds(20), { FileManager.default.fileExists(atPath: scannerSocket) })
            else { throw Binaries.LocateError(description: "the scanner did not start: \(scanner.stderr)") }
        }
        let devices = String(decoding: try JSONEncoder().encode(ports), as: UTF8.self)
        let helper = try ChildProcess(
            URL(fileURLWithPath: "/usr/bin/umockdev-wrapper"),
            [
                "/usr/bin/python3", Repository.file("Tests/umockdev/node_helper.py").path, socket, devices, dev, "--",
                try Binaries.url("accmon-nodes").path, "--allow-user", allowedUser, "--state-directory", state, "--dev",
                dev, "--scanner", scannerSocket,
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
        let ended = await helper?.waitForExit(timeout: .seconds(15))
        if ended != .exited(0) { Issue.record("the helper ended with \(String(describing: ended)): \(helper?.stderr ?? "")") }
        return ended
    }

    /// A process that keeps an `O_PATH` descriptor of `path` until the fixture ends (the test's nodes have no
    /// driver behind them: nothing can open them for I/O), for the scanner to find.
    func holdOpen(_ path: String) async throws -> ChildProcess {
        let ready = directory.file("holder-\(holders.count).ready")
        let holder = try ChildProcess(
            URL(fileURLWithPath: "/usr/bin/python3"),
            [
                "-c", "import os, sys, time; fd = os.open(sys.argv[1], os.O_PATH); open(sys.argv[2], 'w').close(); "
                    + "time.sleep(600)", path, ready,
            ], name: "holder-\(holders.count)", directory: directory)
        holders.append(holder)
        guard await eventually(timeout: .seconds(10), { FileManager.default.fileExists(atPath: ready) }) else {
            throw Binaries.LocateError(description: "the holder did not start: \(holder.stderr)")
        }
        return holder
    }

    /// A node made with mknod below `dev/`, root:dialout 0660 as udev's rules make serial ports.
    func node(_ name: String, _ dev: String) throws -> String {
        let parts = dev.split(separator: ":").compactMap { UInt64($0) }
        let path = "\(self.dev)/\(name)"
        if let slash = name.lastIndex(of: "/") {
            try FileManager.default.createDirectory(
                atPath: "\(self.dev)/\(name[..<slash])", withIntermediateDirectories: true)
        }
        guard mknod(path, S_IFCHR | 0o660, dev_t(parts[0] << 8 | parts[1])) == 0, chown(path, 0, 20) == 0,
            chmod(path, 0o660) == 0
        else { throw Errno.current }
        return path
    }

    /// The content of a file of the test bed's sysfs (`/sys/...` as the helper sees it).
    func sysfs(_ path: String) throws -> String {
        struct Ready: Decodable { var root: String }
        let line = try #require(helper?.stdout.split(separator: "\n").first { $0.contains("\"ready\"") })
        let root = try JSONDecoder().decode(Ready.self, from: Data(line.utf8)).root
        return try String(contentsOfFile: root + path, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
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

    deinit {
        helper?.kill()
        scanner?.kill()
        for holder in holders { holder.kill() }
    }
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

/// What a cut reaches, with the helper's real udev check (libudev in a umockdev test bed).
@Suite struct NodeHelperCutTests {
    let holder = NodeHolder(uid: 4001, gids: [4001, 20])

    /// A Bluetooth HID device's input node hangs off the Bluetooth adapter's USB device: re-authorizing that would
    /// drop every Bluetooth link of every user. The node is held and released, never cut.
    @Test func aBluetoothInputNodeIsHeldButNeverCutThroughTheAdapter() async throws {
        let fixture = try HelperFixture()
        let keyboard = HelperFixture.Port(
            name: "input/event9", dev: "13:73", port: "1-4", properties: ["ACCMON_KIND": "bluetooth-hid"],
            type: "bluetooth-input")
        try await fixture.start(allowing: "0", ports: [keyboard])
        let path = try fixture.node("input/event9", keyboard.dev)
        let link = NodeHelperLink(socketPath: fixture.socket, timeout: .seconds(10))
        _ = try link.hold(path, holder: holder)
        _ = try await fixture.holdOpen(path)  // the compositor
        let held = try link.held()
        #expect(held.nodes.first?.device?.contains("/hci0/hci0:256/") == true && held.nodes.first?.port == nil, "\(held)")
        let cut = try link.cut(path)
        #expect(cut.method == .notCut && cut.usbDevice == nil, "\(cut)")
        #expect(cut.reason?.contains("EVIOCREVOKE") == true, "\(cut)")
        #expect(try fixture.sysfs("/sys/devices/usb1/1-4/authorized") == "1")
        #expect(!(fixture.helper?.stderr.contains("authorized") ?? true), "\(fixture.helper?.stderr ?? "")")
        #expect(try link.release(path).result == .restored)
        #expect(await fixture.stop() == .exited(0))
    }

    /// A cut of a serial port re-authorizes its USB device and answers once the node is there again (the test bed
    /// makes it again, as the kernel does).
    @Test func aSerialPortIsCutByReauthorizationAndTheReplyWaitsForItsNewNode() async throws {
        let fixture = try HelperFixture()
        let serial = HelperFixture.Port(name: "ttyUSB3", dev: "188:3", port: "1-2", properties: ["ACCMON_KIND": "serial"])
        try await fixture.start(allowing: "0", ports: [serial])
        let path = try fixture.node("ttyUSB3", serial.dev)
        let link = NodeHelperLink(socketPath: fixture.socket, timeout: .seconds(10))
        _ = try link.hold(path, holder: holder)
        #expect(try link.cut(path).reason == "nothing has it open", "nothing is cut for nothing")
        let holder = try await fixture.holdOpen(path)
        #expect(try link.openers(of: path).map(\.pid) == [holder.pid], "named through the scanner")
        var before = stat()
        #expect(stat(path, &before) == 0)
        let cut = try link.cut(path)
        #expect(cut.method == .reauthorized && cut.usbDevice == "/sys/devices/usb1/1-2" && cut.reason == nil, "\(cut)")
        var after = stat()
        #expect(stat(path, &after) == 0 && after.st_ino != before.st_ino, "the reply came before the new node")
        #expect(await fixture.stop() == .exited(0))
    }

    /// usbfs survives re-authorization: its node is cut by disabling its hub port and enabling it again, where the
    /// hub switches port power; elsewhere it is not cut, and says why.
    @Test func aUSBDeviceNodeIsCutThroughItsHubPortOnlyWhereTheHubSwitchesPower() async throws {
        let fixture = try HelperFixture()
        let switched = HelperFixture.Port(
            name: "bus/usb/001/002", dev: "189:1", port: "1-2", properties: ["ACCMON_KIND": "usb"], type: "usbfs")
        let unswitched = HelperFixture.Port(
            name: "bus/usb/001/003", dev: "189:2", port: "1-3", properties: ["ACCMON_KIND": "usb"], type: "usbfs",
            switched: false)
        try await fixture.start(allowing: "0", ports: [switched, unswitched])
        let link = NodeHelperLink(socketPath: fixture.socket, timeout: .seconds(10))
        let first = try fixture.node("bus/usb/001/002", switched.dev)
        let second = try fixture.node("bus/usb/001/003", unswitched.dev)
        _ = try link.hold(first, holder: holder)
        _ = try link.hold(second, holder: holder)
        _ = try await fixture.holdOpen(first)
        _ = try await fixture.holdOpen(second)
        let cut = try link.cut(first)
        #expect(cut.method == .portDisabled && cut.hubPort == "/sys/devices/usb1/1-0:1.0/usb1-port2", "\(cut)")
        #expect(try fixture.sysfs("/sys/devices/usb1/1-0:1.0/usb1-port2/disable") == "0", "enabled again")
        #expect(try fixture.sysfs("/sys/devices/usb1/1-2/authorized") == "1")
        let notCut = try link.cut(second)
        #expect(notCut.method == .notCut && notCut.reason?.contains("power switching") == true, "\(notCut)")
        #expect(try fixture.sysfs("/sys/devices/usb1/1-0:1.0/usb1-port3/disable") == "0")
        #expect(await fixture.stop() == .exited(0))
    }

    /// Unmarking a port asks udev to set up again every device it set up while the port was marked, not only those
    /// a claim held: here a sibling no claim ever held.
    @Test func unmarkingAPortSetsUpAgainEveryDeviceMadeWhileItWasMarked() async throws {
        let fixture = try HelperFixture()
        let sibling = HelperFixture.Port(
            name: "ttyUSB5", dev: "188:5", port: "1-6", properties: ["ACCMON_KIND": "serial", "ACCMON_CLAIMED_PORT": "1-6"])
        try await fixture.start(allowing: "0", ports: [sibling])
        let link = NodeHelperLink(socketPath: fixture.socket, timeout: .seconds(10))
        try link.markPort("1-6")
        // The reply lists the devices whose `uevent` was written (umockdev turns the write into an event).
        #expect(try link.unmarkPort("1-6") == ["/sys/devices/usb1/1-6/1-6:1.0/ttyUSB5"])
        #expect(await fixture.stop() == .exited(0))
    }

    /// An ACL entry added while the helper was down is gone once it is back: it applies its claims again at start.
    @Test func aRestartedHelperAppliesItsClaimsAgainAtStart() async throws {
        let fixture = try HelperFixture()
        let serial = HelperFixture.Port(name: "ttyUSB4", dev: "188:4", port: "1-2", properties: ["ACCMON_KIND": "serial"])
        try await fixture.start(allowing: "0", ports: [serial])
        let path = try fixture.node("ttyUSB4", serial.dev)
        let link = NodeHelperLink(socketPath: fixture.socket, timeout: .seconds(10))
        let held = try link.hold(path, holder: holder)
        #expect(await fixture.stop() == .exited(0))
        let added = try await run(URL(fileURLWithPath: "/usr/bin/setfacl"), ["-m", "u:3000:rw", path], in: fixture.directory)
        #expect(added.termination == .exited(0), "\(added)")
        #expect(try await observedState(path, in: fixture.directory) != held.applied)
        let restarted = try HelperFixture(directory: fixture.directory)
        try await restarted.start(allowing: "0", ports: [serial])
        _ = try link.held()  // served: start-up is over
        #expect(try await observedState(path, in: fixture.directory) == held.applied)
        #expect(await restarted.stop() == .exited(0))
    }
}
