import AccmonSys
import Glibc

/// Log levels, after swift-log's seven.
public enum LogLevel: String, Sendable, Comparable, CaseIterable {
    case trace, debug, info, notice, warning, error, critical

    private var rank: Int { Self.allCases.firstIndex(of: self)! }
    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rank < rhs.rank }
}

/// A small logger shaped like swift-log's: a label, a minimum level, metadata. One line per message, written to
/// standard error at once (never buffered), so that lines from several threads do not mix.
public struct Logger: Sendable {
    /// What is logging, such as `accmond`.
    public var label: String
    /// Messages below this level are dropped.
    public var level: LogLevel

    /// Creates a logger.
    public init(label: String, level: LogLevel = .info) {
        self.label = label
        self.level = level
    }

    /// Logs `message` with `metadata` (keys with dots, such as `client.pid`) when `level` is enabled.
    public func log(_ level: LogLevel, _ message: @autoclosure () -> String, _ metadata: [String: String] = [:]) {
        guard level >= self.level else { return }
        var line = "\(label)[\(getpid())]: \(level.rawValue): \(message())"
        for key in metadata.keys.sorted() { line += " \(key)=\(metadata[key]!)" }
        line += "\n"
        try? FileDescriptor.standardError.writeAll(line.utf8)  // try?: nowhere left to report a failed log write
    }

    public func debug(_ message: @autoclosure () -> String, _ metadata: [String: String] = [:]) {
        log(.debug, message(), metadata)
    }
    public func info(_ message: @autoclosure () -> String, _ metadata: [String: String] = [:]) {
        log(.info, message(), metadata)
    }
    public func notice(_ message: @autoclosure () -> String, _ metadata: [String: String] = [:]) {
        log(.notice, message(), metadata)
    }
    public func warning(_ message: @autoclosure () -> String, _ metadata: [String: String] = [:]) {
        log(.warning, message(), metadata)
    }
    public func critical(_ message: @autoclosure () -> String, _ metadata: [String: String] = [:]) {
        log(.critical, message(), metadata)
    }
    public func error(_ message: @autoclosure () -> String, _ metadata: [String: String] = [:]) {
        log(.error, message(), metadata)
    }
}
