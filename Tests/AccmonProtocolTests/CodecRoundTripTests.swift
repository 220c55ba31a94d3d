import AccmonProtocol
import AccmonTestSupport
import Testing

/// The wire name of a request case; the exhaustive switch makes a new case fail to compile until it is covered here.
private func caseName(_ request: ClientRequest) -> String {
    switch request {
    case .hello: "hello"
    case .subscribe: "subscribe"
    case .unsubscribe: "unsubscribe"
    case .suspend: "suspend"
    case .resume: "resume"
    case .acknowledge: "acknowledge"
    case .list: "list"
    case .status: "status"
    case .reloadManifest: "reload"
    case .history: "history"
    case .simulateConnect: "simulateConnect"
    case .simulateDisconnect: "simulateDisconnect"
    case .claim: "claim"
    case .release: "release"
    case .claims: "claims"
    }
}

private func caseName(_ message: ServerMessage) -> String {
    switch message {
    case .hello: "hello"
    case .restore: "restore"
    case .restored: "restored"
    case .snapshot: "snapshot"
    case .list: "list"
    case .event(let event): "event.\(event.change.rawValue)"
    case .status: "status"
    case .history: "history"
    case .ok: "ok"
    case .error: "error"
    case .shutdown: "shutdown"
    case .claim: "claim"
    case .claims: "claims"
    case .claimNotice: "claimNotice"
    case .claimUpdate: "claimUpdate"
    }
}

private let clientRequests: [ClientRequest] = {
    var requests: [ClientRequest] = [
        .hello(versions: [1], clientName: "accmon-cli"),
        .hello(versions: [], clientName: ""),
        .hello(versions: [3, 1, 2, Int.max, Int.min], clientName: "caf\u{E9} \"client\"\n"),
        .hello(versions: [1], clientName: "watcher", restoreID: "3f1c9a7e-restore"),
        .hello(versions: [1], clientName: "", restoreID: ""),
        .hello(versions: [1], clientName: "viewer", restoreID: "com.example.viewer", relaunch: "accmon-viewer@.service"),
        .acknowledge(0),
        .acknowledge(41),
        .acknowledge(UInt64.max),
        .unsubscribe,
        .suspend,
        .resume,
        .status,
        .reloadManifest,
        .simulateConnect(Fixtures.fullAccessory),
        .simulateConnect(Fixtures.awkwardAccessory),
        .simulateConnect(Fixtures.minimalAccessory),
        .simulateDisconnect(ConnectionID(0)),
        .simulateDisconnect(ConnectionID(17)),
        .simulateDisconnect(ConnectionID(UInt64.max)),
        .claims,
        .claim(ClaimRequest(.connections([ConnectionID(3)]))),
        .claim(
            ClaimRequest(
                .connections([ConnectionID(1), ConnectionID(UInt64.max)]), wait: true, reason: "flash \"it\"\n",
                maxSeconds: 90.5, preserve: true)),
        .claim(ClaimRequest(.matching(.all, serial: nil, count: 1))),
        .claim(ClaimRequest(.matching(AccessoryFilter(kind: .serial, vendorID: "0403"), serial: "A5", count: 64))),
        .claim(ClaimRequest(.resume(token: "0123456789abcdef0123456789abcdef"))),
        .claim(ClaimRequest(.connections([ConnectionID(2)]), remoteUser: "ci")),
        .release(ReleaseRequest(.claim("c-3"))),
        .release(ReleaseRequest(.connection(ConnectionID(9)), force: true, reason: "stuck job")),
        .release(ReleaseRequest(.accessory("serial:0403:6001:serial=A50285BI"), remoteUser: "qa")),
        .history(HistoryQuery()),
        .history(HistoryQuery(since: 0, limit: HistoryQuery.maximumLimit)),
        .history(HistoryQuery(since: -1e300, limit: 7)),
        .history(HistoryQuery(before: 1, limit: 7)),
        .history(HistoryQuery(before: UInt64.max)),
    ]
    for filter in Fixtures.filters {
        requests.append(.history(HistoryQuery(filter: filter)))
        requests.append(.history(HistoryQuery(since: 1_796_000_000.25, limit: 1, filter: filter)))
        requests.append(.subscribe(filter))
        requests.append(.list(filter))
        requests.append(.subscribe(filter, includeRejected: true))
        requests.append(.list(filter, includeRejected: true))
        requests.append(.subscribe(filter, claims: true))
        requests.append(.list(filter, includeRejected: true, claims: true))
    }
    return requests
}()

/// Every request, each with every form of request id.
private let clientMessages: [ClientMessage] = clientRequests.flatMap { request in
    Fixtures.requestIDs.map { ClientMessage(id: $0, request) }
}

private let snapshots: [Snapshot] = [
    Snapshot(sequence: 0, accessories: []),
    Snapshot(sequence: 12, accessories: [Fixtures.fullAccessory]),
    Snapshot(
        sequence: UInt64.max,
        accessories: [Fixtures.minimalAccessory, Fixtures.fullAccessory, Fixtures.awkwardAccessory]),
    Snapshot(
        sequence: 7, accessories: [Fixtures.fullAccessory],
        rejected: [Fixtures.fullAccessory.connectionID: "no manifest entry matches (default: reject)"]),
]

private let serverMessages: [ServerMessage] = {
    var messages: [ServerMessage] = []
    for id in Fixtures.requestIDs {
        messages.append(.hello(id: id, version: 1, daemonVersion: AccmonVersion.current, sessionID: "s-1f2e"))
        messages.append(.hello(id: id, version: 1, daemonVersion: "", sessionID: "", restored: true))
        for snapshot in snapshots {
            messages.append(.snapshot(id: id, snapshot))
            messages.append(.list(id: id, snapshot))
        }
        messages.append(
            .status(
                id: id,
                DaemonStatus(
                    daemonVersion: "0.1.0", protocolVersion: 1, uptimeSeconds: 1234.5678, connectedAccessories: 3,
                    sessions: 2, sequence: 99, simulate: true,
                    clients: [
                        SessionStatus(
                            sessionID: "s-1", clientName: "accmon watch", pid: 4242, uid: 1000, state: .live,
                            suspendedBecause: "", subscribed: true, queuedEvents: 0, outboundBytes: 0,
                            idleSeconds: 0.25),
                        SessionStatus(
                            sessionID: "s-2", clientName: "", pid: 0, uid: UInt32.max, state: .suspended,
                            suspendedBecause: "not-reading", subscribed: false, queuedEvents: 17,
                            outboundBytes: 65_536, idleSeconds: 3600),
                    ],
                    manifest: ManifestStatus(
                        files: ["/etc/accmon/manifest.json"], entries: 5, loadedAt: 1_790_000_000.5,
                        lastFailure: ["m.json:1:2: version: missing"], rejectedAccessories: 2))))
        messages.append(
            .status(
                id: id,
                DaemonStatus(
                    daemonVersion: "", protocolVersion: 0, uptimeSeconds: 0, connectedAccessories: 0, sessions: 0,
                    sequence: 0, simulate: false)))
        messages.append(.ok(id: id, connectionID: nil))
        messages.append(.ok(id: id, connectionID: ConnectionID(5)))
        messages.append(.history(id: id, entries: [], truncated: false))
        var random = SplitMix64(seed: 29)
        messages.append(
            .history(
                id: id, entries: (0..<5).map { _ in Fixtures.randomHistoryEntry(using: &random) }, truncated: true))
        messages.append(.error(id: id, ProtocolError(.invalidField, "subscribe: filter.kind: unknown kind")))
        messages.append(.error(id: id, ProtocolError(ProtocolError.Code(rawValue: "future-code"), "")))
    }
    for accessory in [Fixtures.fullAccessory, Fixtures.awkwardAccessory, Fixtures.minimalAccessory] {
        messages.append(.event(AccessoryEvent(.connect, sequence: 1, accessory: accessory)))
        messages.append(.event(AccessoryEvent(.disconnect, sequence: UInt64.max, accessory: accessory)))
        messages.append(
            .event(AccessoryEvent(.connect, sequence: 2, accessory: accessory, rejection: "no entry matches")))
    }
    for filter in Fixtures.filters {
        messages.append(
            .restore(RestoreState(filter: filter, acknowledged: 17, accessories: [Fixtures.fullAccessory])))
    }
    messages.append(.restore(RestoreState(filter: .all, acknowledged: 0, accessories: [])))
    messages.append(
        .restore(
            RestoreState(
                filter: AccessoryFilter(kind: .usb), acknowledged: UInt64.max,
                accessories: [Fixtures.awkwardAccessory, Fixtures.minimalAccessory])))
    messages.append(.restored(sequence: 0))
    messages.append(.restored(sequence: UInt64.max))
    for message in claimMessages { messages.append(message) }
    messages.append(.shutdown(reason: "SIGTERM"))
    messages.append(.shutdown(reason: ""))
    return messages
}()

/// Checks that an encoded line is one line: it ends with the only newline in it.
private func expectSingleLine(_ line: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(line.last == 0x0A, sourceLocation: sourceLocation)
    #expect(line.dropLast().contains(0x0A) == false, sourceLocation: sourceLocation)
}

@Test func clientMessageFixturesCoverEveryRequestCase() {
    let covered = Set(clientRequests.map(caseName))
    #expect(
        covered == [
            "hello", "subscribe", "unsubscribe", "suspend", "resume", "acknowledge", "list", "status", "reload",
            "history", "simulateConnect", "simulateDisconnect", "claim", "release", "claims",
        ])
    let ids = Set(clientMessages.map(\.id))
    #expect(ids.contains(nil) && ids.contains(.number(7)) && ids.contains(.string("req-1")))
}

@Test(arguments: clientMessages)
func clientMessageRoundTripsThroughTheCodec(_ message: ClientMessage) throws {
    let codec = ProtocolCodec()
    let line = codec.encode(message)
    expectSingleLine(line)
    let decoded = try codec.decodeClientMessage(line.dropLast()).get()
    #expect(decoded == message, "\(String(decoding: line, as: UTF8.self))")
}

@Test func allFilterIsEncodedWithoutAFilterField() {
    let codec = ProtocolCodec()
    let line = String(decoding: codec.encode(ClientMessage(id: .number(3), .subscribe(.all))), as: UTF8.self)
    #expect(line == "{\"id\":3,\"type\":\"subscribe\"}\n")
}

@Test func filterProtocolPartIsNamedProtocolOnTheWire() {
    let codec = ProtocolCodec()
    let line = String(
        decoding: codec.encode(ClientMessage(.list(AccessoryFilter(protocolString: "com.x")))), as: UTF8.self)
    #expect(line == "{\"filter\":{\"protocol\":\"com.x\"},\"type\":\"list\"}\n")
}

@Test func decodesHandWrittenClientLines() throws {
    let codec = ProtocolCodec()
    let cases: [(String, ClientMessage)] = [
        (#"{"type":"status"}"#, ClientMessage(.status)),
        ("  {\"id\":\"a\", \"type\":\"unsubscribe\"}\r", ClientMessage(id: .string("a"), .unsubscribe)),
        (
            #"{"type":"hello","versions":[1],"id":9}"#,
            ClientMessage(id: .number(9), .hello(versions: [1], clientName: ""))
        ),
        (#"{"type":"subscribe","filter":null}"#, ClientMessage(.subscribe(.all))),
        (#"{"type":"list","filter":{}}"#, ClientMessage(.list(.all))),
        (#"{"type":"status","id":null,"extra":[1,{"x":true}]}"#, ClientMessage(.status)),
        (
            #"{"type":"simulate","action":"connect","accessory":{"kind":"usb","vendorID":"1d6b","serialNumber":"S1"}}"#,
            ClientMessage(.simulateConnect(Accessory(kind: .usb, serialNumber: "S1", vendorID: "1d6b")))
        ),
        (
            #"{"type":"simulate","action":"disconnect","connectionID":12}"#,
            ClientMessage(.simulateDisconnect(ConnectionID(12)))
        ),
    ]
    for (line, expected) in cases {
        #expect(try codec.decodeClientMessage(Array(line.utf8)).get() == expected, "\(line)")
    }
}

@Test func decodedAccessoryWithoutIDGetsTheDerivedOne() throws {
    let codec = ProtocolCodec()
    let line =
        #"{"type":"simulate","action":"connect","accessory":"#
        + #"{"kind":"serial","vendorID":"0403","productID":"6001","portPath":"1-2"}}"#
    guard case .simulateConnect(let accessory) = try codec.decodeClientMessage(Array(line.utf8)).get().request else {
        Issue.record("not a simulate connect")
        return
    }
    #expect(accessory.accessoryID == "serial:0403:6001:port=1-2")
    #expect(accessory.connectionID == ConnectionID(0))
}

@Test func fullAccessoryFixtureSetsEveryField() {
    // Found by reflection, so that a property added to Accessory later must be set here too.
    let children = Mirror(reflecting: Fixtures.fullAccessory).children
    #expect(children.count >= 15)
    for child in children {
        let isSet: Bool =
            switch child.value {
            case let text as String: !text.isEmpty
            case let list as [String]: !list.isEmpty && !list.contains("")
            case let id as ConnectionID: id.rawValue != 0
            case is AccessoryKind: true
            default: false
            }
        #expect(isSet, "Fixtures.fullAccessory.\(child.label ?? "?") is empty or of an unknown type")
    }
    #expect(Fixtures.fullAccessory.accessoryID != Fixtures.fullAccessory.derivedAccessoryID)
}

@Test func serverMessageFixturesCoverEveryCase() {
    let covered = Set(serverMessages.map(caseName))
    #expect(
        covered == [
            "hello", "restore", "restored", "snapshot", "list", "event.connect", "event.disconnect", "status", "ok",
            "error", "shutdown", "history", "claim", "claims", "claimNotice", "claimUpdate",
        ])
}

@Test(arguments: serverMessages)
func serverMessageRoundTripsThroughTheCodec(_ message: ServerMessage) throws {
    let codec = ProtocolCodec()
    let line = codec.encode(message)
    expectSingleLine(line)
    let decoded = try codec.decodeServerMessage(line.dropLast())
    #expect(decoded == message, "\(String(decoding: line, as: UTF8.self))")
}

@Test func accessoryIsEncodedWithEveryFieldEvenWhenEmpty() {
    let codec = ProtocolCodec()
    let event = AccessoryEvent(.connect, sequence: 3, accessory: Accessory(kind: .usb, accessoryID: "x"))
    let line = String(decoding: codec.encode(.event(event)), as: UTF8.self)
    #expect(line.hasPrefix("{\"accessory\":{\"accessoryID\":\"x\",\"connectionID\":0,"))
    #expect(line.hasSuffix("},\"seq\":3,\"type\":\"connect\"}\n"))
    #expect(line.contains("\"kind\":\"usb\""))
    // Every other property, found by reflection so that a new one is covered too, is on the wire, empty.
    for child in Mirror(reflecting: event.accessory).children {
        guard let field = child.label, !["kind", "accessoryID", "connectionID"].contains(field) else { continue }
        switch child.value {
        case is String: #expect(line.contains("\"\(field)\":\"\""), "\(field)")
        case is [String]: #expect(line.contains("\"\(field)\":[]"), "\(field)")
        default: Issue.record("\(field): a property of a type this test does not know")
        }
    }
}

@Test func unknownDaemonMessageTypeIsReported() {
    let codec = ProtocolCodec()
    #expect(throws: ProtocolError(.unknownType, "daemon message: type: unknown type 'teleport'")) {
        try codec.decodeServerMessage(Array("{\"type\":\"teleport\"}".utf8))
    }
    #expect {
        try codec.decodeServerMessage(Array("{\"type\":\"ok\"".utf8))
    } throws: { error in
        (error as? ProtocolError)?.code == .malformedJSON
    }
}
