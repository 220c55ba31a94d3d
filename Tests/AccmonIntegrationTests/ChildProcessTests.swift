import AccmonTestSupport
import Foundation
import Glibc
import Testing

/// The tests' process spawner. Tests run in parallel, so a descriptor one test holds while another spawns a daemon
/// must not end up in that daemon: a pipe or socket kept open there never reads as closed.
@Suite("Test children", .timeLimit(.minutes(1)))
struct ChildProcessTests {
    @Test func aChildInheritsOnlyItsStandardDescriptors() async throws {
        // A descriptor without close-on-exec, as Foundation's Process leaves the socket its child inherits.
        var ends: [Int32] = [0, 0]
        try #require(pipe(&ends) == 0)
        defer { ends.forEach { close($0) } }
        let directory = try TemporaryDirectory()
        let child = try ChildProcess(URL(fileURLWithPath: "/bin/sleep"), ["30"], name: "sleep", directory: directory)
        defer { child.kill() }
        // The dynamic loader opens and closes libraries just after the exec: wait for those to go.
        var inherited: [String] = []
        let onlyStandard = try await eventually(timeout: .seconds(5)) {
            inherited = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(child.pid)/fd").sorted()
            return inherited == ["0", "1", "2"]
        }
        #expect(onlyStandard, "the child has descriptors \(inherited)")
    }
}
