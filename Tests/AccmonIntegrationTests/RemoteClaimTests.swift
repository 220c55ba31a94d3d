import AccmonClient
import AccmonTestSupport
import Foundation
import Glibc
import Testing

/// A claim in a remote (MQTT) user's name, made by a local user the manifest's `bridges` names (here root, as the
/// test's bridge), through a real accmond: one line with the local claimers, the remote user's name as the holder,
/// enforcement for the local user the manifest maps the remote user to and nobody else.
@Suite(.serialized) struct RemoteClaimTests {
    static let manifest = """
        {"version": 1, "bridges": {"users": ["daemon"]},
         "accessories": [{"name": "bench", "match": {"id": "*:*"},
                          "access": {"users": [0, 65534, 1], "groups": ["accmon"]},
                          "claim": {"remote": [{"user": "ci", "as": "nobody"}, "qa"]}}]}
        """

    @Test func aBridgeClaimsInARemoteUsersNameAndOnlyTheMappedLocalUserOpens() async throws {
        let nodes = try TemporaryDirectory()
        chmod(nodes.path, 0o755)
        let daemon = try await ClaimDaemon(manifest: Self.manifest, arguments: ["--simulated-nodes", nodes.path])
        let node = try ClaimEnforcementTests.Node(in: nodes.path, name: "ttyUSB0")
        let before = node.state
        let board = try await daemon.plug("REM1", node: node.path)
        let bridge = try RawSocket(path: daemon.socketPath)
        try bridge.send(#"{"type":"hello","id":0,"versions":[1],"client":"mqtt-claim-gateway"}"# + "\n")
        _ = await bridge.readObject()
        try bridge.send(
            #"{"type":"claim","id":1,"connections":[\#(board.rawValue)],"remoteUser":"ci","reason":"job 7"}"# + "\n")
        let reply = try #require(await bridge.readObject())
        let claim = try #require(reply["claim"] as? [String: Any], "\(reply)")
        let holder = try #require(claim["holder"] as? [String: Any])
        #expect(holder["user"] as? String == "ci" && holder["remote"] as? Bool == true, "\(holder)")
        // The mapped local user (nobody) opens the node; another member of its group (daemon) does not.
        #expect(try await ClaimEnforcementTests.opens(node.path, as: ClaimEnforcementTests.holder, in: daemon))
        #expect(try await !ClaimEnforcementTests.opens(node.path, as: ClaimEnforcementTests.other, in: daemon))
        // A local claimer waits in the same line and is told who holds it.
        let local = try await daemon.accmon(["claim", "--serial", "REM1", "--", "true"])
        #expect(local.termination == .exited(75) && local.stderr.contains("ci"), "\(local)")
        let listed = try await daemon.accmon(["claims"])
        #expect(listed.stdout.contains("ci") && listed.stdout.contains("job 7"), "\(listed)")
        // Another remote user may not release it; the bridge releases it in ci's name.
        try bridge.send(#"{"type":"release","id":2,"claimID":"c-1","remoteUser":"qa"}"# + "\n")
        #expect(await Self.reply(2, on: bridge)?["code"] as? String == "permission-denied")
        try bridge.send(#"{"type":"release","id":3,"claimID":"c-1","remoteUser":"ci"}"# + "\n")
        #expect(await Self.reply(3, on: bridge)?["type"] as? String == "ok")
        #expect(await eventually { node.state == before }, "restored exactly: \(node.state) vs \(before)")
    }

    /// The reply to request `id` (notices, such as the contention the local claimer caused, come first).
    static func reply(_ id: Int, on socket: RawSocket) async -> [String: Any]? {
        while let object = await socket.readObject() {
            if object["id"] as? Int == id { return object }
        }
        return nil
    }

    @Test func aRemoteUserTheEntryDoesNotNameIsRefusedAndAnUnmappedRemoteClaimOpensForNobody() async throws {
        let nodes = try TemporaryDirectory()
        chmod(nodes.path, 0o755)
        let daemon = try await ClaimDaemon(manifest: Self.manifest, arguments: ["--simulated-nodes", nodes.path])
        let node = try ClaimEnforcementTests.Node(in: nodes.path, name: "ttyUSB1")
        let board = try await daemon.plug("REM2", node: node.path)
        let bridge = try RawSocket(path: daemon.socketPath)
        try bridge.send(#"{"type":"claim","id":1,"connections":[\#(board.rawValue)],"remoteUser":"mallory"}"# + "\n")
        let refused = try #require(await bridge.readObject())
        #expect(refused["code"] as? String == "no-such-connection", "\(refused)")
        try bridge.send(#"{"type":"claim","id":2,"filter":{"kind":"serial"},"remoteUser":"qa"}"# + "\n")
        let granted = try #require(await bridge.readObject())
        #expect((granted["claim"] as? [String: Any])?["state"] as? String == "held", "\(granted)")
        // qa maps to no local user: neither nobody nor daemon opens it, root does.
        #expect(try await !ClaimEnforcementTests.opens(node.path, as: ClaimEnforcementTests.holder, in: daemon))
        #expect(try await !ClaimEnforcementTests.opens(node.path, as: ClaimEnforcementTests.other, in: daemon))
        #expect(try await ClaimEnforcementTests.opens(node.path, as: ["/usr/bin/env"], in: daemon))
    }
}
