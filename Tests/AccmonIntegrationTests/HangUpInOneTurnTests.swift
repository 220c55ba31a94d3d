import AccmonSys
import AccmonTestSupport
import Foundation
import Glibc
import Testing

/// A restore client's hang-up and something else reach accmond in one loop turn: the daemon is stopped (SIGSTOP)
/// while both happen, so that one `epoll_wait` hands it both, in the order the kernel lists them. The kept session
/// must lose nothing of that turn, and a new connection of the same client must reclaim it (docs/PROTOCOL.md §4).
/// The hang-ups are `RawSocket.close`, which shuts the connection down so that it is one at once.
@Suite(.serialized) struct HangUpInOneTurnTests {
    /// A restore client hangs up and, in the same loop turn, an accessory connects: the daemon is stopped while both
    /// happen, so one `epoll_wait` hands it the hang-up, then the request. The kept session must still have the
    /// connect, since the client never saw it.
    @Test func eventInTheTurnARestoreClientHangsUpIsReplayed() async throws {
        let daemon = try await Accmond.start()
        let driver = try await rawHello(daemon)
        let leaving = try await subscribedRestoreClient(daemon, restoreID: "same-turn")
        try await inOneTurn(daemon) {
            leaving.close()
            try driver.send(
                #"{"type":"simulate","id":2,"action":"connect","accessory":{"kind":"usb","name":"Same Turn","#
                    + #""vendorID":"1209","productID":"0007"}}"# + "\n")
        }
        let reply = await driver.readObject()
        #expect(reply?["type"] as? String == "ok", "\(String(describing: reply))")
        let replayed = await replayedConnects(daemon, restoreID: "same-turn")
        #expect(reply?["connectionID"] != nil && replayed == [reply?["connectionID"] as? Int], "\(replayed)")
    }

    /// The same with a manifest reload (SIGHUP) that lets the client see an accessory it could not.
    @Test func reloadInTheTurnARestoreClientHangsUpIsReplayed() async throws {
        let daemon = try await Accmond.start()
        let manifest = daemon.directory.file("manifest.json")
        let onlyOthers =
            #"{"version":1,"accessories":[{"name":"a","match":{"id":"1209:0001"}},"#
            + #"{"name":"b","match":{"id":"1209:0002"}}]}"#
        try onlyOthers.write(toFile: manifest, atomically: true, encoding: .utf8)
        daemon.process.send(SIGHUP)
        #expect(await eventually { daemon.process.stderr.contains("manifest loaded: 2 entries") })
        let driver = try await rawHello(daemon)
        try driver.send(
            #"{"type":"simulate","id":2,"action":"connect","accessory":{"kind":"usb","name":"Hidden","#
                + #""vendorID":"1209","productID":"0007"}}"# + "\n")
        let reply = await driver.readObject()
        #expect(reply?["type"] as? String == "ok", "\(String(describing: reply))")
        let leaving = try await subscribedRestoreClient(daemon, restoreID: "same-turn-reload")

        let everything =
            #"{"version":1,"accessories":[{"name":"a","match":{"id":"1209:0001"}},"#
            + #"{"name":"b","match":{"id":"1209:0002"}},{"name":"all","match":{"id":"*:*"}}]}"#
        try everything.write(toFile: manifest, atomically: true, encoding: .utf8)
        try await inOneTurn(daemon) {
            leaving.close()
            daemon.process.send(SIGHUP)
        }
        #expect(await eventually { daemon.process.stderr.contains("manifest loaded: 3 entries") })
        let replayed = await replayedConnects(daemon, restoreID: "same-turn-reload")
        #expect(reply?["connectionID"] != nil && replayed == [reply?["connectionID"] as? Int], "\(replayed)")
    }

    /// The client's new connection (opened before the old one went) says `hello` in the turn the old one hangs up:
    /// it must get the kept session back, with what it missed, not a fresh one.
    @Test func reclaimInTheTurnTheOldConnectionHangsUpRestores() async throws {
        try await reclaimInTheTurnTheOldConnectionHangsUp(helloFirst: false)
    }

    /// The same, the other way round: the new connection's `hello` comes first, then the old one hangs up, both
    /// read in one turn, where the hello is served before the hang-up is read: it must still reclaim the session
    /// (the hang-up is looked for then), not be refused as in use.
    @Test func reclaimJustBeforeTheOldConnectionHangsUpRestores() async throws {
        try await reclaimInTheTurnTheOldConnectionHangsUp(helloFirst: true)
    }

    /// The same again, by a client killed before it read its last event: the kernel reports that hang-up as a reset
    /// (`ECONNRESET`), which must count as one (it did not: the client was refused its own session as in use).
    @Test func reclaimJustBeforeAnOldConnectionWithAnEventUnreadHangsUpRestores() async throws {
        try await reclaimInTheTurnTheOldConnectionHangsUp(helloFirst: true, oldConnectionReadsItsEvent: false)
    }

    /// A restore client with one accessory, whose connect it read unless `oldConnectionReadsItsEvent` is false; its
    /// new connection's `hello` and its old connection's hang-up reach accmond in one loop turn, the hello first when
    /// `helloFirst`; expects the session reclaimed, the accessory in its state or replayed.
    private func reclaimInTheTurnTheOldConnectionHangsUp(helloFirst: Bool, oldConnectionReadsItsEvent: Bool = true)
        async throws
    {
        let daemon = try await Accmond.start()
        let driver = try await rawHello(daemon)
        let leaving = try await subscribedRestoreClient(daemon, restoreID: "handover")
        try driver.send(
            #"{"type":"simulate","id":2,"action":"connect","accessory":{"kind":"usb","name":"Handover","#
                + #""vendorID":"1209","productID":"0008"}}"# + "\n")
        let reply = await driver.readObject()
        #expect(reply?["type"] as? String == "ok", "\(String(describing: reply))")
        if oldConnectionReadsItsEvent {
            #expect(await leaving.readObject()?["type"] as? String == "connect")
        } else {
            #expect(leaving.blockUntilReadable(milliseconds: 5_000), "the connect waits in the old connection")
        }
        let back = try RawSocket(path: daemon.socketPath)
        #expect(try await eventually { try await statusClientCount(driver) == 3 }, "the new connection is accepted")
        try await inOneTurn(daemon) {
            if !helloFirst { leaving.close() }
            try back.send(#"{"type":"hello","id":1,"versions":[1],"restoreID":"handover"}"# + "\n")
            if helloFirst { leaving.close() }
        }
        let lines = await reclaimLines(back)
        let restore = lines.first { $0["type"] as? String == "restore" }
        let state = (restore?["accessories"] as? [[String: Any]])?.compactMap { $0["connectionID"] as? Int }
        let replayed = lines.filter { $0["type"] as? String == "connect" }.compactMap {
            ($0["accessory"] as? [String: Any])?["connectionID"] as? Int
        }
        #expect(reply?["connectionID"] != nil, "\(String(describing: reply))")
        #expect(((state ?? []) + replayed) == [reply?["connectionID"] as? Int], "\(lines)")
    }

    /// The number of client connections `status` lists, asked on `socket` (which said `hello`).
    private func statusClientCount(_ socket: RawSocket) async throws -> Int {
        try socket.send(#"{"type":"status","id":"n"}"# + "\n")
        let status = try #require(await socket.readObject())
        return (status["clients"] as? [Any])?.count ?? -1
    }

    /// A raw connection that said `hello`.
    private func rawHello(_ daemon: Accmond) async throws -> RawSocket {
        let socket = try RawSocket(path: daemon.socketPath)
        try socket.send(#"{"type":"hello","id":1,"versions":[1]}"# + "\n")
        #expect(await socket.readObject()?["type"] as? String == "hello")
        return socket
    }

    /// A raw connection that said `hello` with `restoreID` and subscribed.
    private func subscribedRestoreClient(_ daemon: Accmond, restoreID: String) async throws -> RawSocket {
        let socket = try RawSocket(path: daemon.socketPath)
        try socket.send(
            #"{"type":"hello","id":1,"versions":[1],"restoreID":""# + restoreID + #""}"# + "\n"
                + #"{"type":"subscribe","id":2}"# + "\n")
        #expect(await socket.readObject()?["type"] as? String == "hello")
        #expect(await socket.readObject()?["type"] as? String == "snapshot")
        return socket
    }

    /// Runs `actions` while the daemon is stopped, so that it finds all they cause in one `epoll_wait`, in order.
    private func inOneTurn(_ daemon: Accmond, _ actions: () throws -> Void) async throws {
        daemon.process.send(SIGSTOP)
        #expect(await eventually { processState(daemon.process.pid) == "T" })
        try actions()
        daemon.process.send(SIGCONT)
    }

    /// Reclaims the kept session `restoreID`: the connection ids of the connects handed back before `restored`.
    private func replayedConnects(_ daemon: Accmond, restoreID: String) async -> [Int?] {
        guard let back = try? RawSocket(path: daemon.socketPath),
            (try? back.send(#"{"type":"hello","id":1,"versions":[1],"restoreID":""# + restoreID + #""}"# + "\n"))
                != nil
        else { return [nil] }
        return await reclaimLines(back).filter { $0["type"] as? String == "connect" }.map {
            ($0["accessory"] as? [String: Any])?["connectionID"] as? Int
        }
    }

    /// What a `hello` that reclaims a kept session gets on `socket`, up to `restored`; expects `"restored":true`.
    private func reclaimLines(_ socket: RawSocket) async -> [[String: Any]] {
        var lines: [[String: Any]] = []
        while lines.count < 10, let object = await socket.readObject() {
            lines.append(object)
            if object["type"] as? String == "restored" { break }
        }
        #expect(lines.first?["restored"] as? Bool == true, "\(lines)")
        return lines
    }
}

/// The state letter of process `pid` in /proc/PID/stat (`T` once a SIGSTOP has taken effect); nil when unreadable.
private func processState(_ pid: pid_t) -> String? {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
        let end = stat.lastIndex(of: ")")
    else { return nil }
    return stat[stat.index(after: end)...].split(separator: " ").first.map(String.init)
}
