import AccmonClient
import AccmonManifest
import AccmonOptions
import Glibc
import Synchronization

struct WatchCommand: Command {
    static let name = "watch"
    static let abstract = "Show accessories as they connect and disconnect, until Ctrl-C."
    static let usage = """
        Usage: accmon watch [--json] [--all] [--restore-id ID [--relaunch TEMPLATE]] [--kind KIND] [--vendor ID]
                            [--product ID] [--protocol NAME] [--socket PATH]
               accmon watch --broker URL [--host GLOB] [--json] [FILTER OPTIONS] [BROKER OPTIONS]

        \(abstract)
        First prints the accessories connected now (as "present", with their claim's holder), then one line per
        event: time, connect or disconnect, kind, vendor:product, name, serial, device node, connection id; and
        one per claim change ("claimed" by whom, "released").

        Options:
          --json             print the protocol's messages as NDJSON: the snapshot (each accessory with its
                             "claim" when claimed), then each event and "claim-update"
          --all              also accessories the manifest rejected, shown as "rejected: <reason>" (root and the
                             manifest's admins only)
          --restore-id ID    keep the session across restarts of accmon and accmond: when accmon watch starts
                             again with the same id, it shows what it knew (with --json: a "session" line
                             with "restored":true), then what it missed; it reconnects by itself
          --relaunch TEMPLATE
                             with --restore-id: register a systemd template (accmon-NAME@.service, with
                             User=%i) that accmond starts as TEMPLATE's instance for your uid when an event
                             waits for the session while accmon watch is not running (the manifest's
                             "relaunch" must allow it)
        \(filterOptionsHelp)
        \(CommonOptions.help)

        Fleet view (every host's bridge, through an MQTT broker; with --json: a "fleet" line, then "connect",
        "disconnect" and "status" lines, each with its "host"; a claimed accessory's object has its "claim", and a
        claim's change is a "disconnect" of the old object and a "connect" of the new):
        \(FleetOptions.help)

        """

    var selection: SelectionOptions
    var restoreID: String?
    var relaunch: String?
    var common: CommonOptions { selection.common }
    var json: Bool { selection.json }
    var all: Bool { selection.all }
    var filter: AccessoryFilter { selection.filter }

    init(_ arguments: inout OptionCursor, socket: String?) throws(UsageError) {
        selection = SelectionOptions(common: CommonOptions(socket: socket))
        while let option = try arguments.next() {
            if option == "--restore-id" {
                restoreID = try arguments.value(for: option)
            } else if option == "--relaunch" {
                relaunch = try arguments.value(for: option)
            } else if try !selection.parse(option, &arguments) {
                throw UsageError("unknown option '\(option)'")
            }
        }
        if all && restoreID != nil { throw UsageError("--all and --restore-id do not go together") }
        if relaunch != nil && restoreID == nil { throw UsageError("--relaunch needs --restore-id") }
        if let relaunch, let problem = LaunchTemplate.problem(with: relaunch) {
            throw UsageError("--relaunch: '\(relaunch)' is refused: \(problem)")
        }
        fleetView = try selection.fleet.validate(restoreID: restoreID, all: all)
    }

    /// Whether `--broker` asks for the fleet view.
    var fleetView = false

    /// The first `--json` line of a session with a restore id.
    struct SessionLine: Encodable {
        var type = "session"
        var restored: Bool
        var accessories: [Accessory]
    }

    func run() async throws(AccmonError) {
        if fleetView {
            try await selection.fleet.watch(filter: filter, json: json)
            return
        }
        if let restoreID {
            try await runSession(restoreID: restoreID)
            return
        }
        let connection = try await common.connect()
        // Printed on the connection's reader thread as each read of the socket is handled: no hop to another thread.
        let printer = WatchPrinter(json: json, style: .standardOutput)
        let observation = try await connection.subscribe(
            filter, includeRejected: all, onUpdate: { update, eventLine in printer.add(update, eventLine: eventLine) },
            afterRead: { printer.flush() }, onClaimUpdate: { printer.add($0) })
        try await observation.waitForEnd()
    }
}

/// Collects what `accmon watch` prints for the updates of one read of the socket, and writes it with one write.
final class WatchPrinter: Sendable {
    private let json: Bool
    private let style: Style
    private let pending = Mutex<[UInt8]>([])

    init(json: Bool, style: Style) {
        self.json = json
        self.style = style
    }

    /// Adds the lines for `update`; `eventLine` is an event's line as the daemon wrote it.
    func add(_ update: SubscriptionUpdate, eventLine: [UInt8]) {
        switch update {
        case .snapshot(let snapshot):
            if json {
                pending.withLock { $0 += ProtocolCodec().encode(.snapshot(id: nil, snapshot)) }
            } else {
                let lines = snapshot.accessories.map { accessory in
                    humanLine(
                        "present", accessory, rejection: snapshot.rejected[accessory.connectionID],
                        claim: snapshot.claims[accessory.connectionID], style: style)
                }
                pending.withLock { $0 += Array(lines.joined().utf8) }
            }
        case .event(let event):
            if json {
                // The daemon's line is what ProtocolCodec encodes for the event: print it as received.
                pending.withLock {
                    $0 += eventLine
                    $0.append(UInt8(ascii: "\n"))
                }
            } else {
                let line = humanLine(event.change.rawValue, event.accessory, rejection: event.rejection, style: style)
                pending.withLock { $0 += Array(line.utf8) }
            }
        }
    }

    /// Adds the line for a claim change.
    func add(_ update: ClaimUpdate) {
        if json {
            pending.withLock { $0 += ProtocolCodec().encode(.claimUpdate(update)) }
            return
        }
        let line =
            update.claim.map { claim in
                timestamp() + "  " + style.paint("claimed".padding(10), "35") + "  conn=\(update.connectionID)  "
                    + update.accessoryID + "  by " + holderLabel(claim)
                    + (claim.reason.isEmpty ? "" : ": \(quotedIfNeeded(claim.reason))")
                    + (claim.waiting > 0 ? "  (\(claim.waiting) waiting)" : "")
            } ?? timestamp() + "  " + style.paint("released".padding(10), "35") + "  conn=\(update.connectionID)  "
            + update.accessoryID
        pending.withLock { $0 += Array((line + "\n").utf8) }
    }

    /// Writes what was added since the last flush.
    func flush() {
        let bytes = pending.withLock { pending in
            defer { pending.removeAll(keepingCapacity: true) }
            return pending
        }
        if !bytes.isEmpty { writeOut(bytes) }
    }
}

extension WatchCommand {
    /// Watches through an ``AccmonSession``: survives restarts of both sides; printing an event consumes it.
    func runSession(restoreID: String) async throws(AccmonError) {
        let session = try await AccmonSession.start(
            socketPath: common.socket, clientName: "accmon watch", restoreID: restoreID, filter: filter,
            relaunch: relaunch)
        let style = Style.standardOutput
        if json {
            writeOut(jsonLine(SessionLine(restored: session.wasRestored, accessories: session.initialAccessories)))
        } else {
            if session.wasRestored { writeError("accmon: session '\(restoreID)' restored\n") }
            for accessory in session.initialAccessories {
                writeOut(humanLine(session.wasRestored ? "known" : "present", accessory, style: style))
            }
        }
        let states = Task {
            for await state in session.connectionStates {
                switch state {
                case .connected: writeError("accmon: connected to accmond\n")
                case .reconnecting(let attempt, let delay, let reason):
                    writeError("\(reason); reconnecting (attempt \(attempt), in \(delay) s)\n")
                case .closed: break
                }
            }
        }
        defer { states.cancel() }
        let codec = ProtocolCodec()
        for await event in session.events {
            if json {
                writeOut(String(decoding: codec.encode(.event(event)), as: UTF8.self))
            } else {
                writeOut(humanLine(event.change.rawValue, event.accessory, style: style))
            }
        }
    }
}
