import Foundation
import Glibc

/// Where the built `accmond` and `accmon` are: next to the test bundle, in the build products directory.
public enum Binaries {
    /// The build products directory: the first directory at or above `/proc/self/exe` that holds `accmond`.
    public static let directory: Result<URL, LocateError> = {
        let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        var directory = executable.deletingLastPathComponent()
        var searched: [String] = []
        while true {
            searched.append(directory.path)
            if FileManager.default.isExecutableFile(atPath: directory.appendingPathComponent("accmond").path) {
                return .success(directory)
            }
            let parent = directory.deletingLastPathComponent()
            if parent.path == directory.path { break }
            directory = parent
        }
        return .failure(
            LocateError(
                description: "integration tests: accmond: not found next to the test bundle \(executable.path); "
                    + "searched \(searched.joined(separator: ", ")). Build first: "
                    + "`swift build --scratch-path PATH --build-tests`"))
    }()

    public struct LocateError: Error, CustomStringConvertible {
        public var description: String
        public init(description: String) { self.description = description }
    }

    /// The path of the built executable `name` (`accmond`, `accmon`, `AccmonExampleWatcher`).
    public static func url(_ name: String) throws -> URL {
        let url = try directory.get().appendingPathComponent(name)
        guard FileManager.default.isExecutableFile(atPath: url.path) else {
            throw LocateError(description: "integration tests: \(name): not found at \(url.path); build it first")
        }
        return url
    }

    public static var accmond: URL { get throws { try url("accmond") } }
    public static var accmon: URL { get throws { try url("accmon") } }
}

/// A fresh directory under `/tmp`, removed in `deinit`. Short, so that socket paths stay under 107 bytes.
public final class TemporaryDirectory: Sendable {
    public let path: String

    public init() throws {
        var template = Array("/tmp/accmon-it-XXXXXX".utf8CString)
        guard let created = mkdtemp(&template) else {
            throw Binaries.LocateError(description: "mkdtemp: \(String(cString: strerror(errno)))")
        }
        path = String(cString: created)
    }

    public func file(_ name: String) -> String { "\(path)/\(name)" }

    deinit {
        try? FileManager.default.removeItem(atPath: path)  // try?: best-effort cleanup of a temp dir
    }
}

/// The repository's files the tests use (scripts under `Tests/`).
public enum Repository {
    /// The repository root: two levels above this file (`Tests/AccmonTestSupport/`).
    public static let root: URL = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()

    /// A file of the repository, by its path from the root.
    public static func file(_ path: String) -> URL { root.appendingPathComponent(path) }
}
