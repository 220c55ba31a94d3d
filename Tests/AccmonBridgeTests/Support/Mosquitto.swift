import AccmonTestSupport
import Foundation
import Glibc

/// A real mosquitto started by a test on a free local port, with its own configuration and directory; killed in
/// `deinit`.
final class Mosquitto: @unchecked Sendable {
    struct Options {
        /// Keep retained messages on disk (`persistence_location` in the broker's directory, saved every second).
        var persistence = false
        /// Serve TLS with these files, and ask for a client certificate when `requireCertificate`.
        var tls: TestCertificates?
        var requireCertificate = false
        /// `password_file` (made with mosquitto_passwd); without it, anonymous clients are allowed.
        var passwordFile: String?
        var aclFile: String?
        /// More lines of mosquitto.conf, such as `max_queued_messages 50`.
        var settings: [String] = []
    }

    let directory: TemporaryDirectory
    let options: Options
    let port: Int
    private(set) var process: ChildProcess
    private var generation = 0

    var url: String { "\(options.tls == nil ? "mqtt" : "mqtts")://127.0.0.1:\(port)" }

    /// Starts a broker; retries on another port when the one picked was taken meanwhile.
    static func start(_ options: Options = Options()) async throws -> Mosquitto {
        let directory = try TemporaryDirectory()
        var lastLog = ""
        for _ in 0..<5 {
            let port = try freeTCPPort()
            let process = try launch(options, port: port, directory: directory, generation: 0)
            if try await waitUntilAccepting(process, port: port) {
                return Mosquitto(directory: directory, options: options, port: port, process: process)
            }
            lastLog = process.stderr
            process.kill()
        }
        throw Binaries.LocateError(description: "mosquitto did not start: \(lastLog)")
    }

    private init(directory: TemporaryDirectory, options: Options, port: Int, process: ChildProcess) {
        self.directory = directory
        self.options = options
        self.port = port
        self.process = process
    }

    /// Kills the broker with SIGKILL: no goodbye to any client, nothing saved since the last autosave.
    func kill9() { process.kill() }

    /// Starts the broker again on the same port and directory (with what its persistence kept, if any).
    func restart() async throws {
        process.kill()
        generation += 1
        for _ in 0..<50 {
            process = try Self.launch(options, port: port, directory: directory, generation: generation)
            if try await Self.waitUntilAccepting(process, port: port) { return }
            try await Task.sleep(for: .milliseconds(100))  // the port may linger a moment after SIGKILL
        }
        throw Binaries.LocateError(description: "mosquitto did not restart on \(port): \(process.stderr)")
    }

    /// The broker's log so far.
    var log: String { process.stderr }

    private static func launch(
        _ options: Options, port: Int, directory: TemporaryDirectory, generation: Int
    ) throws -> ChildProcess {
        var lines = [
            "listener \(port) 127.0.0.1",
            // As root, mosquitto would drop to its own user, which cannot write the test's directory.
            "user root",
            "log_dest stderr",
            "log_type error", "log_type warning", "log_type notice", "log_type information",
            "allow_anonymous \(options.passwordFile == nil)",
        ]
        if options.persistence {
            lines += ["persistence true", "persistence_location \(directory.path)/", "autosave_interval 1"]
        } else {
            lines.append("persistence false")
        }
        if let tls = options.tls {
            lines += ["cafile \(tls.ca)", "certfile \(tls.serverCertificate)", "keyfile \(tls.serverKey)"]
            lines.append("require_certificate \(options.requireCertificate)")
        }
        if let passwordFile = options.passwordFile { lines.append("password_file \(passwordFile)") }
        if let aclFile = options.aclFile { lines.append("acl_file \(aclFile)") }
        lines += options.settings
        let config = directory.file("mosquitto.conf")
        try (lines.joined(separator: "\n") + "\n").write(toFile: config, atomically: true, encoding: .utf8)
        return try ChildProcess(
            URL(fileURLWithPath: "/usr/sbin/mosquitto"), ["-c", config], name: "mosquitto-\(generation)",
            directory: directory)
    }

    /// Waits until the broker accepts TCP connections; false when it exited (the port was taken).
    private static func waitUntilAccepting(_ process: ChildProcess, port: Int) async throws -> Bool {
        let accepting = await eventually(timeout: .seconds(10), interval: .milliseconds(10)) {
            !process.isRunning || canConnect(port: port)
        }
        return accepting && process.isRunning
    }

    deinit { process.kill() }
}

/// A TCP port on 127.0.0.1 that nothing listens on now (the kernel's pick for port 0).
func freeTCPPort() throws -> Int {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(descriptor) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw -> Int32 in
            guard bind(descriptor, raw, length) == 0 else { return -1 }
            return getsockname(descriptor, raw, &length)
        }
    }
    guard bound == 0 else { throw Binaries.LocateError(description: "bind: \(String(cString: strerror(errno)))") }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// Whether something accepts TCP connections on 127.0.0.1:`port`.
func canConnect(port: Int) -> Bool {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(descriptor) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    return withUnsafePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
        }
    }
}
