import AccmonTestSupport
import Foundation

/// `Tests/tools/hostile_client.py`, a client that misbehaves on purpose, run as root or as `nobody`.
struct HostileClient {
    let process: ChildProcess
    /// What it printed: one JSON object.
    let result: [String: Any]

    /// Runs it and waits for its result. With `hold`, it keeps its connections open until ``stop()``.
    static func run(
        _ socketPath: String, _ arguments: [String], asNobody: Bool = true, hold: Bool = false,
        in directory: TemporaryDirectory, timeout: Duration = .seconds(60)
    ) async throws -> HostileClient {
        let script = Repository.file("Tests/tools/hostile_client.py").path
        let user = asNobody ? ["--reuid=65534", "--regid=65534", "--clear-groups"] : ["--reuid=0"]
        let process = try ChildProcess(
            URL(fileURLWithPath: "/usr/bin/setpriv"),
            user + ["/usr/bin/python3", script, socketPath] + arguments + (hold ? ["--hold"] : []),
            name: "hostile-\(arguments.first ?? "")", directory: directory)
        var line: String?
        _ = await eventually(timeout: timeout, interval: .milliseconds(20)) {
            line = process.stdout.split(separator: "\n").first.map(String.init)
            return line != nil || !process.isRunning
        }
        guard let line, let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
            process.kill()
            throw Binaries.LocateError(
                description: "hostile_client \(arguments): no result; stderr: \(process.stderr)")
        }
        return HostileClient(process: process, result: object)
    }

    func int(_ key: String) -> Int { (result[key] as? NSNumber)?.intValue ?? -1 }

    /// Ends a held client: its connections close.
    func stop() {
        process.send(SIGTERM)
        process.kill()
    }
}
