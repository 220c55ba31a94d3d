import AccmonTestSupport
import Foundation
import Glibc
import Synchronization

/// An error in setting a udev scenario up or in driving it, with what is needed to understand it.
struct UdevTestError: Error, CustomStringConvertible {
    var description: String
}

/// Where things are: the repository (for the Python harness) and the build products (for `accmond` and `accmon`,
/// found by the shared ``Binaries``).
enum Locations {
    /// The repository root: three levels above this file (`Tests/AccmonUdevTests/Support/`).
    static let repository: URL = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The umockdev harness, `Tests/umockdev/testbed.py`.
    static var harness: URL { repository.appendingPathComponent("Tests/umockdev/testbed.py") }

    /// The built executable `name` (`accmond`, `accmon`).
    static func binary(_ name: String) throws -> URL {
        try Binaries.url(name)
    }
}

/// Whether this machine can run the umockdev suite: `unshare` (a private network namespace: as root directly,
/// otherwise inside a user namespace), `umockdev-wrapper`, and `/usr/bin/python3` with the UMockdev GObject typelib.
///
/// When something is missing the suite fails with the reason: `make test` installs the packages, and a missing one
/// must not silently turn the suite off.
enum UdevEnvironment {
    /// `unshare`'s flags for the harness's network namespace: `-n` as root, `-rn` (in a user namespace) otherwise.
    static let unshareFlags = geteuid() == 0 ? "-n" : "-rn"

    static let unavailableReason: String? = {
        for tool in ["/usr/bin/unshare", "/usr/bin/umockdev-wrapper", "/usr/bin/python3"]
        where !FileManager.default.isExecutableFile(atPath: tool) {
            return "\(tool) is missing (Debian: apt-get install umockdev gir1.2-umockdev-1.0 python3-gi util-linux)"
        }
        if !succeeds("/usr/bin/unshare", [unshareFlags, "sh", "-c", "sysctl -qw net.unix.max_dgram_qlen=4096"]) {
            return "`unshare \(unshareFlags)` with a sysctl in the new namespace fails (user namespaces disabled?)"
        }
        let importUMockdev = "import gi; gi.require_version('UMockdev', '1.0'); from gi.repository import UMockdev"
        if !succeeds("/usr/bin/python3", ["-c", importUMockdev]) {
            return
                "/usr/bin/python3 cannot import gi's UMockdev (Debian: apt-get install python3-gi gir1.2-umockdev-1.0)"
        }
        return nil
    }()

    private static func succeeds(_ executable: String, _ arguments: [String]) -> Bool {
        let probe = Process()
        probe.executableURL = URL(fileURLWithPath: executable)
        probe.arguments = arguments
        probe.standardOutput = FileHandle.nullDevice
        probe.standardError = FileHandle.nullDevice
        do {
            try probe.run()
            probe.waitUntilExit()
        } catch {
            return false
        }
        return probe.terminationReason == .exit && probe.terminationStatus == 0
    }

    /// Throws the reason the suite cannot run here.
    static func check() throws {
        if let unavailableReason {
            throw UdevTestError(description: "udev tests cannot run here: \(unavailableReason)")
        }
    }
}

/// A fresh directory under `/tmp`, removed in `deinit`. Short, so that socket paths stay well under 108 bytes.
final class ScratchDirectory: Sendable {
    let path: String

    init() throws {
        var template = Array("/tmp/accmon-udev-XXXXXX".utf8CString)
        guard let created = mkdtemp(&template) else {
            throw UdevTestError(description: "mkdtemp: \(String(cString: strerror(errno)))")
        }
        path = String(cString: created)
    }

    func file(_ name: String) -> String { "\(path)/\(name)" }

    deinit {
        try? FileManager.default.removeItem(atPath: path)  // try?: best-effort cleanup of a temp dir
    }
}

/// A lock-protected value that closures and threads can share (a `Mutex` itself cannot be captured).
final class Locked<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    init(_ value: Value) { mutex = Mutex(value) }
    func withLock<Result>(_ body: (inout sending Value) throws -> sending Result) rethrows -> sending Result {
        try mutex.withLock(body)
    }
}

/// The last `count` lines of a file, for failure messages.
func tail(ofFile path: String, lines count: Int = 40) -> String {
    guard let data = FileManager.default.contents(atPath: path) else { return "(\(path): unreadable)" }
    let lines = String(decoding: data, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
    return lines.suffix(count).joined(separator: "\n")
}
