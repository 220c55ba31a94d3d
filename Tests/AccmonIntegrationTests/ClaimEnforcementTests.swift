import AccmonClient
import AccmonTestSupport
import Foundation
import Glibc
import Testing

/// A claim enforced on the nodes of simulated accessories below `--simulated-nodes`, by a real accmond, against real
/// other users (setpriv): another member of the node's group gets EACCES, the holder opens it, the node comes back
/// exactly, with no ACL left.
@Suite(.serialized) struct ClaimEnforcementTests {
    /// Two members of the group dialout (gid 20), neither root: the holder (nobody) and another user (daemon).
    static let holder = ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--groups=20"]
    static let other = ["/usr/bin/setpriv", "--reuid=1", "--regid=1", "--groups=20"]

    struct Node {
        let path: String

        init(in directory: String, name: String) throws {
            path = directory + "/" + name
            guard FileManager.default.createFile(atPath: path, contents: Data("data".utf8)) else {
                throw Binaries.LocateError(description: "cannot create \(path)")
            }
            chown(path, 0, 20)
            chmod(path, 0o660)
        }

        /// Owner, group, mode, and the ACL's entries beyond the mode's three (`getfacl`).
        var state: String {
            var info = stat()
            guard stat(path, &info) == 0 else { return "gone" }
            let getfacl = Process()
            getfacl.executableURL = URL(fileURLWithPath: "/usr/bin/getfacl")
            getfacl.arguments = ["--omit-header", "--absolute-names", path]
            let pipe = Pipe()
            getfacl.standardOutput = pipe
            try? getfacl.run()  // try?: no getfacl shows as acl=-1
            getfacl.waitUntilExit()
            let lines = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                .split(separator: "\n").filter { !$0.isEmpty }
            let extra = getfacl.terminationStatus == 0 ? lines.count - 3 : -1
            return "\(info.st_uid):\(info.st_gid) \(String(info.st_mode & 0o7777, radix: 8)) acl=\(extra)"
        }
    }

    /// A directory every user may write in (the tests' other users leave marks there).
    static func sharedDirectory(in daemon: ClaimDaemon) throws -> String {
        let path = daemon.directory.file("shared")
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)  // try?: exists
        chmod(path, 0o1777)
        return path
    }

    /// Whether `user` can open `path` for reading and writing now.
    static func opens(_ path: String, as user: [String], in daemon: ClaimDaemon) async throws -> Bool {
        let result = try await run(
            URL(fileURLWithPath: user[0]), Array(user.dropFirst()) + ["/bin/sh", "-c", "(exec 3<>\(path)) 2>/dev/null"],
            in: daemon.directory)
        return result.termination == .exited(0)
    }

    @Test func whileHeldOnlyTheHolderAndRootOpenTheNodeAndAfterwardsItIsAsItWas() async throws {
        let nodes = try TemporaryDirectory()
        chmod(nodes.path, 0o755)
        let daemon = try await ClaimDaemon(arguments: ["--simulated-nodes", nodes.path])
        let node = try Node(in: nodes.path, name: "ttyUSB0")
        let before = node.state
        let board = try await daemon.plug("ENF1", node: node.path)
        #expect(try await Self.opens(node.path, as: Self.other, in: daemon), "before the claim, both may open")
        // The holder, a member of dialout, claims it and keeps it while its command runs.
        let shared = try Self.sharedDirectory(in: daemon)
        let flag = shared + "/done"
        let opened = shared + "/opened"
        let holder = try daemon.startAccmon(
            [
                "claim", "--connection", String(board.rawValue), "--", "/bin/sh", "-c",
                "exec 3<>\(node.path) && touch \(opened); while [ ! -e \(flag) ]; do sleep 0.05; done",
            ], as: Self.holder, name: "holder")
        #expect(await eventually { FileManager.default.fileExists(atPath: opened) }, "\(holder.stderr)\n\(daemon.log)")
        #expect(try await !Self.opens(node.path, as: Self.other, in: daemon), "another member of dialout: EACCES")
        #expect(node.state != before)
        let listed = try await daemon.accmon(["claims", "--json"])
        #expect(listed.stdout.contains("\"uid\":65534"), "\(listed)")
        try #require(FileManager.default.createFile(atPath: flag, contents: nil), "cannot create \(flag)")
        #expect(await holder.waitForExit() == .exited(0), "\(holder.stderr)")
        // As with flock(1): once `accmon claim` has exited, the node is as it was (the release is answered once
        // the node is restored), not a moment later.
        #expect(node.state == before, "restored exactly when accmon claim exits: \(node.state) vs \(before)")
        #expect(node.state.hasSuffix("acl=0"), "no ACL left")
        #expect(try await Self.opens(node.path, as: Self.other, in: daemon))
    }

    /// As with flock(1): once `accmon claim` has exited, every node is as it was (the release is answered once the
    /// nodes are restored), not a moment later; an accessory of 100 nodes makes the restoring (a record
    /// written per node) take long enough to show it.
    @Test func whenAccmonClaimExitsItsNodesAreAlreadyRestored() async throws {
        let nodes = try TemporaryDirectory()
        chmod(nodes.path, 0o755)
        let daemon = try await ClaimDaemon(arguments: ["--simulated-nodes", nodes.path])
        let many = try (0..<100).map { try Node(in: nodes.path, name: "ttyMANY\($0)") }
        var accessory = ClaimDaemon.adapter("MANY")
        accessory.deviceNodes = many.map(\.path)
        let plugger = try await daemon.connect("plugger")
        defer { plugger.close() }
        let board = try await plugger.simulateConnect(accessory)
        let before = many[0].state
        for round in 1...3 {
            let quick = try await daemon.accmon(
                ["claim", "--connection", String(board.rawValue), "--", "/bin/true"], as: Self.holder)
            #expect(quick.termination == .exited(0), "\(quick)")
            let changed = many.count { $0.state != before }
            #expect(changed == 0, "round \(round): nodes not restored when accmon claim exited")
        }
    }

    @Test func aClaimTakesAccessAwayButGivesNoneUnlessTheEntryGrantsIt() async throws {
        let nodes = try TemporaryDirectory()
        chmod(nodes.path, 0o755)
        for grant in [false, true] {
            let daemon = try await ClaimDaemon(
                manifest: ClaimDaemon.manifest(claim: grant ? #"{"grant": true}"# : nil),
                arguments: ["--simulated-nodes", nodes.path])
            let node = try Node(in: nodes.path, name: "ttyACM\(grant ? 1 : 0)")
            chmod(node.path, 0o600)  // root's alone: the holder could not open it before
            let board = try await daemon.plug("GRANT\(grant)", node: node.path)
            let probe = try Self.sharedDirectory(in: daemon) + "/probe"
            let run = try await daemon.accmon(
                [
                    "claim", "--connection", String(board.rawValue), "--", "/bin/sh", "-c",
                    "if (exec 3<>\(node.path)) 2>/dev/null; then echo opened > \(probe); else echo refused > \(probe); fi",
                ], as: Self.holder)
            #expect(run.termination == .exited(0), "\(run)")
            let outcome = try String(contentsOfFile: probe, encoding: .utf8)
            #expect(outcome == (grant ? "opened\n" : "refused\n"), "grant \(grant)")
            #expect(node.state == "0:20 600 acl=0", "restored: \(node.state)")
        }
    }

    @Test func aNodeOutsideTheDirectoryOrALinkIsLeftAlone() async throws {
        let nodes = try TemporaryDirectory()
        chmod(nodes.path, 0o755)
        let daemon = try await ClaimDaemon(arguments: ["--simulated-nodes", nodes.path])
        let outside = try Node(in: daemon.directory.path, name: "ttyOutside")
        let inside = try Node(in: nodes.path, name: "ttyInside")
        let link = nodes.path + "/link"
        symlink(inside.path, link)
        var adapter = ClaimDaemon.adapter("LEFT1")
        adapter.deviceNodes = [outside.path, link, inside.path]
        let plugger = try await daemon.connect()
        let board = try await plugger.simulateConnect(adapter)
        plugger.close()
        let connection = try await daemon.connect()
        defer { connection.close() }
        let claim = try await connection.claim(.connections([board]))
        let reported = Dictionary(uniqueKeysWithValues: claim.info.nodes.map { ($0.path, $0) })
        #expect(reported[outside.path]?.enforced == false && reported[link]?.enforced == false)
        #expect(reported[inside.path]?.enforced == true)
        #expect(reported[link]?.note?.contains("symbolic link") == true, "\(claim.info.nodes)")
        #expect(outside.state == "0:20 660 acl=0", "untouched")
        try await claim.release()
    }

    @Test func aProcessThatHadTheNodeOpenIsNamedAndABreakCutsIt() async throws {
        let nodes = try TemporaryDirectory()
        chmod(nodes.path, 0o755)
        let daemon = try await ClaimDaemon(arguments: ["--simulated-nodes", nodes.path])
        // Three nodes, the middle one open: the openers of all are found in one look at the processes, each with
        // its node.
        let all = try ["ttyOPEN0", "ttyOPEN", "ttyOPEN2"].map { try Node(in: nodes.path, name: $0) }
        let node = all[1]
        var accessory = ClaimDaemon.adapter("OPEN1")
        accessory.deviceNodes = all.map(\.path)
        let plugger = try await daemon.connect("plugger")
        defer { plugger.close() }
        let board = try await plugger.simulateConnect(accessory)
        // Another user's process holds it open before the claim.
        let duration = "200.\(getpid())\(Int.random(in: 100_000..<1_000_000))"
        let keeper = try ChildProcess(
            URL(fileURLWithPath: Self.other[0]),
            Array(Self.other.dropFirst()) + ["/bin/sh", "-c", "exec 3<>\(node.path); exec sleep \(duration)"],
            name: "keeper", directory: daemon.directory)
        #expect(await eventually { !pids(running: ["sleep", duration]).isEmpty })
        let connection = try await daemon.connect("admin-claim")
        defer { connection.close() }
        let claim = try await connection.claim(.connections([board]))
        #expect(claim.info.openers.contains { $0.uid == 1 && $0.command == "sleep" }, "\(claim.info.openers)")
        #expect(claim.info.openers.allSatisfy { $0.path == node.path }, "\(claim.info.openers)")
        keeper.kill()
        try await claim.release()
    }

    @Test func aKilledDaemonKeepsClaimsAndTheLineAndEnforcesThemBeforeItServes() async throws {
        let nodes = try TemporaryDirectory()
        chmod(nodes.path, 0o755)
        let daemon = try await ClaimDaemon(arguments: ["--simulated-nodes", nodes.path])
        let node = try Node(in: nodes.path, name: "ttyKEPT")
        let before = node.state
        let board = try await daemon.plug("KEPT1", node: node.path)
        try await Task.sleep(for: .milliseconds(300))  // the plug reaches the state file (a claim does before its reply)
        let holder = try await daemon.connect("holder")
        let claim = try await holder.claim(.connections([board]), reason: "kept")
        var tokens: [String] = []
        var waiters: [RawSocket] = []
        for name in ["w1", "w2"] {
            let raw = try RawSocket(path: daemon.socketPath)
            try raw.send(#"{"type":"hello","id":1,"versions":[1],"client":"\#(name)"}"# + "\n")
            _ = await raw.readObject()
            try raw.send(#"{"type":"claim","id":2,"connections":[\#(board.rawValue)],"wait":true}"# + "\n")
            let reply = await raw.readObject()
            let info = reply?["claim"] as? [String: Any]
            #expect(info?["state"] as? String == "waiting", "\(String(describing: reply))")
            tokens.append(info?["token"] as? String ?? "")
            waiters.append(raw)
        }
        #expect(!(try await Self.opens(node.path, as: Self.other, in: daemon)))

        // Killed while every claimer is connected: their connections end with it, their claims and places stay.
        try await daemon.restart(signal: SIGKILL)
        holder.close()
        for raw in waiters { raw.close() }
        // The first client served finds the node enforced already.
        #expect(!(try await Self.opens(node.path, as: Self.other, in: daemon)), "enforced before serving")
        let listed = try await daemon.connect("observer")
        let list = try await listed.claims()
        #expect(list.claims.map(\.claimID) == [claim.claimID] && list.waiters.map(\.party.client) == ["w1", "w2"])
        // Holder and waiters take their claims and places up with their tokens; the line keeps its order.
        let back = try await daemon.connect("holder")
        let resumed = try await back.claim(.resume(token: claim.token))
        #expect(resumed.claimID == claim.claimID && resumed.info.reason == "kept")
        let second = try await daemon.connect("w2")
        let first = try await daemon.connect("w1")
        async let w2 = second.claim(.resume(token: tokens[1]))
        async let w1 = first.claim(.resume(token: tokens[0]))
        try await resumed.release()
        let granted = try await w1
        #expect(granted.info.holder.client == "w1", "the first in line first")
        try await granted.release()
        let last = try await w2
        #expect(last.info.holder.client == "w2")
        try await last.release()
        #expect(await eventually { node.state == before }, "restored: \(node.state)")
        for connection in [listed, back, second, first] { connection.close() }
    }
}
