import AccmonTestSupport
import Foundation
import Glibc

/// A real ejabberd node (Debian's 23.01) started by a test on a free local port, with the configuration of
/// docs/MQTT.md §10 and a directory of its own (its Mnesia database, which keeps the users and the retained messages
/// across a restart); killed in `deinit`.
///
/// The node runs without Erlang distribution (no node name, no epmd): the users are registered by the node itself
/// once it started, through `ejabberd_auth:try_register`, what `ejabberdctl register` calls.
final class Ejabberd: TestBroker, @unchecked Sendable {
    struct Options {
        /// Users to register, each with the password `pw-<user>`.
        var users: [String] = []
        /// The users that may publish under their own names (`bridges` in the ACL): the hosts' bridges.
        var bridges: [String] = []
        /// More settings of the MQTT listener, such as `max_fsm_queue: 300`.
        var listen: [String] = []
        /// For a node of a cluster (``EjabberdCluster``): its Erlang node name (`NAME@localhost`) and cookie, with
        /// Erlang distribution on the loopback interface only.
        var node: (name: String, cookie: String)?
    }

    /// The tests' own user: it may read and write every topic.
    static let tester = Login(user: "tester", password: "pw-tester")

    let directory: TemporaryDirectory
    let options: Options
    let port: Int
    private(set) var process: ChildProcess
    private var generation = 0

    var kind: BrokerKind { .ejabberd }
    var url: String { "mqtt://127.0.0.1:\(port)" }
    var testLogin: Login? { Self.tester }

    /// The configuration of docs/MQTT.md §10, as written there.
    static let documented: String = {
        let text = (try? String(contentsOf: Repository.file("docs/MQTT.md"), encoding: .utf8)) ?? ""
        guard let start = text.range(of: "```yaml\n# /etc/ejabberd/ejabberd.yml (accmon)\n"),
            let end = text.range(of: "```", range: start.upperBound..<text.endIndex)
        else { return "# docs/MQTT.md: the ejabberd configuration is missing\n" }
        return String(text[start.upperBound..<end.lowerBound])
    }()

    /// Starts a node; retries on another port when the one picked was taken meanwhile.
    static func start(_ options: Options = Options()) async throws -> Ejabberd {
        let directory = try TemporaryDirectory()
        var lastLog = ""
        for _ in 0..<3 {
            let port = try freeTCPPort()
            try configuration(options, port: port).write(
                toFile: directory.file("ejabberd.yml"), atomically: true, encoding: .utf8)
            let process = try launch(options, directory: directory, generation: 0)
            if try await waitUntilReady(process, port: port, directory: directory, generation: 0) {
                return Ejabberd(directory: directory, options: options, port: port, process: process)
            }
            lastLog = process.stderr + process.stdout
            process.kill()
        }
        throw Binaries.LocateError(description: "ejabberd did not start: \(lastLog)")
    }

    private init(directory: TemporaryDirectory, options: Options, port: Int, process: ChildProcess) {
        self.directory = directory
        self.options = options
        self.port = port
        self.process = process
    }

    /// The documented configuration with this node's port and address, its bridges, the tests' own user and log level.
    static func configuration(_ options: Options, port: Int) throws -> String {
        var text = documented
        func replace(_ old: String, _ new: String) throws {
            guard text.contains(old) else {
                throw Binaries.LocateError(description: "docs/MQTT.md §10: the ejabberd configuration has no '\(old)'")
            }
            text = text.replacingOccurrences(of: old, with: new)
        }
        try replace("    port: 1883\n", "    port: \(port)\n")
        try replace("    ip: \"::\"\n", "    ip: \"127.0.0.1\"\n" + options.listen.map { "    \($0)\n" }.joined())
        let bridges = options.bridges.isEmpty ? "nobody-bridges" : options.bridges.joined(separator: ", ")
        try replace("    user: [lab-1, lab-2]\n", "    user: [\(bridges)]\n  testers:\n    user: [\(tester.user)]\n")
        let everything = "      \"#\":\n        - allow: testers\n"
        try replace("    access_publish:\n", "    access_publish:\n" + everything)
        try replace("    access_subscribe:\n", "    access_subscribe:\n" + everything)
        return "loglevel: info\nlog_rotate_count: 0\n" + text
    }

    /// Kills the node with SIGKILL: no goodbye to any client (the wills of the connected clients are lost with it).
    func kill9() { process.kill() }

    /// Starts the node again on the same port and database.
    func restart() async throws {
        process.kill()
        generation += 1
        for _ in 0..<50 {
            process = try Self.launch(options, directory: directory, generation: generation)
            if try await Self.waitUntilReady(process, port: port, directory: directory, generation: generation) {
                return
            }
            try await Task.sleep(for: .milliseconds(100))  // the port may linger a moment after SIGKILL
        }
        throw Binaries.LocateError(description: "ejabberd did not restart on \(port): \(process.stderr)")
    }

    /// ejabberd's log so far (its log file, where it writes what it logs).
    var log: String {
        (try? String(contentsOfFile: directory.file("ejabberd.log"), encoding: .utf8)) ?? ""  // try?: none yet
    }

    func bridgeSettings(host name: String) throws -> [String: String] {
        let path = directory.file("\(name).password")
        if !FileManager.default.fileExists(atPath: path) {
            try "pw-\(name)\n".write(toFile: path, atomically: false, encoding: .utf8)
            chmod(path, 0o600)
        }
        return ["username": json(name), "passwordFile": json(path)]
    }

    private static func launch(_ options: Options, directory: TemporaryDirectory, generation: Int) throws
        -> ChildProcess
    {
        let users = ([tester.user] + options.users).map { "\"\($0)\"" }.joined(separator: ",")
        // Registers the users (again after a restart: `exists` then), then says it is ready.
        let ready = directory.file("ready-\(generation)")
        let register =
            "[ejabberd_auth:try_register(list_to_binary(U), <<\"localhost\">>, list_to_binary(\"pw-\" ++ U)) "
            + "|| U <- [\(users)]], file:write_file(\"\(ready)\", <<>>)."
        let distribution =
            options.node.map {
                ["-sname", $0.name, "-setcookie", $0.cookie, "-kernel", "inet_dist_use_interface", "{127,0,0,1}"]
            } ?? []
        return try ChildProcess(
            URL(fileURLWithPath: "/usr/bin/erl"),
            [
                // No scheduler spinning while idle: the machine may have two cores, shared with everything else.
                "-noinput", "+sbwt", "none", "+sbwtdcpu", "none", "+sbwtdio", "none",
            ] + distribution + [
                "-mnesia", "dir", "\"\(directory.file("spool"))\"", "-s", "ejabberd", "-eval", register,
            ], name: "ejabberd-\(generation)", directory: directory,
            environment: [
                "EJABBERD_CONFIG_PATH": directory.file("ejabberd.yml"),
                "EJABBERD_LOG_PATH": directory.file("ejabberd.log"),
                "ERL_LIBS": "/usr/lib/x86_64-linux-gnu", "ERL_CRASH_DUMP_BYTES": "0",
                // epmd, started by the first node, listens on the loopback interface only.
                "ERL_EPMD_ADDRESS": "127.0.0.1",
            ])
    }

    /// Waits until the node registered its users and accepts connections; false when it exited (the port was taken).
    private static func waitUntilReady(
        _ process: ChildProcess, port: Int, directory: TemporaryDirectory, generation: Int
    ) async throws -> Bool {
        let ready = directory.file("ready-\(generation)")
        let done = await eventually(timeout: .seconds(30), interval: .milliseconds(20)) {
            !process.isRunning || (FileManager.default.fileExists(atPath: ready) && canConnect(port: port))
        }
        return done && process.isRunning
    }

    deinit { process.kill() }
}
