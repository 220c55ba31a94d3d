import AccmonClient
import AccmonProtocol
import AccmonTestSupport
import Foundation
import Glibc
import Testing

/// The state directory a real accmond runs with: a link planted where it writes is never written through, and a
/// directory that others could plant in, or that accmond cannot write in, is refused at start with the path and the
/// reason (issue 21, findings 5 and 8). The other user is a real one: `nobody`, through `setpriv`.
@Suite(.timeLimit(.minutes(2)))
struct StateDirectoryTests {
    static let precious = "precious: what a link in the state directory must never let accmond overwrite\n"

    /// A file of root's that a planted link points at.
    static func victim(in directory: TemporaryDirectory) throws -> String {
        let path = directory.file("victim")
        try precious.write(toFile: path, atomically: false, encoding: .utf8)
        return path
    }

    /// Waits for accmond to refuse to start: exit 1, the reason logged, no socket file left.
    static func expectRefusal(_ daemon: StartedDaemon, saying reason: String) async {
        let termination = await daemon.process.waitForExit(timeout: .seconds(10))
        #expect(
            termination == .exited(1), "accmond: \(termination.map(\.description) ?? "still running"): \(daemon.log)")
        #expect(daemon.log.contains(reason), "log: \(daemon.log)")
        #expect(!daemon.socketFileExists, "the socket file was left behind")
    }

    /// A link at the old fixed temporary name (left over, or planted before the directory was made safe) is removed
    /// at start; saves go to fresh names created with O_EXCL | O_NOFOLLOW, and the link's target is untouched.
    @Test func aLinkAtTheTemporaryNameIsRemovedNeverWrittenThrough() async throws {
        let root = try TemporaryDirectory()
        let victim = try Self.victim(in: root)
        let state = root.file("state")
        try makeDirectory(state, mode: 0o700)
        try FileManager.default.createSymbolicLink(atPath: "\(state)/state.json.tmp", withDestinationPath: victim)
        try FileManager.default.createSymbolicLink(
            atPath: "\(state)/history.jsonl.tmp-00c0ffee00c0ffee", withDestinationPath: victim)

        let daemon = try await Accmond.start(arguments: ["--state-dir", state])
        let connection = try await daemon.connect("saver")
        _ = try await connection.simulateConnect(Accessory(kind: .usb, name: "saved"))
        connection.close()
        daemon.process.send(SIGTERM)
        #expect(await daemon.process.waitForExit() == .exited(0), "log: \(daemon.log)")

        #expect(try String(contentsOfFile: victim, encoding: .utf8) == Self.precious, "written through the link")
        #expect(
            entries(of: state) == ["history.jsonl", "state.json"], "left in the state directory: \(entries(of: state))")
        let saved = try String(contentsOfFile: "\(state)/state.json", encoding: .utf8)
        #expect(saved.contains("\"sequenceCeiling\"") && saved.contains("saved"), "state.json: \(saved)")
        #expect(daemon.log.contains("a temporary left by a crash"), "log: \(daemon.log)")
    }

    /// `nobody` plants a link in a directory others may write in; accmond (root) refuses the directory, naming its
    /// mode, and never writes through the link. Group-writable and sticky (/tmp-like) directories alike.
    @Test(arguments: [0o777, 0o770, 0o1777] as [mode_t])
    func aStateDirectoryOthersMayWriteInIsRefused(mode: mode_t) async throws {
        let root = try TemporaryDirectory()
        chmod(root.path, 0o755)
        let victim = try Self.victim(in: root)
        let state = root.file("state")
        try makeDirectory(state, mode: mode)
        if mode & 0o002 != 0 {
            let plant = try await run(
                URL(fileURLWithPath: asNobody[0]),
                Array(asNobody.dropFirst()) + ["/bin/ln", "-s", victim, "\(state)/state.json.tmp"],
                in: root)
            try #require(plant.termination == .exited(0), "nobody could not plant the link: \(plant)")
        }
        let daemon = try StartedDaemon(in: root, stateDirectory: state)
        let octal = String(mode, radix: 8)
        await Self.expectRefusal(
            daemon, saying: "'\(state)': writable by others than its owner (mode \(octal.count < 4 ? "0" : "")\(octal))"
        )
        #expect(try String(contentsOfFile: victim, encoding: .utf8) == Self.precious, "written through the link")
    }

    /// The check is on the directory opened, not on the path: a link (as systemd's `DynamicUser=` makes
    /// /var/lib/accmon) to a safe directory is fine, a link to an unsafe one is refused with the link's path.
    @Test func theModeIsCheckedOnTheDirectoryALinkLeadsTo() async throws {
        let root = try TemporaryDirectory()
        try makeDirectory(root.file("private"), mode: 0o700)
        try makeDirectory(root.file("open"), mode: 0o777)
        let safeLink = root.file("safe-link")
        let openLink = root.file("open-link")
        try FileManager.default.createSymbolicLink(atPath: safeLink, withDestinationPath: "private")
        try FileManager.default.createSymbolicLink(atPath: openLink, withDestinationPath: "open")

        let daemon = try await Accmond.start(arguments: ["--state-dir", safeLink])
        #expect(
            await eventually { entries(of: root.file("private")) == ["history.jsonl", "state.json"] }, "\(daemon.log)")
        daemon.process.send(SIGTERM)
        #expect(await daemon.process.waitForExit() == .exited(0))

        let refused = try StartedDaemon(in: root, stateDirectory: openLink)
        await Self.expectRefusal(refused, saying: "'\(openLink)': writable by others than its owner (mode 0777)")
        #expect(entries(of: root.file("open")).isEmpty)
    }

    /// A directory of another user (who could plant files in it) is refused, whatever its mode.
    @Test func aStateDirectoryOwnedByAnotherUserIsRefused() async throws {
        let root = try TemporaryDirectory()
        let state = root.file("state")
        try makeDirectory(state, mode: 0o700)
        try #require(chown(state, 65534, 65534) == 0)
        let daemon = try StartedDaemon(in: root, stateDirectory: state)
        await Self.expectRefusal(
            daemon, saying: "'\(state)': owned by uid 65534, neither accmond's user (uid 0) nor root")
    }

    /// accmond running as `nobody` with a state directory of root's (0755: safe, but not writable by nobody) refuses
    /// to start, where it used to run on, fail at each save, and start numbering again after its next restart.
    @Test func aStateDirectoryAccmondCannotWriteInIsRefusedAtStart() async throws {
        let root = try TemporaryDirectory()
        chmod(root.path, 0o755)
        let state = root.file("state")
        try makeDirectory(state, mode: 0o755)
        try makeDirectory(root.file("run"), mode: 0o777)
        let daemon = try StartedDaemon(
            in: root, stateDirectory: state, wrapper: asNobody, socketPath: root.file("run/s"))
        await Self.expectRefusal(daemon, saying: "'\(state)': cannot write in it (open: '\(state)/state.json.tmp-")
        #expect(daemon.log.contains("Permission denied"), "log: \(daemon.log)")
        #expect(daemon.log.contains("make it writable by uid 65534"), "log: \(daemon.log)")
        #expect(entries(of: state).isEmpty)
    }

    /// The same for root on a read-only file system (a read-only bind mount in a mount namespace of its own).
    @Test func aStateDirectoryOnAReadOnlyFileSystemIsRefusedAtStart() async throws {
        let root = try TemporaryDirectory()
        let state = root.file("state")
        try makeDirectory(state, mode: 0o700)
        let readOnly = [
            "/usr/bin/unshare", "-m", "/bin/sh", "-c",
            #"mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@""#, state,
        ]
        let daemon = try StartedDaemon(in: root, stateDirectory: state, wrapper: readOnly)
        await Self.expectRefusal(daemon, saying: "'\(state)': cannot write in it (open: '\(state)/state.json.tmp-")
        #expect(daemon.log.contains("Read-only file system"), "log: \(daemon.log)")
    }
}
