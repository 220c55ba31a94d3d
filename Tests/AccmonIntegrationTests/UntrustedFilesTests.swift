import AccmonClient
import AccmonProtocol
import AccmonTestSupport
import Foundation
import Glibc
import Testing

/// Files a real accmond reads that are not what they should be: a FIFO, a link, a device or a directory where a
/// file belongs, or a drop-in directory of thousands of entries. Each is a clear problem at once, never a wait
/// (issue 21, finding 6: a FIFO at state.json hung start-up, one among the drop-ins hung every reload).
@Suite(.timeLimit(.minutes(2)))
struct UntrustedFilesTests {
    enum Plant: String, CaseIterable, CustomTestStringConvertible {
        case fifo, symbolicLink, directory
        var testDescription: String { rawValue }
    }

    /// Something other than a regular file at `state.json`: accmond refuses to start at once, saying what it found
    /// (a FIFO was waited on for ever, a link followed, a directory taken as a fresh start).
    @Test(arguments: Plant.allCases)
    func somethingElseThanAFileAtTheStateFileIsRefusedAtOnce(_ plant: Plant) async throws {
        let root = try TemporaryDirectory()
        let state = root.file("state")
        try makeDirectory(state, mode: 0o700)
        let file = "\(state)/state.json"
        let kind: String
        switch plant {
        case .fifo:
            try #require(mkfifo(file, 0o600) == 0)
            kind = "a FIFO"
        case .symbolicLink:
            // A valid state elsewhere: read through the link, it would be taken.
            let elsewhere = root.file("elsewhere.json")
            try #"{"version":1,"sequenceCeiling":5,"connectionCeiling":5,"connected":[],"sessions":[]}"#.write(
                toFile: elsewhere, atomically: false, encoding: .utf8)
            try FileManager.default.createSymbolicLink(atPath: file, withDestinationPath: elsewhere)
            kind = "a symbolic link"
        case .directory:
            try makeDirectory(file, mode: 0o700)
            kind = "a directory"
        }
        let daemon = try StartedDaemon(in: root, stateDirectory: state)
        let termination = await daemon.process.waitForExit(timeout: .seconds(10))
        #expect(
            termination == .exited(1), "accmond: \(termination.map(\.description) ?? "still running"): \(daemon.log)")
        #expect(daemon.log.contains("'\(file)': not a regular file (\(kind))"), "log: \(daemon.log)")
        #expect(!daemon.socketFileExists, "the socket file was left behind")
    }

    /// A FIFO among the drop-ins: the reload is refused at once, naming it; other clients are served meanwhile, and
    /// the next reload without it succeeds.
    @Test func aFIFOAmongTheDropInsIsAProblemNotAWait() async throws {
        let daemon = try await Accmond.start()
        let dropIns = daemon.directory.file("manifest.d")
        try makeDirectory(dropIns, mode: 0o755)
        let fifo = "\(dropIns)/50-fifo.json"
        try #require(mkfifo(fifo, 0o644) == 0)

        let reload = try await daemon.accmon(["manifest", "reload"], timeout: .seconds(5))
        #expect(reload.termination != .exited(0), "\(reload)")
        #expect(reload.stderr.contains("\(fifo):1:1: not a regular file (a FIFO)"), "\(reload)")
        let status = try await daemon.accmon(["status", "--json"], timeout: .seconds(5))
        #expect(status.stdout.contains("not a regular file (a FIFO)"), "status: \(status)")

        unlink(fifo)
        let again = try await daemon.accmon(["manifest", "reload"], timeout: .seconds(5))
        #expect(again.termination == .exited(0), "\(again)")
    }

    /// A drop-in directory of more than 1000 entries is refused without reading them, and 1000 are read.
    @Test func aDropInDirectoryOfMoreThanAThousandEntriesIsRefused() async throws {
        let daemon = try await Accmond.start()
        let dropIns = daemon.directory.file("manifest.d")
        try makeDirectory(dropIns, mode: 0o755)
        for index in 0...1000 {
            try #"{"version": 1, "accessories": []}"#.write(
                toFile: "\(dropIns)/\(String(format: "%04d", index)).json", atomically: false, encoding: .utf8)
        }
        let reload = try await daemon.accmon(["manifest", "reload"], timeout: .seconds(10))
        #expect(reload.termination != .exited(0), "\(reload)")
        #expect(reload.stderr.contains("\(dropIns):1:1: the drop-in directory has more than 1000 entries"), "\(reload)")

        unlink("\(dropIns)/0000.json")
        let thousand = try await daemon.accmon(["manifest", "reload"], timeout: .seconds(10))
        #expect(thousand.termination == .exited(0), "\(thousand)")
    }

    /// The manifest may be a link an admin made (followed); a link to a device is refused before any read.
    @Test func aLinkedManifestIsFollowedAndALinkToADeviceRefused() async throws {
        let daemon = try await Accmond.start()
        let main = daemon.directory.file("manifest.json")
        let real = daemon.directory.file("real-manifest.json")
        try FileManager.default.moveItem(atPath: main, toPath: real)
        try FileManager.default.createSymbolicLink(atPath: main, withDestinationPath: real)
        let followed = try await daemon.accmon(["manifest", "reload"], timeout: .seconds(5))
        #expect(followed.termination == .exited(0), "\(followed)")

        let dropIns = daemon.directory.file("manifest.d")
        try makeDirectory(dropIns, mode: 0o755)
        try FileManager.default.createSymbolicLink(atPath: "\(dropIns)/60-zero.json", withDestinationPath: "/dev/zero")
        let device = try await daemon.accmon(["manifest", "reload"], timeout: .seconds(5))
        #expect(device.stderr.contains("60-zero.json:1:1: not a regular file (a character device)"), "\(device)")
    }
}
