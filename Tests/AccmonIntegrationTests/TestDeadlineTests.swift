import AccmonTestSupport
import Foundation
import Testing

/// `make test` runs the suite under scripts/test-deadline.sh: a hung run must fail soon and say which tests hung.
@Suite("The test deadline", .timeLimit(.minutes(1)))
struct TestDeadlineTests {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("scripts/test-deadline.sh")

    @Test func aRunPastItsDeadlineIsStoppedAndItsUnfinishedTestsNamed() async throws {
        let directory = try TemporaryDirectory()
        let lines =
            "echo '◇ Test run started.'; echo '◇ Test done() started.'; "
            + "echo '✔ Test done() passed after 0.001 seconds.'; echo '◇ Test stuck() started.'; exec sleep 30"
        let run = try ChildProcess(
            URL(fileURLWithPath: "/bin/bash"), [Self.script.path, "2", "/bin/bash", "-c", lines], name: "deadline",
            directory: directory)
        #expect(await run.waitForExit(timeout: .seconds(20)) == .exited(124))
        let report = run.stderr.split(separator: "\n").filter { $0.hasPrefix("  ") }
        #expect(report == ["  stuck()"], "\(run.stderr)")
        #expect(run.stdout.contains("◇ Test stuck() started."), "the command's output is shown as it comes")
    }

    /// The test binary runs in a process group of its own (SwiftPM's spawn): it is stopped all the same.
    @Test func aProcessInAnotherGroupOfTheRunIsStoppedToo() async throws {
        let directory = try TemporaryDirectory()
        // A duration no other process sleeps: its command line finds it.
        let duration = "300.\(getpid())\(Int.random(in: 100_000..<1_000_000))"
        let ownGroup = "import os, sys; os.setpgid(0, 0); os.execvp('sleep', ['sleep', sys.argv[1]])"
        let run = try ChildProcess(
            URL(fileURLWithPath: "/bin/bash"),
            [Self.script.path, "8", "/usr/bin/python3", "-c", ownGroup, duration], name: "deadline",
            directory: directory)
        // A deadline long enough for Python to start and exec under a loaded CI machine (2 s was not: the run was
        // stopped before the sleep was there to be seen), and the sleep seen before it.
        #expect(await eventually(interval: .milliseconds(50)) { !pids(running: ["sleep", duration]).isEmpty })
        #expect(await run.waitForExit(timeout: .seconds(30)) == .exited(124))
        #expect(
            await eventually(timeout: .seconds(5)) { pids(running: ["sleep", duration]).isEmpty },
            "the process in a group of its own outlived the deadline")
    }

    @Test func aRunWithinItsDeadlineKeepsItsExitStatus() async throws {
        let directory = try TemporaryDirectory()
        let run = try ChildProcess(
            URL(fileURLWithPath: "/bin/bash"), [Self.script.path, "20", "/bin/bash", "-c", "echo fine; exit 3"],
            name: "deadline", directory: directory)
        #expect(await run.waitForExit(timeout: .seconds(20)) == .exited(3))
        #expect(run.stdout == "fine\n")
    }
}
