import AccmonClient
import AccmonTestSupport
import Foundation
import Glibc
import Testing

/// Check-out against a real accmond: contention and breaks told with names, the line served in order, all or nothing,
/// claims following re-enumerations, preserved sessions, restarts, subscribers.
@Suite(.serialized) struct ClaimTests {
    @Test func theHolderIsToldOfContentionAndOfABreakByWhomAndWhy() async throws {
        let daemon = try await ClaimDaemon()
        let board = try await daemon.plug("A1")
        let holder = try await daemon.connect("flasher")
        defer { holder.close() }
        let claim = try await holder.claim(.connections([board]), reason: "flashing")
        let notices = NoticeLog(claim.notices)
        #expect(claim.info.holder.uid == 0 && claim.info.holder.client == "flasher" && claim.info.holder.user == "root")

        // Another client asks without waiting: refused, the holder named; the holder hears who asked.
        let other = try await daemon.connect("other-job")
        defer { other.close() }
        do {
            _ = try await other.claim(.connections([board]), reason: "my turn")
            Issue.record("a held accessory was claimed twice")
        } catch {
            #expect(error.protocolError?.code == .claimConflict, "\(error)")
            let holders = error.protocolError?.holders ?? []
            #expect(holders.map(\.claimID) == [claim.claimID] && holders.first?.holder.client == "flasher")
            #expect(holders.first?.reason == "flashing")
        }
        let contention = await notices.wait(for: .contention)
        #expect(contention?.by?.client == "other-job" && contention?.reason == "my turn", "\(notices.all)")
        #expect(contention?.by?.pid == getpid())

        // An admin breaks it.
        let admin = try await daemon.connect("admin")
        defer { admin.close() }
        try await admin.release(.connection(board), force: true, reason: "the board is needed for a demo")
        let broken = await notices.wait(for: .broken)
        #expect(broken?.by?.client == "admin" && broken?.reason == "the board is needed for a demo")
        #expect(try await admin.claims().claims.isEmpty)
        let journal = daemon.log
        #expect(journal.contains("claim broken by root") && journal.contains("claim.break.reason=the board is needed"))
        #expect(journal.contains("claim contended by root") && journal.contains("claim granted: \(claim.claimID)"))
    }

    @Test func onlyItsHolderReleasesAClaimAndOnlyAnAdminBreaksIt() async throws {
        let daemon = try await ClaimDaemon()
        let board = try await daemon.plug("A2")
        let holder = try await daemon.connect()
        defer { holder.close() }
        let claim = try await holder.claim(.connections([board]))
        defer { withExtendedLifetime(claim) {} }
        let nobody = try await daemon.accmon(["release", String(board.rawValue)], as: asNobody)
        #expect(nobody.termination == .exited(77), "\(nobody)")
        #expect(nobody.stderr.contains("only its holder releases it"), "\(nobody)")
        let notAdmin = try await daemon.accmon(
            ["release", String(board.rawValue), "--force", "--reason", "mine now"], as: asNobody)
        #expect(notAdmin.termination == .exited(77) && notAdmin.stderr.contains("only root and the manifest's admins"), "\(notAdmin)")
        #expect(try await holder.claims().claims.count == 1)
        let unknown = try await daemon.accmon(["release", "c-99"])
        #expect(unknown.termination == .exited(1) && unknown.stderr.contains("no such claim"), "\(unknown)")
    }

    @Test func waitersAreServedInTheOrderTheyCame() async throws {
        let daemon = try await ClaimDaemon()
        let board = try await daemon.plug("A3")
        let holder = try await daemon.connect("holder")
        let first = try await holder.claim(.connections([board]))
        var order: [String] = []
        var connections: [AccmonConnection] = []
        var waits: [Task<AccmonClaim, any Error>] = []
        for name in ["w1", "w2", "w3"] {
            let connection = try await daemon.connect(name)
            connections.append(connection)
            waits.append(Task { try await connection.claim(.connections([board]), wait: true) })
            // Each in line before the next asks.
            #expect(await eventually { (try? await holder.claims().waiters.count) == connections.count })
        }
        defer { for connection in connections { connection.close() } }
        let places = try await holder.claims().waiters.map(\.party.client)
        #expect(places == ["w1", "w2", "w3"])
        try await first.release()
        holder.close()
        for (index, wait) in waits.enumerated() {
            let claim = try await wait.value
            order.append(claim.info.holder.client ?? "?")
            #expect(claim.accessories.map(\.connectionID) == [board])
            if index < 2 {
                let remaining = try await connections[index].claims().waiters.map(\.party.client)
                #expect(remaining == Array(["w2", "w3"][index...]).map { $0 })
            }
            try await claim.release()
        }
        #expect(order == ["w1", "w2", "w3"])
    }

    /// The library's side of a waiter across a restart of accmond: the waiting call ends with the place's token,
    /// which takes it up on a new connection, in its place, as a holder's token takes its claim up.
    @Test func aWaitingClaimCutByARestartIsTakenUpWithItsToken() async throws {
        let daemon = try await ClaimDaemon()
        let board = try await daemon.plug("A4")
        let holder = try await daemon.connect("holder")
        let held = try await holder.claim(.connections([board]))
        let waiter = try await daemon.connect("waiter")
        let waiting = Task { try await waiter.claim(.connections([board]), wait: true) }
        #expect(await eventually { (try? await holder.claims().waiters.count) == 1 })
        try await Task.sleep(for: .milliseconds(300))  // the place is in the state file (100 ms after a change)
        try await daemon.restart(signal: SIGKILL)
        var token: String?
        do {
            _ = try await waiting.value
            Issue.record("the wait did not end with the connection")
        } catch let error as AccmonError {
            #expect(error.code == .connectionClosed, "\(error)")
            token = error.claimToken
        }
        let tokenOfPlace = try #require(token, "no token to take the place up with")
        let again = try await daemon.connect("holder again")
        let takenUp = try await again.claim(.resume(token: held.token))
        let returned = try await daemon.connect("waiter again")
        let resumed = Task { try await returned.claim(.resume(token: tokenOfPlace), wait: true) }
        #expect(await eventually { (try? await again.claims().waiters.map(\.party.client)) == ["waiter again"] })
        try await takenUp.release()
        let granted = try await resumed.value
        #expect(granted.claimID == "c-2" && granted.accessories.map(\.connectionID) == [board])
        try await granted.release()
        for connection in [holder, waiter, again, returned] { connection.close() }
    }

    @Test func twoClaimersAskingForTwoAccessoriesInOppositeOrdersNeverDeadlock() async throws {
        let daemon = try await ClaimDaemon()
        let a = try await daemon.plug("PA")
        let b = try await daemon.plug("PB")
        let left = try await daemon.connect("left")
        let right = try await daemon.connect("right")
        defer {
            left.close()
            right.close()
        }
        for round in 0..<100 {
            // Each takes both (waiting for the other when it holds them), checks, and lets go.
            try await withThrowingTaskGroup(of: Set<ConnectionID>.self) { group in
                for (connection, order) in [(left, [a, b]), (right, [b, a])] {
                    group.addTask {
                        let claim = try await connection.claim(.connections(order), wait: true)
                        let held = Set(claim.accessories.map(\.connectionID))
                        try await claim.release()
                        return held
                    }
                }
                for try await held in group { #expect(held == [a, b], "round \(round)") }
            }
        }
        #expect(try await left.claims().claims.isEmpty)
    }

    @Test func aClaimFollowsItsAccessoryThroughAReEnumerationAndEndsWhenItDoesNotComeBack() async throws {
        let daemon = try await ClaimDaemon(manifest: ClaimDaemon.manifest(claim: #"{"returnSeconds": 1.5}"#))
        let board = try await daemon.plug("RESET1", port: "1-1.4")
        let connection = try await daemon.connect("flasher")
        defer { connection.close() }
        let claim = try await connection.claim(.connections([board]))
        let notices = NoticeLog(claim.notices)
        // It resets: gone, then back with the same accessory id, as a new connection.
        try await daemon.unplug(board)
        #expect(await notices.wait(for: .returning)?.accessory?.connectionID == board)
        // Meanwhile nobody else may take what comes back on that port.
        let back = try await daemon.plug("RESET1", port: "1-1.4", node: "/dev/ttyUSB7")
        let returned = await notices.wait(for: .returned)
        #expect(returned?.accessory?.connectionID == back && returned?.claim?.accessories.first?.deviceNodes == ["/dev/ttyUSB7"])
        #expect(claim.info.accessories.map(\.connectionID) == [back], "the claim object follows")
        #expect(try await connection.claims().claims.first?.connections == [back])
        // Its bootloader: another serial number on the same port, same kind.
        try await daemon.unplug(back)
        let loader = try await daemon.plug("BOOTLOADER", port: "1-1.4")
        _ = await eventually { notices.all.filter { $0.kind == .returned }.count == 2 }
        #expect(try await connection.claims().claims.first?.connections == [loader])
        // Gone for longer than its window: lost.
        try await daemon.unplug(loader)
        let lost = await notices.wait(for: .lost, timeout: .seconds(5))
        #expect(lost != nil, "\(notices.all)")
        #expect(try await connection.claims().claims.isEmpty)
    }

    @Test func aClaimKeptWithAPreservedSessionWaitsForItsClientForTheGrace() async throws {
        let daemon = try await ClaimDaemon(arguments: ["--claim-grace", "3"])
        let board = try await daemon.plug("GRACE1")
        let spare = try await daemon.plug("GRACE2")
        func appSession() async throws -> RawSocket {
            let app = try RawSocket(path: daemon.socketPath)
            try app.send(#"{"type":"hello","id":1,"versions":[1],"client":"app","restoreID":"app"}"# + "\n")
            try app.send(#"{"type":"subscribe","id":2}"# + "\n")
            return app
        }
        let observer = try await daemon.connect("observer")
        defer { observer.close() }
        // A session with a restore id keeps a claim asked with `preserve` while it is away...
        var app = try await appSession()
        try app.send(#"{"type":"claim","id":3,"connections":[\#(board.rawValue)],"preserve":true}"# + "\n")
        #expect(await eventually { await app.readObject(timeout: .milliseconds(200))?["type"] as? String == "claim" })
        // ...and one without `preserve` loses it with the connection.
        let plain = try await daemon.connect("plain")
        let lost = try await plain.claim(.connections([spare]))
        plain.close()
        withExtendedLifetime(lost) {}
        #expect(await eventually { (try? await observer.claims().claims.map(\.connections)) == [[board]] })
        // The grace runs from here: what follows until the client is back is one request, so that a loaded machine
        // does not make the client late (the test failed so under CI's load, waiting here for the plain claim's end).
        app.close()
        #expect(try await observer.claims().claims.map(\.connections) == [[board]])
        // The client comes back within the grace: the claim is its again.
        app = try await appSession()
        try await Task.sleep(for: .seconds(3.5))  // past the grace: kept, because its client is back
        #expect(try await observer.claims().claims.map(\.connections) == [[board]])
        // Away again, longer than the grace: the claim ends.
        app.close()
        #expect(await eventually(timeout: .seconds(8)) { (try? await observer.claims().claims.isEmpty) == true })
        #expect(daemon.log.contains("claim taken up with its restored session"), "\(daemon.log)")
    }

    @Test func subscribersWhoAskSeeClaimsChangeAndOthersGetNoNewMessage() async throws {
        let daemon = try await ClaimDaemon()
        let board = try await daemon.plug("SUB1")
        let watcher = try daemon.startAccmon(["watch", "--json"], name: "watch")
        let raw = try RawSocket(path: daemon.socketPath)
        try raw.send(#"{"type":"subscribe","id":1}"# + "\n")
        #expect(await raw.readObject()?["type"] as? String == "snapshot")
        #expect(await eventually { watcher.stdout.contains("\"snapshot\"") })
        let holder = try await daemon.connect("holder")
        let claim = try await holder.claim(.connections([board]), reason: "r1")
        #expect(await eventually { watcher.stdout.contains("\"claim-update\"") && watcher.stdout.contains("\"r1\"") })
        try await claim.release()
        #expect(await eventually { watcher.stdout.components(separatedBy: "\"claim-update\"").count == 3 })
        holder.close()
        // A protocol-1 subscriber that did not ask got nothing: the next line it reads is the next event.
        try await daemon.unplug(board)
        #expect(await raw.readObject()?["type"] as? String == "disconnect")
        let listed = try await daemon.accmon(["list", "--json"])
        #expect(!listed.stdout.contains("\"claim\""), "\(listed)")
        watcher.send(SIGINT)
    }

    @Test func aRestoredSessionKeepsAskingForClaimsAcrossARestart() async throws {
        let daemon = try await ClaimDaemon()
        let board = try await daemon.plug("KEEPASK1")
        func session() async throws -> RawSocket {
            let raw = try RawSocket(path: daemon.socketPath)
            try raw.send(#"{"type":"hello","id":1,"versions":[1],"restoreID":"bridge"}"# + "\n")
            return raw
        }
        var raw = try await session()
        try raw.send(#"{"type":"subscribe","id":2,"claims":true}"# + "\n")
        #expect(await eventually { await raw.readObject(timeout: .milliseconds(100))?["type"] as? String == "snapshot" })
        raw.close()
        try await daemon.restart(signal: SIGTERM)
        raw = try await session()
        #expect(await eventually { await raw.readObject(timeout: .milliseconds(100))?["type"] as? String == "restored" })
        let holder = try await daemon.connect("holder")
        let claim = try await holder.claim(.connections([board]), reason: "after the restart")
        #expect(
            await eventually {
                let line = await raw.readObject(timeout: .milliseconds(100))
                return line?["type"] as? String == "claim-update" && line?["connectionID"] as? Int == Int(board.rawValue)
            }, "the restored subscription still asks for claims")
        try await claim.release()
        holder.close()
        raw.close()
    }

    @Test func simulatedAccessoriesOutliveTheDaemonWithTheirConnectionIDs() async throws {
        // No client with a restore id: nothing but the simulated plugs changes the state.
        let daemon = try await ClaimDaemon()
        let kept = try await daemon.plug("OUTLIVE1")
        let gone = try await daemon.plug("OUTLIVE2")
        try await daemon.unplug(gone)
        try await Task.sleep(for: .milliseconds(300))  // the state file is at most ~100 ms behind
        for signal in [SIGKILL, SIGTERM] {
            try await daemon.restart(signal: signal)
            let connection = try await daemon.connect()
            let listed = try await connection.list().accessories.map(\.connectionID)
            connection.close()
            #expect(listed == [kept], "after \(signal == SIGKILL ? "SIGKILL" : "SIGTERM")")
        }
    }
}
