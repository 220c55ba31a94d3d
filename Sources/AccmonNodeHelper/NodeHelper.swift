public import AccmonLogging
import AccmonNodes
import AccmonSys
import AccmonSystemd
import FoundationEssentials
import Glibc

/// What `accmon-nodes` does in each of its modes; the executable parses its options and calls one.
public enum NodeHelper {
    /// The helper's settings.
    public struct Settings: Sendable {
        /// The user whose clients are served: a name or a number.
        public var allowedUser = "accmond"
        /// The records and the port marks.
        public var stateDirectory = "/run/accmon-nodes"
        /// The directory device nodes must be below.
        public var deviceDirectory = "/dev"
        /// A socket to bind when the service manager passes none.
        public var socketPath: String?
        /// The opener scanner's socket (`accmon-nodes --scan-openers`); `nil`: the helper scans `/proc` itself,
        /// seeing what its own privileges let it see.
        public var scannerSocket: String? = NodeHelper.defaultScannerSocketPath

        public init() {}
    }

    /// The helper's socket, as accmon-nodes.socket creates it.
    public static let defaultSocketPath = "/run/accmon-nodes.sock"
    /// The opener scanner's socket, as accmon-nodes-scan.socket creates it.
    public static let defaultScannerSocketPath = "/run/accmon-nodes-scan.sock"

    /// Serves accmond's requests on device nodes until SIGTERM; returns the exit status (0, or 1 when it cannot
    /// start).
    public static func serve(_ settings: Settings, logger: Logger) -> Int32 {
        let keeper: NodeKeeper
        do throws(NodeError) {
            keeper = try NodeKeeper(
                policy: .devices(in: settings.deviceDirectory, directory: UdevDeviceDirectory()),
                stateDirectory: settings.stateDirectory, watchingChanges: true,
                openerScanner: settings.scannerSocket.map { OpenerScanLink(socketPath: $0) as any OpenerScanner }
                    ?? LocalOpenerScanner())
        } catch {
            logger.critical(.startFailed, "\(error)")
            return 1
        }
        let held = keeper.held()
        return run(NodeService(keeper: keeper, logger: logger), settings, name: "accmon-nodes", logger: logger) {
            "\(held.nodes.count) nodes held, \(held.ports.count) ports marked (\(settings.stateDirectory))"
        }
    }

    /// Serves the helper's requests for the openers of its nodes until SIGTERM (``OpenerScanService``): the mode
    /// of `accmon-nodes-scan.service`, the one unit with the capabilities to look at every process's descriptors.
    public static func scanOpeners(_ settings: Settings, logger: Logger) -> Int32 {
        run(OpenerScanService(logger: logger), settings, name: "accmon-nodes --scan-openers", logger: logger) {
            "scanning /proc for the helper's nodes"
        }
    }

    private static func run(
        _ service: any LineService, _ settings: Settings, name: String, logger: Logger, status: () -> String
    ) -> Int32 {
        ignoreBrokenPipeSignal()
        SignalDescriptor.block([SIGTERM, SIGINT])
        let allowed: (uid: uid_t, name: String)
        if let number = UInt32(settings.allowedUser) {
            allowed = (number, "")
        } else if let uid = Accounts.userID(settings.allowedUser) {
            allowed = (uid, settings.allowedUser)
        } else {
            logger.critical(.startFailed, "--allow-user: \(settings.allowedUser): no such user")
            return 1
        }
        let listener: FileDescriptor
        switch takeListener(settings) {
        case .success(let descriptor): listener = descriptor
        case .failure(let problem):
            logger.critical(.startFailed, problem.description)
            return 1
        }
        logger.info(.started, "serving \(describe(allowed)); \(status())")
        _ = try? ServiceManager.notify("READY=1\nSTATUS=Serving \(describe(allowed))")  // try?: no manager, or gone
        do throws(Errno) {
            try LineServer(
                listener: listener, service: service, allowedUID: allowed.uid, allowedUser: describe(allowed),
                name: name, logger: logger
            ).run()
        } catch {
            logger.critical(.transportFailure, "poll: \(error)")
            return 1
        }
        _ = try? ServiceManager.notify("STOPPING=1")  // try?: no manager, or gone
        return 0
    }

    /// `accmond (uid 105)`, or `uid 4005` for a user given by number.
    static func describe(_ user: (uid: uid_t, name: String)) -> String {
        user.name.isEmpty ? "uid \(user.uid)" : "\(user.name) (uid \(user.uid))"
    }

    struct Problem: Error, CustomStringConvertible { var description: String }

    private static func takeListener(_ settings: Settings) -> Result<FileDescriptor, Problem> {
        let passed: [FileDescriptor]
        do throws(Errno) {
            passed = try ServiceManager.takePassedDescriptors()
        } catch {
            return .failure(Problem(description: "socket activation: LISTEN_FDS: \(error)"))
        }
        if let first = passed.first {
            guard passed.count == 1, (try? ServiceManager.isListeningUnixStreamSocket(first)) == true else {
                return .failure(Problem(description: "socket activation: expected one listening Unix stream socket"))
            }
            return .success(first)
        }
        guard let path = settings.socketPath else {
            return .failure(Problem(description: "no socket: start it through accmon-nodes.socket, or give --socket"))
        }
        let previous = umask(0o177)
        defer { umask(previous) }
        do throws(SocketError) {
            return .success(try UnixSocket.listen(path: path))
        } catch {
            return .failure(Problem(description: "\(error)"))
        }
    }

    /// Restores every node the records hold and removes every port mark (at package removal); prints one line per
    /// node. Returns 0 when every node was restored or is gone, 1 otherwise.
    public static func restoreAll(_ settings: Settings) -> Int32 {
        // No state directory: the helper never ran since boot, and nothing is held (nor is the directory made).
        guard (try? fileStatus(atPath: settings.stateDirectory)) != nil else { return 0 }  // try?: absent
        let keeper: NodeKeeper
        do throws(NodeError) {
            // A release touches only the inodes recorded when held: udev is not asked again.
            keeper = try NodeKeeper(
                policy: .devices(in: settings.deviceDirectory) { number throws(NodeError) in
                    throw NodeError(.notMarked, "restore-all", "\(number)", "no new node is held while restoring")
                }, stateDirectory: settings.stateDirectory)
        } catch {
            print(to: .standardError, "accmon-nodes: \(error)")
            return 1
        }
        for warning in keeper.takeWarnings() { print(to: .standardError, "accmon-nodes: \(warning)") }
        var failed = false
        for result in keeper.releaseAll() {
            if let outcome = result.outcome {
                print(
                    to: .standardOutput,
                    "\(result.path): \(outcome.result.rawValue)" + (outcome.restored.map { " to \($0)" } ?? ""))
            } else {
                failed = true
                print(to: .standardError, "accmon-nodes: \(result.error.map { "\($0)" } ?? result.path)")
            }
        }
        for port in keeper.held().ports {
            do throws(NodeError) {
                let triggered = try keeper.unmarkPort(port)
                print(
                    to: .standardOutput,
                    "port \(port): unmarked"
                        + (triggered.isEmpty ? "" : "; udev change for \(triggered.joined(separator: " "))"))
            } catch {
                failed = true
                print(to: .standardError, "accmon-nodes: \(error)")
            }
        }
        for warning in keeper.takeWarnings() { print(to: .standardError, "accmon-nodes: \(warning)") }
        return failed ? 1 : 0
    }

    /// Sends one request line to a running helper and prints its reply line; returns 0 when the reply says `ok`, 1
    /// when it does not, 69 when the helper cannot be reached.
    public static func request(_ line: String, socketPath: String) -> Int32 {
        let descriptor: FileDescriptor
        do throws(SocketError) {
            descriptor = try UnixSocket.connect(path: socketPath)
        } catch {
            print(to: .standardError, "accmon-nodes: \(error)")
            return 69
        }
        defer { descriptor.close() }
        var reply: [UInt8] = []
        do throws(Errno) {
            // A helper that refuses a client says why and closes at once: read its reply even when the send fails.
            var sendFailure: Errno?
            do throws(Errno) { try descriptor.sendAll(Array(line.utf8) + [0x0A]) } catch { sendFailure = error }
            var chunk = [UInt8](repeating: 0, count: 65_536)
            while !reply.contains(0x0A) {
                var received = 0
                var failure: Errno?
                chunk.withUnsafeMutableBytes { raw in
                    do throws(Errno) { received = try descriptor.receive(into: raw) } catch { failure = error }
                }
                if let failure { throw sendFailure ?? failure }
                if received == 0 { break }
                reply += chunk[..<received]
            }
            if reply.isEmpty, let sendFailure { throw sendFailure }
        } catch {
            print(to: .standardError, "accmon-nodes: \(socketPath): \(error)")
            return 69
        }
        let text = String(decoding: reply.prefix { $0 != 0x0A }, as: UTF8.self)
        print(to: .standardOutput, text)
        let decoded = try? JSONDecoder().decode(NodeReply.self, from: Data(text.utf8))  // try?: not a reply: failed
        return decoded?.ok == true ? 0 : 1
    }

    private static func print(to descriptor: FileDescriptor, _ text: String) {
        try? descriptor.writeAll((text + "\n").utf8)  // try?: nowhere left to report a failed write
    }
}
