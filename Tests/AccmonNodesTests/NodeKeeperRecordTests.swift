import AccmonNodes
import AccmonSys
import AccmonTestSupport
import Foundation
import Glibc
import Synchronization
import Testing

@Suite
struct NodeKeeperRecordTests {
    @Test func aRestartedKeeperRestoresFromItsRecords() async throws {
        let fixture = try KeeperFixture()
        let before = NodeState(
            owner: 4003, group: 20, mode: 0o640, acl: ExtendedACL(owningGroup: .read, groups: [4101: .readWrite]))
        let path = try fixture.node("ttyUSB0", before)
        let holder = NodeHolder(uid: 4001, gids: [4001])
        _ = try fixture.keeper.hold(path, holder: holder)

        let restarted = try NodeKeeper(policy: .beneath(fixture.nodes), stateDirectory: fixture.directory.file("state"))
        #expect(restarted.warnings.isEmpty)
        let held = restarted.held()
        #expect(
            held.nodes.map(\.path) == [path] && held.nodes.first?.original == before
                && held.nodes.first?.holder == holder)
        #expect(
            try restarted.hold(path, holder: holder).change == .unchanged,
            "applied again after a restart: nothing to do")
        let results = restarted.releaseAll()
        #expect(results.map(\.path) == [path] && results.first?.outcome?.result == .restored)
        #expect(try await fixture.observed(path) == before)
    }

    @Test func aReEnumeratedNodeReplacesTheRecordAndAGoneOneIsDropped() async throws {
        let fixture = try KeeperFixture()
        let holder = NodeHolder(uid: 4001, gids: [4001, 20])
        let path = try fixture.node("ttyUSB0", NodeState(owner: 0, group: 20, mode: 0o660))
        _ = try fixture.keeper.hold(path, holder: holder)
        // The device goes and comes back: a new node at the same path, as udev sets it up (made beside it and
        // renamed over it, so that the file system cannot give it the old one's inode number).
        let fresh = NodeState(owner: 0, group: 20, mode: 0o600)
        #expect(rename(try fixture.node("ttyUSB0.new", fresh), path) == 0)
        let again = try fixture.keeper.hold(path, holder: holder)
        #expect(again.change == .applied && again.replacedNode && again.original == fresh)
        #expect(try fixture.keeper.release(path).restored == fresh)

        let gone = try fixture.node("ttyUSB1", NodeState(owner: 0, group: 20, mode: 0o660))
        _ = try fixture.keeper.hold(gone, holder: holder)
        #expect(unlink(gone) == 0)
        #expect(fixture.keeper.held().nodes.isEmpty, "a gone node's record is dropped")
        #expect(throws: NodeError.self) { try fixture.keeper.release(gone) }
        let other = try fixture.node("ttyUSB2", NodeState(owner: 0, group: 20, mode: 0o660))
        _ = try fixture.keeper.hold(other, holder: holder)
        #expect(rename(try fixture.node("ttyUSB2.new", NodeState(owner: 0, group: 20, mode: 0o666)), other) == 0)
        #expect(try fixture.keeper.release(other).result == .gone, "another inode now: nothing restored")
        #expect(try await fixture.observed(other) == NodeState(owner: 0, group: 20, mode: 0o666))
    }

    @Test func aWatchingKeeperSeesARewriteAtOnceAndAppliesTheClaimAgain() async throws {
        let directory = try traversableDirectory()
        let nodes = directory.file("nodes")
        #expect(mkdir(nodes, 0o755) == 0)
        let keeper = try NodeKeeper(
            policy: .beneath(nodes), stateDirectory: directory.file("state"), watchingChanges: true)
        let watch = try #require(keeper.changeDescriptor)
        let path = "\(nodes)/ttyUSB0"
        #expect(FileManager.default.createFile(atPath: path, contents: nil))
        let before = NodeState(owner: 0, group: 20, mode: 0o660)
        try set(path, to: before)
        let holder = NodeHolder(uid: 4001, gids: [20])
        _ = try keeper.hold(path, holder: holder)
        #expect(keeper.reapplyChanged().isEmpty, "its own changes are no rewrite")
        #expect(try waitForReadable([watch], timeoutMilliseconds: 0).ready == [false])

        #expect(
            try await command(["/usr/bin/setfacl", "-m", "u:4003:rw", path], in: directory).termination == .exited(0))
        #expect(try waitForReadable([watch], timeoutMilliseconds: 2000).ready == [true])
        let results = keeper.reapplyChanged()
        #expect(results.count == 1 && (try? results[0].result.get().change) == .rewriteAdopted, "\(results)")
        let seat = NodeState(
            owner: 0, group: 20, mode: 0o660, acl: ExtendedACL(owningGroup: .readWrite, users: [4003: .readWrite]))
        #expect(try await observedState(path, in: directory) == seat.enforced(holder: holder))
        _ = try keeper.release(path)
        #expect(try await observedState(path, in: directory) == seat)
    }

    @Test func anotherHolderGetsTheNodeAppliedAgain() throws {
        let fixture = try KeeperFixture()
        let before = NodeState(owner: 0, group: 20, mode: 0o660)
        let path = try fixture.node("ttyUSB0", before)
        _ = try fixture.keeper.hold(path, holder: NodeHolder(uid: 4001, gids: [20]))
        let next = NodeHolder(uid: 4002, gids: [20])
        let outcome = try fixture.keeper.hold(path, holder: next)
        #expect(
            outcome.change == .reapplied && outcome.original == before
                && outcome.applied == before.enforced(holder: next))
    }

    @Test func aStateDirectoryOthersMayWriteInIsRefused() throws {
        let directory = try traversableDirectory()
        let state = directory.file("state")
        #expect(mkdir(state, 0o777) == 0 && chmod(state, 0o777) == 0)
        #expect {
            try NodeKeeper(policy: .beneath(directory.path), stateDirectory: state)
        } throws: { error in
            "\(error)".hasPrefix("nodes: \(state): owned by uid 0, mode 0777: must be")
        }
    }

    @Test func anUnreadableRecordFileIsMovedAsideWithAWarning() throws {
        let directory = try traversableDirectory()
        let state = directory.file("state")
        #expect(mkdir(state, 0o755) == 0)
        #expect(
            FileManager.default.createFile(
                atPath: "\(state)/nodes.json", contents: Data("{\"version\":1,\"nodes\":[{}]}".utf8)))
        let keeper = try NodeKeeper(policy: .beneath(directory.path), stateDirectory: state)
        #expect(
            keeper.warnings.count == 1
                && keeper.warnings[0].hasPrefix("records: \(state)/nodes.json: not a record file"))
        #expect(keeper.warnings[0].contains("moved aside to nodes.json.corrupt-"))
        #expect(keeper.held().nodes.isEmpty)
    }
}

/// The policy of real devices, with the device check and the sysfs writes injected (the helper's are libudev and
/// sysfs): character devices only, refused unless the check accepts them, USB nodes cut by re-authorization.
@Suite
struct DevicePolicyTests {
    final class Writes: Sendable {
        let recorded = Mutex<[String]>([])
        var all: [String] { recorded.withLock { $0 } }
    }

    /// udev as the tests script it: the marked devices, and the devices set up under each claimed port.
    struct Devices: NodeDeviceDirectory {
        var marked: [UInt64: NodeDevice]
        var onClaimedPort: [String: [String]] = [:]

        func device(ofCharacterDevice deviceNumber: UInt64) throws(NodeError) -> NodeDevice {
            guard let device = marked[deviceNumber] else {
                throw NodeError(.notMarked, "udev", "\(deviceNumber)", "not marked for accmon")
            }
            return device
        }

        func devicesSetUp(onClaimedPort port: String) -> [String] { onClaimedPort[port] ?? [] }
        func waitUntilSettled(milliseconds: Int) -> Bool { true }
    }

    /// A scanner that finds one opener of every file: a cut then goes ahead.
    struct EverythingOpen: OpenerScanner {
        func scan(_ files: [FileStatus]) throws(NodeError) -> ProcessScan.Result {
            ProcessScan.Result(openers: files.map { _ in [NodeOpener(pid: 4711, uid: 1000, command: "minicom")] }, complete: true)
        }
    }

    struct Fixture {
        let directory: TemporaryDirectory
        let dev: String
        let keeper: NodeKeeper
        let writes = Writes()

        /// `marked`: device numbers the check accepts, with their device.
        init(marked: [UInt64: NodeDevice], onClaimedPort: [String: [String]] = [:]) throws {
            directory = try traversableDirectory()
            dev = directory.file("dev")
            #expect(mkdir(dev, 0o755) == 0)
            let writes = self.writes
            keeper = try NodeKeeper(
                policy: .devices(in: dev, directory: Devices(marked: marked, onClaimedPort: onClaimedPort)),
                stateDirectory: directory.file("state"),
                attributeWriter: { path, value throws(Errno) in
                    writes.recorded.withLock { $0.append("\(path)=\(value)") }
                }, openerScanner: EverythingOpen())
            // The nodes of these tests are never made again after a cut: do not wait long for them.
            keeper.reenumerationWait = .milliseconds(50)
            keeper.portPowerOffMilliseconds = 1
        }

        func node(_ name: String, _ number: UInt64) throws -> String {
            let path = "\(dev)/\(name)"
            guard mknod(path, S_IFCHR | 0o660, dev_t(number)) == 0, chown(path, 0, 20) == 0, chmod(path, 0o660) == 0
            else {
                throw Errno.current
            }
            return path
        }
    }

    static let serial = NodeDevice(
        syspath: "/sys/devices/pci0000:00/usb1/1-2/1-2:1.0/ttyUSB0/tty/ttyUSB0", kind: "serial",
        usbDevice: "/sys/devices/pci0000:00/usb1/1-2", port: "1-2")
    static let keyboard = NodeDevice(
        syspath: "/sys/devices/virtual/misc/uhid/0005:05AC:0265.0001/input/input9/event9", kind: "bluetooth-hid")
    // Device numbers of /dev/null and /dev/zero: nodes anyone may make safely.
    static let null: UInt64 = 1 << 8 | 3
    static let zero: UInt64 = 1 << 8 | 5

    @Test func onlyMarkedCharacterDevicesAreHeld() async throws {
        let fixture = try Fixture(marked: [Self.null: Self.serial])
        let marked = try fixture.node("ttyUSB0", Self.null)
        let unmarked = try fixture.node("ttyUSB1", Self.zero)
        let file = fixture.directory.file("dev/file")
        #expect(FileManager.default.createFile(atPath: file, contents: nil))
        let holder = NodeHolder(uid: 4001, gids: [20])
        #expect {
            try fixture.keeper.hold(unmarked, holder: holder)
        } throws: { error in
            (error as? NodeError)?.code == .notMarked
                && "\(error)".hasPrefix("hold: \(unmarked): device 1:5: not marked")
        }
        #expect {
            try fixture.keeper.hold(file, holder: holder)
        } throws: { error in
            "\(error)" == "hold: \(file): not a character device (a regular file): not touched"
        }
        #expect(try await observedState(unmarked, in: fixture.directory) == NodeState(owner: 0, group: 20, mode: 0o660))
        let outcome = try fixture.keeper.hold(marked, holder: holder)
        #expect(outcome.change == .applied && fixture.keeper.held().nodes.first?.port == "1-2")
        let cut = try fixture.keeper.cut(marked)
        #expect(cut.method == .reauthorized && cut.usbDevice == Self.serial.usbDevice)
        #expect(cut.reason == "not back within 0.05 seconds: \(marked)", "the node was never made again here")
        #expect(
            fixture.writes.all == ["\(Self.serial.usbDevice!)/authorized=0", "\(Self.serial.usbDevice!)/authorized=1"])
    }

    @Test func aBluetoothInputNodeIsNotCut() throws {
        let fixture = try Fixture(marked: [Self.null: Self.keyboard])
        let path = try fixture.node("event9", Self.null)
        _ = try fixture.keeper.hold(path, holder: NodeHolder(uid: 4001, gids: [20]))
        let cut = try fixture.keeper.cut(path)
        #expect(cut.method == .notCut && cut.reason?.contains("EVIOCREVOKE") == true && fixture.writes.all.isEmpty)
    }

    /// A node that appeared on a claimed port was made root-only by the shipped rule: release restores that, and
    /// asks udev to set it up again once the port is unmarked.
    @Test func aNodeFromAClaimedPortIsSetUpByUdevAgainOnceThePortIsUnmarked() async throws {
        var onPort = Self.serial
        onPort.onClaimedPort = true
        let fixture = try Fixture(marked: [Self.null: onPort])
        try fixture.keeper.markPort("1-2")
        #expect(FileManager.default.fileExists(atPath: fixture.directory.file("state/ports/1-2")))
        let path = try fixture.node("ttyUSB0", Self.null)
        #expect(chown(path, 0, 0) == 0 && chmod(path, 0o600) == 0)
        let outcome = try fixture.keeper.hold(path, holder: NodeHolder(uid: 4001, gids: [20]))
        #expect(outcome.restoresThroughUdev)
        #expect(try fixture.keeper.release(path).udevChange == .afterUnmark)
        #expect(fixture.writes.all.isEmpty)
        #expect(try fixture.keeper.unmarkPort("1-2") == [onPort.syspath])
        #expect(fixture.writes.all == ["\(onPort.syspath)/uevent=change"])
        #expect(!FileManager.default.fileExists(atPath: fixture.directory.file("state/ports/1-2")))
        for port in ["../x", "1-2/..", "", "a-1", "1-1.2.3.4.5.6.7.8.9.10.11.12.13.14.15.16.17.18.19.20.21.22.23"] {
            #expect(throws: NodeError.self, "\(port)") { try fixture.keeper.markPort(port) }
        }
    }

    /// Cutting one port of a multi-port adapter hangs up all of them: a cut is refused while another user holds a
    /// node of the same USB device, and done when the other nodes are the same user's.
    @Test func aCutThatWouldHangUpAnotherUsersNodeIsRefused() throws {
        var second = Self.serial
        second.syspath = "/sys/devices/pci0000:00/usb1/1-2/1-2:1.1/ttyUSB1/tty/ttyUSB1"
        let fixture = try Fixture(marked: [Self.null: Self.serial, Self.zero: second])
        let first = try fixture.node("ttyUSB0", Self.null)
        let other = try fixture.node("ttyUSB1", Self.zero)
        _ = try fixture.keeper.hold(first, holder: NodeHolder(uid: 4001, gids: [20]))
        _ = try fixture.keeper.hold(other, holder: NodeHolder(uid: 4002, gids: [20]))
        let refused = try fixture.keeper.cut(first)
        #expect(refused.method == .notCut && refused.reason?.contains("\(other) (uid 4002)") == true, "\(refused)")
        #expect(fixture.writes.all.isEmpty)
        _ = try fixture.keeper.hold(other, holder: NodeHolder(uid: 4001, gids: [20]))
        #expect(try fixture.keeper.cut(first).method == .reauthorized)
        #expect(fixture.writes.all.count == 2)
    }

    /// A USB device's own node (usbfs) is cut through its hub port; without a port that can be switched, not cut.
    @Test func aUSBDeviceNodeIsCutByItsHubPort() throws {
        let usbfs = NodeDevice(
            syspath: "/sys/devices/pci0000:00/usb1/1-2", kind: "usb", usbDevice: "/sys/devices/pci0000:00/usb1/1-2",
            port: "1-2", hubPort: "/sys/devices/pci0000:00/usb1/1-0:1.0/usb1-port2")
        var unswitched = usbfs
        unswitched.hubPort = nil
        let fixture = try Fixture(marked: [Self.null: usbfs, Self.zero: unswitched])
        let path = try fixture.node("002", Self.null)
        _ = try fixture.keeper.hold(path, holder: NodeHolder(uid: 4001, gids: [20]))
        let cut = try fixture.keeper.cut(path)
        #expect(cut.method == .portDisabled && cut.hubPort == usbfs.hubPort)
        #expect(fixture.writes.all == ["\(usbfs.hubPort!)/disable=1", "\(usbfs.hubPort!)/disable=0"])
        let other = try fixture.node("003", Self.zero)
        _ = try fixture.keeper.hold(other, holder: NodeHolder(uid: 4001, gids: [20]))
        #expect(try fixture.keeper.cut(other).method == .notCut)
        #expect(fixture.writes.all.count == 2)
    }

    /// Unmarking asks udev again for every device it set up under the mark, but those a claim still holds.
    @Test func unmarkingSkipsDevicesAClaimStillHolds() throws {
        var held = Self.serial
        held.onClaimedPort = true
        let fixture = try Fixture(
            marked: [Self.null: held], onClaimedPort: ["1-2": [held.syspath, "/sys/devices/pci0000:00/usb1/1-2"]])
        try fixture.keeper.markPort("1-2")
        _ = try fixture.keeper.hold(try fixture.node("ttyUSB0", Self.null), holder: NodeHolder(uid: 4001, gids: [20]))
        #expect(try fixture.keeper.unmarkPort("1-2") == ["/sys/devices/pci0000:00/usb1/1-2"])
        #expect(fixture.writes.all == ["/sys/devices/pci0000:00/usb1/1-2/uevent=change"])
    }
}
