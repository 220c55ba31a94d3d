import AccmonTestSupport
import Foundation
import Glibc
import Testing

/// `accmon-mqtt --check` and a start with a bad configuration: problems as file:line:column, exit 65.
@Suite struct ConfigCheckTests {
    let directory: TemporaryDirectory

    init() throws { directory = try TemporaryDirectory() }

    func check(_ config: String, _ arguments: [String] = ["--check"]) async throws -> CommandResult {
        let path = directory.file("mqtt.json")
        try config.write(toFile: path, atomically: true, encoding: .utf8)
        return try await run(try Binaries.url("accmon-mqtt"), ["--config", path] + arguments, in: directory)
    }

    @Test func aSoundConfigurationIsSummarised() async throws {
        let result = try await check(#"{"broker": "mqtt://localhost:1884", "host": "lab/1", "prefix": "site/accmon"}"#)
        #expect(result.termination == .exited(0), "\(result)")
        #expect(
            result.stdout
                == "ok: \(directory.file("mqtt.json")): broker mqtt://localhost:1884, host 'lab/1', "
                + "prefix 'site/accmon'\n"
        )
    }

    @Test func problemsArePrintedWithPositionsAndExit65() async throws {
        let path = directory.file("mqtt.json")
        let result = try await check(
            "{\n  \"broker\": \"mqtt://x\",\n  \"password\": \"hunter2\",\n  \"prefix\": \"#\"\n}")
        #expect(result.termination == .exited(65), "\(result)")
        #expect(
            result.stderr
                == "\(path):3:3: password: a password does not go in this file, which every user may read: put it in a "
                + "file only root and the service may read, and name that file in \"passwordFile\"\n"
                + "\(path):4:13: prefix: '#': a prefix cannot hold the wildcards + or #\n")
        let syntax = try await check("{\"broker\": \"mqtt://x\" \"host\": 1}", [])
        #expect(syntax.termination == .exited(65), "\(syntax)")
        #expect(syntax.stderr.hasPrefix("\(path):1:23: "), "\(syntax)")
        #expect(syntax.stderr.contains("critical: the configuration has problems (above): not starting"), "\(syntax)")
    }

    @Test func aPasswordFileOthersCanReadIsRefused() async throws {
        let password = directory.file("password")
        try "secret\n".write(toFile: password, atomically: false, encoding: .utf8)
        chmod(password, 0o644)
        let result = try await check(
            #"{"broker": "mqtt://x", "username": "u", "passwordFile": "\#(password)"}"#)
        #expect(result.termination == .exited(65), "\(result)")
        #expect(result.stderr.contains("passwordFile: '\(password)': every user may read or write it (mode 644)"))
        chmod(password, 0o640)
        #expect(
            try await check(#"{"broker": "mqtt://x", "username": "u", "passwordFile": "\#(password)"}"#).termination
                == .exited(0))
    }

    @Test func aPasswordOnTheCommandLineIsAUsageError() async throws {
        let result = try await run(try Binaries.url("accmon-mqtt"), ["--password", "x"], in: directory)
        #expect(result.termination == .exited(64), "\(result)")
        #expect(result.stderr.hasPrefix("Error: --password: the broker's password goes in a file"), "\(result)")
        let cli = try await run(
            try Binaries.accmon, ["list", "--broker", "mqtt://x", "--password", "x"], in: directory)
        #expect(cli.termination == .exited(64), "\(cli)")
        #expect(cli.stderr.hasPrefix("Error: --password: a password on the command line is visible to every user"))
    }

    @Test func anUnreachableBrokerIsExit69ForTheFleetView() async throws {
        let port = try freeTCPPort()
        let result = try await run(
            try Binaries.accmon, ["list", "--broker", "mqtt://127.0.0.1:\(port)"], in: directory)
        #expect(result.termination == .exited(69), "\(result)")
        #expect(result.stderr == "accmon: mqtt: mqtt://127.0.0.1:\(port): connect: Connection refused\n", "\(result)")
        let usage = try await run(try Binaries.accmon, ["list", "--host", "lab-*"], in: directory)
        #expect(usage.termination == .exited(64), "\(usage)")
        #expect(
            usage.stderr.hasPrefix(
                "Error: --host, --prefix, --broker-queue, --census-wait and the broker's login options need --broker URL"))
        let queue = try await run(
            try Binaries.accmon, ["list", "--broker", "mqtt://127.0.0.1:\(port)", "--broker-queue", "3"], in: directory)
        #expect(queue.termination == .exited(64), "\(queue)")
        #expect(
            queue.stderr.hasPrefix("Error: --broker-queue: '3': not a number of messages of at least 16"), "\(queue)")
    }
}
