import AccmonSys
import AccmonSystemd
import Glibc

/// Log levels, after swift-log's seven.
public enum LogLevel: String, Sendable, Comparable, CaseIterable {
    case trace, debug, info, notice, warning, error, critical

    private var rank: Int { Self.allCases.firstIndex(of: self)! }
    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rank < rhs.rank }
}

/// Where a ``Logger`` writes.
public enum LogDestination: Sendable, Hashable {
    /// One plain line per message on standard error.
    case standardError
    /// One journal entry per message (sd_journal_sendv(3)), with a `MESSAGE_ID` for its kind, the code location and
    /// each metadata item as a field of its own (`accessory.id` becomes `ACCESSORY_ID`). For when standard error is
    /// the journal (``Journal/standardErrorIsJournal``); falls back to standard error when the journal cannot be
    /// reached.
    case journal
}

/// A small logger shaped like swift-log's: a label, a minimum level, metadata. One line per message, written to
/// standard error at once (never buffered), so that lines from several threads do not mix; or one journal entry per
/// message when ``destination`` is ``LogDestination/journal``.
public struct Logger: Sendable {
    /// What is logging, such as `accmond` (the journal's `SYSLOG_IDENTIFIER`).
    public var label: String
    /// Messages below this level are dropped.
    public var level: LogLevel
    /// Where messages go.
    public var destination: LogDestination

    /// Creates a logger.
    public init(label: String, level: LogLevel = .info, destination: LogDestination = .standardError) {
        self.label = label
        self.level = level
        self.destination = destination
    }

    /// Logs `message`, a message of kind `id`, with `metadata` (keys with dots, such as `client.pid`) when `level`
    /// is enabled.
    public func log(
        _ level: LogLevel, _ id: LogMessageID, _ message: @autoclosure () -> String,
        _ metadata: @autoclosure () -> [String: String] = [:], file: String = #fileID, function: String = #function,
        line: UInt = #line
    ) {
        guard level >= self.level else { return }
        let text = message()
        let metadata = metadata()
        if destination == .journal {
            do {
                try Journal.send(
                    journalFields(level, id, text, metadata, file: file, function: function, line: line))
                return
            } catch {
                // The journal is gone (journald restarting): the line below still reaches stderr, which is the journal
                // stream or the console.
            }
        }
        var output = "\(label)[\(getpid())]: \(level.rawValue): \(text)"
        for key in metadata.keys.sorted() { output += " \(key)=\(metadata[key]!)" }
        output += "\n"
        try? FileDescriptor.standardError.writeAll(output.utf8)  // try?: nowhere left to report a failed log write
    }

    /// The journal fields of one message: `MESSAGE`, `PRIORITY`, `SYSLOG_IDENTIFIER`, `MESSAGE_ID`, `CODE_*`, the
    /// level's name as `ACCMON_LEVEL`, and one field per metadata item.
    func journalFields(
        _ level: LogLevel, _ id: LogMessageID, _ text: String, _ metadata: [String: String], file: String,
        function: String, line: UInt
    ) -> [(name: String, value: String)] {
        var fields: [(name: String, value: String)] = [
            ("MESSAGE", text),
            ("PRIORITY", String(level.syslogPriority)),
            ("SYSLOG_IDENTIFIER", label),
            ("MESSAGE_ID", id.rawValue),
            ("CODE_FILE", file),
            ("CODE_LINE", String(line)),
            ("CODE_FUNC", function),
            ("ACCMON_LEVEL", level.rawValue),
        ]
        for key in metadata.keys.sorted() {
            fields.append((Self.journalFieldName(key), metadata[key]!))
        }
        return fields
    }

    /// A metadata key as a journal field name: upper case, other characters than letters and digits as `_`, no
    /// leading `_` or digit (journald reserves or drops those), at most 64 bytes: `client.pid` becomes `CLIENT_PID`.
    static func journalFieldName(_ key: String) -> String {
        var name = String(
            key.uppercased().unicodeScalars.map { scalar -> Character in
                (scalar.isASCII && (("A"..."Z").contains(scalar) || ("0"..."9").contains(scalar)))
                    ? Character(scalar) : "_"
            })
        while name.hasPrefix("_") { name.removeFirst() }
        if name.isEmpty || name.first!.isNumber { name = "ACCMON_" + name }
        return String(name.prefix(64))
    }

    public func trace(
        _ id: LogMessageID, _ message: @autoclosure () -> String, _ metadata: @autoclosure () -> [String: String] = [:],
        file: String = #fileID, function: String = #function, line: UInt = #line
    ) {
        log(.trace, id, message(), metadata(), file: file, function: function, line: line)
    }
    public func debug(
        _ id: LogMessageID, _ message: @autoclosure () -> String, _ metadata: @autoclosure () -> [String: String] = [:],
        file: String = #fileID, function: String = #function, line: UInt = #line
    ) {
        log(.debug, id, message(), metadata(), file: file, function: function, line: line)
    }
    public func info(
        _ id: LogMessageID, _ message: @autoclosure () -> String, _ metadata: @autoclosure () -> [String: String] = [:],
        file: String = #fileID, function: String = #function, line: UInt = #line
    ) {
        log(.info, id, message(), metadata(), file: file, function: function, line: line)
    }
    public func notice(
        _ id: LogMessageID, _ message: @autoclosure () -> String, _ metadata: @autoclosure () -> [String: String] = [:],
        file: String = #fileID, function: String = #function, line: UInt = #line
    ) {
        log(.notice, id, message(), metadata(), file: file, function: function, line: line)
    }
    public func warning(
        _ id: LogMessageID, _ message: @autoclosure () -> String, _ metadata: @autoclosure () -> [String: String] = [:],
        file: String = #fileID, function: String = #function, line: UInt = #line
    ) {
        log(.warning, id, message(), metadata(), file: file, function: function, line: line)
    }
    public func error(
        _ id: LogMessageID, _ message: @autoclosure () -> String, _ metadata: @autoclosure () -> [String: String] = [:],
        file: String = #fileID, function: String = #function, line: UInt = #line
    ) {
        log(.error, id, message(), metadata(), file: file, function: function, line: line)
    }
    public func critical(
        _ id: LogMessageID, _ message: @autoclosure () -> String, _ metadata: @autoclosure () -> [String: String] = [:],
        file: String = #fileID, function: String = #function, line: UInt = #line
    ) {
        log(.critical, id, message(), metadata(), file: file, function: function, line: line)
    }
}

extension LogLevel {
    /// The syslog priority the journal files the level under (`PRIORITY`): 2 critical … 7 debug and trace.
    var syslogPriority: Int {
        switch self {
        case .trace, .debug: 7
        case .info: 6
        case .notice: 5
        case .warning: 4
        case .error: 3
        case .critical: 2
        }
    }
}

/// The journal's `MESSAGE_ID` of a kind of message, so that `journalctl MESSAGE_ID=…` finds every message of a kind
/// whatever its text: for example every accessory the manifest rejected
/// (`journalctl -u accmond MESSAGE_ID=338d4c130ef244d2acb9c42b41f5a5f1`).
///
/// Every log call names its kind: rewording a message never changes its id. The ids are random 128-bit values (as
/// systemd-id128(1) makes) and never change; docs/ARCHITECTURE.md lists them.
public struct LogMessageID: Sendable, Hashable, CustomStringConvertible {
    /// 32 lowercase hex digits.
    public let rawValue: String

    public init(_ rawValue: StaticString) { self.rawValue = rawValue.description }

    public var description: String { rawValue }

    /// The daemon is listening and serving.
    public static let started = LogMessageID("fde6b016229a48e0801432d9f53682a1")
    /// The daemon received a stop signal.
    public static let stopping = LogMessageID("69831af2b0f44ae19cf54675765c75df")
    /// The daemon stopped.
    public static let stopped = LogMessageID("779a69333cd74ba7aa4135992eb1994f")
    /// The daemon could not start.
    public static let startFailed = LogMessageID("3ac8058072ff4d53a3677d4f3ab4b884")
    /// A client connected.
    public static let clientConnected = LogMessageID("f7239e2f341549be8c524fb4efe4cf41")
    /// A client disconnected or was disconnected.
    public static let clientDisconnected = LogMessageID("b51421ba26a5403e8161a68557021bf5")
    /// A client's session changed: hello, suspend, resume, caught up.
    public static let clientSession = LogMessageID("e068f8aad43a4e30b62c600efb792963")
    /// A client does not read its events: it is suspended, its events queued.
    public static let clientSlow = LogMessageID("0cd53833ba7e453f91eca82d3cd46748")
    /// A session with a restore id was preserved, restored, expired or dropped.
    public static let preservedSession = LogMessageID("f93098b595d14a0f93f0212a30e3b553")
    /// An accessory connected.
    public static let accessoryConnected = LogMessageID("8ff23dc2b6974d6f8be8e35783253ded")
    /// An accessory disconnected.
    public static let accessoryDisconnected = LogMessageID("85a4f6f1a54c4e1f84298eaaed28495b")
    /// The manifest rejected an accessory (when it connected, or at a reload).
    public static let accessoryRejected = LogMessageID("338d4c130ef244d2acb9c42b41f5a5f1")
    /// A manifest was put in force.
    public static let manifestLoaded = LogMessageID("28cdb399ce4f4f3d842766a49c3bcdc5")
    /// A reload of the manifest was asked for (SIGHUP).
    public static let reloadRequested = LogMessageID("0b386fc5d7db4842b78cb3cf0431895e")
    /// A manifest was refused for its problems; the previous one stays in force.
    public static let manifestRefused = LogMessageID("ebea056563174c16a295f673599c1613")
    /// The devices present at start were enumerated.
    public static let coldplug = LogMessageID("e3b952fac2bf4e1ca1db6eea7b7cb99d")
    /// A udev device was not taken as an accessory.
    public static let deviceSkipped = LogMessageID("8a4768054a5142d9ac360dcf30caf29d")
    /// The udev monitor failed.
    public static let udevFailure = LogMessageID("3f42ed923b5644d0b2a1b5ae6edc7546")
    /// A socket or epoll call failed.
    public static let transportFailure = LogMessageID("4c3b6c3addfc46c18faf208a8b10c061")
    /// The state kept across restarts was restored, or could not be read or saved.
    public static let state = LogMessageID("04945d5b10d54e0e811f2dd029356c4b")
    /// The service manager: the watchdog, notifications it does not take.
    public static let serviceManager = LogMessageID("33cc16c8efc24b609a1ac9442396a894")
    /// A client or a user reached one of the daemon's limits.
    public static let limitReached = LogMessageID("83c01262680f475d9093ac8805823490")
    /// The MQTT bridge's connection to its broker: connected, lost, refused.
    public static let bridgeBroker = LogMessageID("e65b2a33c805494e8a14546b0b587e6f")
    /// The MQTT bridge's session with accmond: subscribed, restored, suspended, reconnecting.
    public static let bridgeAccmond = LogMessageID("f4a146057aa54296ab73c033625a0ac1")
    /// The MQTT bridge could not publish an event (skipped, or refused by the broker).
    public static let bridgePublication = LogMessageID("1cb266c018e342b89039f19f51ce0417")
    /// The MQTT bridge made the broker's retained state equal to the truth, or found others' edits.
    public static let bridgeReconciliation = LogMessageID("c655aa66e5804ac4b95f7d37f82b9e99")
    /// A configuration file had problems.
    public static let configuration = LogMessageID("0ccbb48936a9479f99f1d1c9d5fa9db0")
    /// A systemd unit accmond starts or stops for an accessory (launch on connect): a job sent, done, failed, retried
    /// or given up.
    public static let unitJob = LogMessageID("e1929a28fb984ba7b8364f8cff8414ed")
    /// A registered app's relaunch: registered, started, waiting for a limit, or refused.
    public static let relaunch = LogMessageID("84643e99d70141cb8bfe3bc7817ea723")
    /// A claim was granted (at once, or to a claimer waiting in line), or taken up again after a restart.
    public static let claimGranted = LogMessageID("40a39bc7c4d54527a11ff65866ec14e4")
    /// A claim ended: released, its holder gone, its accessory not back in time, or past its maximum duration.
    public static let claimReleased = LogMessageID("ad5d7062306c4ee99a7fb64c3cc8c73f")
    /// Someone asked for what a claim holds.
    public static let claimContention = LogMessageID("2367ca75d45a4f9b9963df85c919fefc")
    /// An admin broke a claim.
    public static let claimBroken = LogMessageID("502715a4fe8f44a2b49e91a33469d777")
    /// Enforcing a claim on device nodes, or restoring them, failed or was not possible.
    public static let claimEnforcement = LogMessageID("977a6730426f4b8cbad3d2d272c427fd")
    /// accmon-nodes held, released or cut a device node, applied a claim again after a rewrite, or marked a port.
    public static let nodeChange = LogMessageID("8b9bd0be8bb04e6eafcca9fe1a13b197")
    /// accmon-nodes refused a client or a request.
    public static let nodeRefusal = LogMessageID("8f6cb048d10a434ca14efe3950efaa6d")
    /// accmond's connection to the system bus: connected, its name owned, lost, reconnecting.
    public static let bus = LogMessageID("2ab4095702014689988cff2ee0c36c6a")
    /// A bus peer's call or subscription: refused, a subscriber that does not acknowledge, a peer gone.
    public static let busPeer = LogMessageID("a21e2d4165214438875448fa2ebd46e2")

    /// Every kind, for the docs and the tests.
    public static let all: [(name: String, id: LogMessageID)] = [
        ("started", started), ("stopping", stopping), ("stopped", stopped), ("startFailed", startFailed),
        ("clientConnected", clientConnected), ("clientDisconnected", clientDisconnected),
        ("clientSession", clientSession), ("clientSlow", clientSlow), ("preservedSession", preservedSession),
        ("accessoryConnected", accessoryConnected), ("accessoryDisconnected", accessoryDisconnected),
        ("accessoryRejected", accessoryRejected), ("manifestLoaded", manifestLoaded),
        ("reloadRequested", reloadRequested), ("manifestRefused", manifestRefused), ("coldplug", coldplug),
        ("deviceSkipped", deviceSkipped),
        ("udevFailure", udevFailure), ("transportFailure", transportFailure), ("state", state),
        ("serviceManager", serviceManager), ("limitReached", limitReached),
        ("bridgeBroker", bridgeBroker), ("bridgeAccmond", bridgeAccmond), ("bridgePublication", bridgePublication),
        ("bridgeReconciliation", bridgeReconciliation), ("configuration", configuration), ("unitJob", unitJob),
        ("relaunch", relaunch), ("claimGranted", claimGranted), ("claimReleased", claimReleased),
        ("claimContention", claimContention), ("claimBroken", claimBroken), ("claimEnforcement", claimEnforcement),
        ("nodeChange", nodeChange), ("nodeRefusal", nodeRefusal), ("bus", bus), ("busPeer", busPeer),
    ]
}
