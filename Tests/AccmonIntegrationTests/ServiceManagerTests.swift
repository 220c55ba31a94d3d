import AccmonClient
import AccmonDevices
import AccmonProtocol
import AccmonSys
import AccmonTestSupport
import Foundation
import Glibc
import Synchronization
import Testing

@testable import AccmonLogging
@testable import AccmondKit

/// Starts `accmond` with `arguments`, its `NOTIFY_SOCKET` pointing at a collector in `directory`.
private func startNotifying(
    _ directory: TemporaryDirectory, _ arguments: [String], environment: [String: String] = [:]
) throws -> (ChildProcess, DatagramCollector) {
    let notify = try DatagramCollector(path: directory.file("notify"))
    var environment = environment
    environment["NOTIFY_SOCKET"] = notify.path
    let process = try ChildProcess(
        try Binaries.accmond, arguments + ["--state-dir", directory.file("state")], name: "accmond",
        directory: directory, environment: environment)
    return (process, notify)
}

@Suite("accmond and systemd: sd_notify, watchdog, socket activation, journal", .timeLimit(.minutes(1)))
struct ServiceManagerTests {
    @Test func readyComesOnlyOnceTheSocketAcceptsConnections() async throws {
        let directory = try TemporaryDirectory()
        let socketPath = directory.file("accmond.sock")
        let (daemon, notify) = try startNotifying(directory, ["--socket", socketPath, "--simulate", "--no-udev"])
        defer { daemon.kill() }
        let ready = await notify.waitFor { assignments($0)["READY"] == "1" }
        // At the moment READY=1 is read, the socket must take a connection and answer a request.
        let probe = Result { try UnixSocket.connect(path: socketPath) }
        try #require(ready != nil, "no READY=1; got \(notify.messages); log: \(daemon.stderr)")
        #expect((try? probe.get()) != nil, "READY=1 came but connecting failed: \(probe)")
        if case .success(let descriptor) = probe { descriptor.close() }
        let list = try await run(try Binaries.accmon, ["--socket", socketPath, "list", "--json"], in: directory)
        #expect(list.termination == .exited(0), "\(list)")

        let messages = notify.messages
        let readyIndex = try #require(messages.firstIndex { assignments($0)["READY"] == "1" })
        #expect(messages.filter { assignments($0)["READY"] == "1" }.count == 1, "READY=1 more than once: \(messages)")
        #expect(
            messages[..<readyIndex].contains { assignments($0)["STATUS"]?.hasPrefix("Starting") == true },
            "no STATUS=Starting… before READY=1: \(messages)")
        #expect(
            assignments(messages[readyIndex])["STATUS"] == "Serving 0 clients; 0 accessories connected",
            "READY=1 should carry the first status: \(messages[readyIndex])")
    }

    @Test func noReadyWhenTheDaemonCannotListen() async throws {
        let directory = try TemporaryDirectory()
        let notASocket = directory.file("plain-file")
        #expect(FileManager.default.createFile(atPath: notASocket, contents: Data("x".utf8)))
        let (daemon, notify) = try startNotifying(directory, ["--socket", notASocket, "--simulate", "--no-udev"])
        let termination = await daemon.waitForExit(timeout: .seconds(10))
        #expect(termination == .exited(1), "accmond on a regular file: \(String(describing: termination))")
        #expect(!notify.messages.contains { assignments($0)["READY"] != nil }, "READY=1 sent: \(notify.messages)")
    }

    @Test func statusSaysHowManyAccessoriesAndClients() async throws {
        let directory = try TemporaryDirectory()
        let socketPath = directory.file("accmond.sock")
        let (daemon, notify) = try startNotifying(directory, ["--socket", socketPath, "--simulate", "--no-udev"])
        defer { daemon.kill() }
        try #require(await notify.waitFor { assignments($0)["READY"] == "1" } != nil, "no READY=1: \(daemon.stderr)")

        let connection = try await AccmonConnection.connect(socketPath: socketPath, clientName: "status-test")
        let first = try await connection.simulateConnect(Accessory(kind: .serial, name: "one", serialNumber: "1"))
        _ = try await connection.simulateConnect(Accessory(kind: .usb, name: "two", serialNumber: "2"))
        let both = await notify.waitFor { assignments($0)["STATUS"] == "Serving 1 client; 2 accessories connected" }
        #expect(both != nil, "no STATUS= for 2 accessories and 1 client: \(notify.messages)")

        try await connection.simulateDisconnect(first)
        connection.close()
        let after = await notify.waitFor { assignments($0)["STATUS"] == "Serving 0 clients; 1 accessory connected" }
        #expect(after != nil, "no STATUS= after a disconnect and a client leaving: \(notify.messages)")
    }

    @Test func watchdogPingsComeAtHalfTheIntervalAndOnlyWhenAsked() async throws {
        let directory = try TemporaryDirectory()
        let (daemon, notify) = try startNotifying(
            directory, ["--socket", directory.file("accmond.sock"), "--simulate", "--no-udev"],
            environment: ["WATCHDOG_USEC": "600000"])
        defer { daemon.kill() }
        try #require(await notify.waitFor { assignments($0)["READY"] == "1" } != nil, "no READY=1: \(daemon.stderr)")
        try await Task.sleep(for: .milliseconds(1600))
        // One ping per 300 ms (half the interval): about 5 in 1.6 s, and never a gap near the 600 ms interval.
        let arrivals = notify.timedMessages.filter { $0.text == "WATCHDOG=1" }.map(\.at)
        #expect(arrivals.count >= 4, "expected about 5 pings in 1.6 s at WATCHDOG_USEC=600000: \(arrivals.count)")
        let gaps = zip(arrivals.dropFirst(), arrivals).map { Double($0 - $1) / 1e6 }
        #expect(gaps.allSatisfy { $0 < 570 }, "a gap between pings (ms) came near the 600 ms interval: \(gaps)")
        #expect(daemon.stderr.contains("watchdog: the service manager expects a ping every 600 ms"), "\(daemon.stderr)")

        // Without WATCHDOG_USEC there is no ping at all.
        let quiet = try TemporaryDirectory()
        let (other, otherNotify) = try startNotifying(
            quiet, ["--socket", quiet.file("accmond.sock"), "--simulate", "--no-udev"])
        defer { other.kill() }
        try #require(await otherNotify.waitFor { assignments($0)["READY"] == "1" } != nil, "no READY=1")
        try await Task.sleep(for: .milliseconds(500))
        #expect(!otherNotify.messages.contains("WATCHDOG=1"), "pinged without a watchdog: \(otherNotify.messages)")
    }

    /// While it gives a client that does not read its 2 s to take the goodbye, accmond waits for that client only:
    /// the watchdog's wake-ups of the (finished) loop, or a source's events, must not make it spin.
    @Test func theShutdownGraceDoesNotSpinOnWakeupsNobodyTakes() async throws {
        let directory = try TemporaryDirectory()
        let socketPath = directory.file("accmond.sock")
        let (daemon, notify) = try startNotifying(
            directory, ["--socket", socketPath, "--simulate", "--no-udev", "--max-client-buffer", "65536"],
            environment: ["WATCHDOG_USEC": "20000"])  // a wake-up of the loop every 10 ms
        defer { daemon.kill() }
        try #require(await notify.waitFor { assignments($0)["READY"] == "1" } != nil, "no READY=1: \(daemon.stderr)")
        // A client that asks for 3,000 status replies and reads none: the socket fills and replies wait in accmond.
        let stuck = try RawSocket(path: socketPath)
        try stuck.send((1...3000).map { #"{"id":\#($0),"type":"status"}"# + "\n" }.joined())
        let observer = try await AccmonConnection.connect(socketPath: socketPath, clientName: "observer")
        defer { observer.close() }
        let filled = await eventually(timeout: .seconds(10)) {
            let clients = (try? await observer.status().clients) ?? []  // try?: asked again
            return clients.contains { $0.outboundBytes > 0 }
        }
        try #require(filled, "the stuck client's replies never waited in accmond")
        observer.close()
        daemon.send(SIGTERM)
        try await Task.sleep(for: .milliseconds(200))
        let before = try cpuMilliseconds(of: daemon.pid)
        try await Task.sleep(for: .milliseconds(1200))
        let used = try cpuMilliseconds(of: daemon.pid) - before
        #expect(used < 300, "accmond used \(used) ms of CPU in 1.2 s of shutdown grace")
        #expect(await daemon.waitForExit() == .exited(0), "log: \(daemon.stderr)")
    }

    /// User + system CPU time of process `pid`, from /proc/PID/stat.
    private func cpuMilliseconds(of pid: pid_t) throws -> Int {
        let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
        // Fields after the command name (which ends at the last ')'): state is field 3, utime 14, stime 15.
        let fields = stat[stat.index(after: try #require(stat.lastIndex(of: ")")))...].split(separator: " ")
        let ticks = try #require(Int(fields[11])) + (try #require(Int(fields[12])))
        return ticks * 1000 / Int(sysconf(Int32(_SC_CLK_TCK)))
    }

    @Test func sigtermSendsStoppingBeforeTheDaemonExits() async throws {
        let directory = try TemporaryDirectory()
        let socketPath = directory.file("accmond.sock")
        let (daemon, notify) = try startNotifying(directory, ["--socket", socketPath, "--simulate", "--no-udev"])
        defer { daemon.kill() }
        try #require(await notify.waitFor { assignments($0)["READY"] == "1" } != nil, "no READY=1: \(daemon.stderr)")
        // A client that stays connected: the daemon says goodbye to it after STOPPING=1.
        let connection = try await AccmonConnection.connect(socketPath: socketPath, clientName: "stopping-test")
        defer { connection.close() }
        _ = try await connection.status()
        daemon.send(SIGTERM)
        let stopping = await notify.waitFor { assignments($0)["STOPPING"] == "1" }
        #expect(stopping != nil, "no STOPPING=1 after SIGTERM: \(notify.messages)")
        #expect(stopping.map { assignments($0)["STATUS"] ?? "" } == "Stopping: saying goodbye to 1 client")
        #expect(await daemon.waitForExit() == .exited(0), "log: \(daemon.stderr)")
        #expect(notify.messages.filter { assignments($0)["STOPPING"] == "1" }.count == 1, "\(notify.messages)")
        #expect(notify.messages.last.map { assignments($0)["READY"] == nil } == true, "READY=1 after STOPPING=1?")
    }

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-socket-activate")))
    func socketActivationServesThePassedSocketAndLeavesItsPathAlone() async throws {
        let directory = try TemporaryDirectory()
        let activatedPath = directory.file("activated.sock")
        let configuredPath = directory.file("configured.sock")
        let notify = try DatagramCollector(path: directory.file("notify"))
        let daemon = try ChildProcess(
            URL(fileURLWithPath: "/usr/bin/systemd-socket-activate"),
            [
                "-l", activatedPath, "-E", "NOTIFY_SOCKET=\(notify.path)", try Binaries.accmond.path,
                "--socket", configuredPath, "--simulate", "--no-udev", "--state-dir", directory.file("state"),
            ], name: "activate", directory: directory)
        defer { daemon.kill() }
        // systemd-socket-activate binds first and starts accmond on the first connection: `accmon list` is one.
        #expect(await eventually { FileManager.default.fileExists(atPath: activatedPath) }, "\(daemon.stderr)")
        let list = try await run(try Binaries.accmon, ["--socket", activatedPath, "list", "--json"], in: directory)
        #expect(list.termination == .exited(0), "\(list); log: \(daemon.stderr)")
        #expect(list.stdout.contains("\"accessories\""), "\(list)")
        #expect(await notify.waitFor { assignments($0)["READY"] == "1" } != nil, "no READY=1: \(daemon.stderr)")
        #expect(daemon.stderr.contains("listening on \(activatedPath) (socket from the service manager)"))
        #expect(!FileManager.default.fileExists(atPath: configuredPath), "accmond bound --socket too")

        daemon.send(SIGTERM)
        #expect(await daemon.waitForExit() == .exited(0), "log: \(daemon.stderr)")
        #expect(await notify.waitFor { assignments($0)["STOPPING"] == "1" } != nil, "\(notify.messages)")
        var info = stat()
        #expect(
            lstat(activatedPath, &info) == 0 && info.st_mode & S_IFMT == S_IFSOCK,
            "accmond unlinked the socket the service manager created")
    }

    @Test func socketActivationRejectsADescriptorThatIsNotAListeningSocket() async throws {
        // LISTEN_FDS=1 for a pid that is the child's own is what systemd sets; bash `exec` keeps the pid.
        let directory = try TemporaryDirectory()
        let result = try await run(
            URL(fileURLWithPath: "/bin/bash"),
            [
                "-c",
                "exec 3</dev/null; LISTEN_PID=$$ LISTEN_FDS=1 exec \"$0\" --simulate --no-udev --state-dir \"$1\"",
                try Binaries.accmond.path, directory.file("state"),
            ], in: directory)
        #expect(result.termination == .exited(1), "\(result)")
        #expect(result.stderr.contains("not a listening AF_UNIX stream socket"), "\(result)")
    }

    @Test(
        .enabled(
            if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/unshare"),
            "needs root and unshare for a private mount namespace"))
    func logsGoToTheJournalWithFieldsWhenStandardErrorIsTheJournal() async throws {
        // accmond runs in a private mount namespace where /run/systemd is a directory of ours, so that libsystemd's
        // sd_journal_sendv reaches our socket at /run/systemd/journal/socket; the host's /run is untouched.
        let directory = try TemporaryDirectory()
        try FileManager.default.createDirectory(
            atPath: directory.file("run/journal"), withIntermediateDirectories: true)
        let journal = try DatagramCollector(path: directory.file("run/journal/socket"))
        let socketPath = directory.file("accmond.sock")
        // JOURNAL_STREAM names the stderr file ChildProcess opens: accmond sees that stderr is "the journal".
        let stderrPath = directory.file("accmond.err")
        _ = FileManager.default.createFile(atPath: stderrPath, contents: nil)
        var info = stat()
        try #require(stat(stderrPath, &info) == 0)
        let daemon = try ChildProcess(
            URL(fileURLWithPath: "/usr/bin/unshare"),
            [
                "-m", "sh", "-c", "mkdir -p /run/systemd && mount --bind \"$0\" /run/systemd && exec \"$@\"",
                directory.file("run"), try Binaries.accmond.path, "--socket", socketPath, "--simulate", "--no-udev",
                "--log-level", "debug", "--state-dir", directory.file("state"),
            ], name: "accmond", directory: directory,
            environment: ["JOURNAL_STREAM": "\(info.st_dev):\(info.st_ino)"])
        defer { daemon.kill() }
        let started = await journal.waitFor { assignments($0)["MESSAGE_ID"] == LogMessageID.started.rawValue }
        try #require(started != nil, "no journal entry for the start; stderr: \(daemon.stderr)")
        let startFields = assignments(started!)
        #expect(startFields["SYSLOG_IDENTIFIER"] == "accmond")
        #expect(startFields["PRIORITY"] == "5")
        #expect(startFields["CODE_FILE"] == "AccmondKit/Daemon.swift")
        #expect(startFields["MESSAGE"]?.hasPrefix("listening on \(socketPath)") == true, "\(startFields)")

        let connected = try await run(
            try Binaries.accmon,
            [
                "--socket", socketPath, "simulate", "connect", "--kind", "serial", "--vendor", "0403", "--product",
                "6001",
                "--name", "FT232R", "--serial", "A1",
            ], in: directory)
        #expect(connected.termination == .exited(0), "\(connected)")
        let connectionID = connected.stdout.trimmingCharacters(in: .whitespacesAndNewlines)

        let accessory = await journal.waitFor {
            assignments($0)["MESSAGE_ID"] == LogMessageID.accessoryConnected.rawValue
        }
        let accessoryFields = assignments(try #require(accessory, "no accessory entry: \(journal.messages)"))
        #expect(accessoryFields["ACCESSORY_ID"] == "serial:0403:6001:serial=A1", "\(accessoryFields)")
        #expect(
            accessoryFields["CONNECTION_ID"].map { connectionID.hasSuffix($0) || $0.hasSuffix(connectionID) } == true,
            "CONNECTION_ID \(accessoryFields["CONNECTION_ID"] ?? "-") vs accmon's \(connectionID)")
        #expect(accessoryFields["PRIORITY"] == "7")

        let client = await journal.waitFor { assignments($0)["MESSAGE_ID"] == LogMessageID.clientConnected.rawValue }
        let clientFields = assignments(try #require(client, "no client entry: \(journal.messages)"))
        #expect(Int(clientFields["CLIENT_PID"] ?? "") ?? 0 > 0, "\(clientFields)")
        #expect(clientFields["SESSION"]?.hasPrefix("s-") == true, "\(clientFields)")

        daemon.send(SIGTERM)
        #expect(await daemon.waitForExit() == .exited(0))
        #expect(await journal.waitFor { assignments($0)["MESSAGE_ID"] == LogMessageID.stopped.rawValue } != nil)
        // Everything went to the journal, nothing to the stream.
        let stderrText = (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? ""  // try?: missing = empty
        #expect(daemon.stderr.isEmpty && stderrText.isEmpty, "stderr: \(daemon.stderr)")
    }

    @Test func plainStandardErrorWhenJournalStreamNamesAnotherFile() async throws {
        let directory = try TemporaryDirectory()
        let socketPath = directory.file("accmond.sock")
        let daemon = try ChildProcess(
            try Binaries.accmond,
            ["--socket", socketPath, "--simulate", "--no-udev", "--state-dir", directory.file("state")],
            name: "accmond", directory: directory, environment: ["JOURNAL_STREAM": "1:1"])
        defer { daemon.kill() }
        #expect(await eventually { daemon.stderr.contains("notice: listening on \(socketPath)") }, "\(daemon.stderr)")
    }
}
