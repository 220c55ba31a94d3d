import AccmonClient
import AccmonProtocol
import AccmonSys
import AccmonTestSupport
import Foundation
import Testing

@Suite("accmon and accmond command lines", .timeLimit(.minutes(1)))
struct CLITests {
    @Test func versionFlagsPrintTheVersionAndExitZero() async throws {
        let directory = try TemporaryDirectory()
        for (binary, name) in [(try Binaries.accmon, "accmon"), (try Binaries.accmond, "accmond")] {
            let result = try await run(binary, ["--version"], in: directory)
            #expect(result.termination == .exited(0), "\(name) --version: \(result)")
            #expect(result.stdout == "\(name) \(AccmonVersion.current)\n", "\(name) --version: \(result)")
            #expect(result.stderr.isEmpty, "\(name) --version: \(result)")
        }
    }

    @Test func listJSONParsesAndCarriesVersionOne() async throws {
        let daemon = try await Accmond.start()
        let connection = try await daemon.connect()
        defer { connection.close() }
        _ = try await connection.simulateConnect(
            Accessory(kind: .serial, name: "Listed", serialNumber: "L1", vendorID: "0403", productID: "6015"))
        _ = try await connection.simulateConnect(Accessory(kind: .usb, name: "Other", vendorID: "05ac"))

        let result = try await daemon.accmon(["list", "--json"])
        #expect(result.termination == .exited(0), "\(result)")
        #expect(result.stderr.isEmpty, "\(result)")
        let object = try #require(jsonObject(result.stdout), "not one JSON object: \(result.stdout)")
        #expect((object["version"] as? NSNumber)?.intValue == 1, "\(object)")
        #expect((object["seq"] as? NSNumber)?.intValue == 2, "\(object)")
        let accessories = try #require(object["accessories"] as? [[String: Any]], "\(object)")
        #expect(accessories.map { $0["name"] as? String } == ["Listed", "Other"])
        #expect(result.stdout.hasSuffix("}\n") && result.stdout.split(separator: "\n").count == 1, "\(result)")

        // A filter on the command line reaches the daemon.
        let filtered = try await daemon.accmon(["list", "--json", "--vendor", "403"])
        #expect(filtered.termination == .exited(0), "\(filtered)")
        let names = (jsonObject(filtered.stdout)?["accessories"] as? [[String: Any]])?.map { $0["name"] as? String }
        #expect(names == ["Listed"], "\(filtered)")

        let status = try await daemon.accmon(["status", "--json"])
        #expect(status.termination == .exited(0), "\(status)")
        let statusObject = try #require(jsonObject(status.stdout), "\(status)")
        #expect((statusObject["version"] as? NSNumber)?.intValue == 1, "\(status)")
        let body = statusObject["status"] as? [String: Any]
        #expect((body?["connectedAccessories"] as? NSNumber)?.intValue == 2, "\(status)")
        #expect(body?["simulate"] as? Bool == true, "\(status)")
    }

    static let usageErrors: [[String]] = [
        [],
        ["bogus"],
        ["list", "--bogus"],
        ["list", "--kind", "toaster"],
        ["watch", "--vendor", "xyz12"],
        ["watch", "--kind"],
        ["status", "extra"],
        ["--socket"],
        ["help", "nonsense"],
        ["simulate"],
        ["simulate", "explode"],
        ["simulate", "connect"],
        ["simulate", "connect", "--kind", "usb", "--vendor", "12345"],
        ["simulate", "disconnect"],
        ["simulate", "disconnect", "abc"],
    ]

    @Test(arguments: usageErrors)
    func usageErrorsExit64WithErrorOnStderrOnly(arguments: [String]) async throws {
        // The socket is valid but nothing listens: parsing must fail before any connection is tried.
        let directory = try TemporaryDirectory()
        let result = try await run(
            try Binaries.accmon, arguments, in: directory,
            environment: ["ACCMON_SOCKET": directory.file("nothing.sock")])
        #expect(result.termination == .exited(64), "accmon \(arguments): \(result)")
        #expect(result.stderr.hasPrefix("Error: "), "accmon \(arguments): \(result)")
        #expect(result.stderr.contains("Usage: accmon"), "accmon \(arguments): \(result)")
        #expect(result.stdout.isEmpty, "accmon \(arguments): \(result)")
    }

    @Test func accmondUsageErrorsExit64() async throws {
        let directory = try TemporaryDirectory()
        for arguments in [
            ["--bogus"], ["--log-level", "loud"], ["--max-client-buffer", "12"], ["--socket"],
            ["--max-loop-share-per-user", "101"], ["--max-connect-rate-per-user", "-1"],
        ] {
            let result = try await run(try Binaries.accmond, arguments, in: directory)
            #expect(result.termination == .exited(64), "accmond \(arguments): \(result)")
            #expect(result.stderr.hasPrefix("Error: "), "accmond \(arguments): \(result)")
            #expect(result.stdout.isEmpty, "accmond \(arguments): \(result)")
        }
    }

    @Test func unreachableSocketExits69WithAHint() async throws {
        let directory = try TemporaryDirectory()
        // A path where nothing exists, and a stale socket file nobody listens on.
        let stale = directory.file("stale.sock")
        let listener = try UnixSocket.listen(path: stale)
        listener.close()
        for socket in [directory.file("missing.sock"), stale] {
            for command in [["list"], ["status", "--json"], ["watch"], ["simulate", "disconnect", "1"]] {
                let result = try await run(try Binaries.accmon, ["--socket", socket] + command, in: directory)
                #expect(result.termination == .exited(69), "accmon \(command) on \(socket): \(result)")
                #expect(result.stderr.contains("is accmond running?"), "accmon \(command) on \(socket): \(result)")
                #expect(result.stderr.contains(socket), "accmon \(command): the message does not name the socket")
                #expect(result.stdout.isEmpty, "accmon \(command) on \(socket): \(result)")
            }
        }
        // ACCMON_SOCKET is honoured the same way.
        let viaEnvironment = try await run(
            try Binaries.accmon, ["status"], in: directory, environment: ["ACCMON_SOCKET": directory.file("env.sock")])
        #expect(viaEnvironment.termination == .exited(69), "\(viaEnvironment)")
        #expect(viaEnvironment.stderr.contains(directory.file("env.sock")), "\(viaEnvironment)")
    }

    @Test func simulateAgainstADaemonWithoutSimulateFailsWithExit1() async throws {
        let daemon = try await Accmond.start(simulate: false)
        let result = try await daemon.accmon(["simulate", "connect", "--kind", "usb"])
        #expect(result.termination == .exited(1), "\(result)")
        #expect(result.stderr.contains("--simulate"), "\(result)")
        #expect(result.stdout.isEmpty, "\(result)")
        let disconnect = try await daemon.accmon(["simulate", "disconnect", "1"])
        #expect(disconnect.termination == .exited(1), "\(disconnect)")
        #expect(disconnect.stderr.contains("--simulate"), "\(disconnect)")
        // Nothing was plugged, and the daemon says simulation is off.
        let status = try await daemon.accmon(["status", "--json"])
        let body = jsonObject(status.stdout)?["status"] as? [String: Any]
        #expect((body?["connectedAccessories"] as? NSNumber)?.intValue == 0, "\(status)")
        #expect(body?["simulate"] as? Bool == false, "\(status)")
    }

    static let helpInvocations: [[String]] = [
        ["--help"], ["-h"], ["help"],
        ["watch", "--help"], ["list", "--help"], ["status", "--help"], ["simulate", "--help"],
        ["watch", "-h"], ["simulate", "connect", "--help"], ["watch", "--json", "--help"],
        ["help", "watch"], ["help", "list"], ["help", "status"], ["help", "simulate"],
    ]

    @Test(arguments: helpInvocations)
    func helpPrintsUsageOnStdoutAndExitsZero(arguments: [String]) async throws {
        let directory = try TemporaryDirectory()
        let result = try await run(
            try Binaries.accmon, arguments, in: directory,
            environment: ["ACCMON_SOCKET": directory.file("nothing.sock")])
        #expect(result.termination == .exited(0), "accmon \(arguments): \(result)")
        #expect(result.stderr.isEmpty, "accmon \(arguments): \(result)")
        let command = arguments.first { ["watch", "list", "status", "simulate"].contains($0) }
        #expect(result.stdout.hasPrefix("Usage: accmon \(command.map { "\($0) " } ?? "")"), "accmon \(arguments)")
    }

    @Test func accmondHelpExitsZero() async throws {
        let directory = try TemporaryDirectory()
        let result = try await run(try Binaries.accmond, ["--help"], in: directory)
        #expect(result.termination == .exited(0), "\(result)")
        #expect(result.stdout.hasPrefix("Usage: accmond"), "\(result)")
        #expect(result.stdout.contains("--simulate") && result.stdout.contains("--max-client-buffer"), "\(result)")
        #expect(result.stderr.isEmpty, "\(result)")
    }
}
