import AccmonJSON
import AccmonManifest
import AccmonProtocol
import Foundation
import Testing

@Suite("accmon manifest check, run as a process", .timeLimit(.minutes(2)))
struct CheckCommandTests {
    static let exampleManifest = Corpus.directory.appendingPathComponent("../../../docs/examples/manifest.json")
        .standardizedFileURL.path

    @Test func theExampleManifestPassesWithExitZero() async throws {
        let directory = try ScratchDirectory()
        let result = try await accmon(["manifest", "check", Self.exampleManifest], in: directory)
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout == "ok: 1 file, 5 entries, admins: group sudo\n", "\(result)")
        #expect(result.stderr.isEmpty, "\(result)")
    }

    @Test(arguments: Corpus.names)
    func eachMalformedManifestExits65WithItsProblemsAsFileLineColumnReason(_ name: String) async throws {
        let directory = try ScratchDirectory()
        let path = Corpus.directory.appendingPathComponent(name).path
        let result = try await accmon(["manifest", "check", path], in: directory)
        #expect(result.status == 65, "\(result)")
        #expect(result.stdout.isEmpty, "\(result)")
        let expected = try Corpus.expectations(name, path: path).map { "\(path):\($0)\n" }.joined()
        #expect(result.stderr == expected)
    }

    @Test func everyFileIsCheckedAndUnreadableOnesAreProblemsToo() async throws {
        let directory = try ScratchDirectory()
        let good = try directory.write(
            "good.json", #"{"version": 1, "accessories": [{"name": "a", "match": {"id": "0403:*"}}]}"#)
        let bad = try directory.write(
            "bad.json",
            "{\"version\": 1,\n  \"accessories\": [{\"name\": \"a\", \"match\": {\"id\": \"0403:6001\"}}]\n}\n")
        let missing = "\(directory.path)/missing.json"
        let folder = "\(directory.path)/folder.json"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        // A FIFO is not waited on (opened without blocking, then found not to be a regular file); a link to a
        // device is followed, and the device refused before anything is read from it.
        let fifo = "\(directory.path)/fifo.json"
        try #require(mkfifo(fifo, 0o600) == 0)
        let device = "\(directory.path)/device.json"
        try FileManager.default.createSymbolicLink(atPath: device, withDestinationPath: "/dev/zero")
        let result = try await accmon(["manifest", "check", missing, good, folder, fifo, device, bad], in: directory)
        #expect(result.status == 65, "\(result)")
        #expect(
            result.stderr == """
                \(missing):1:1: cannot read the file: No such file or directory
                \(folder):1:1: not a regular file (a directory)
                \(fifo):1:1: not a regular file (a FIFO)
                \(device):1:1: not a regular file (a character device)
                \(bad):2:28: entry 'a': name: 'a' is already the name of the entry at \(good):1:41

                """)
        // Every line has the shape file:line:column: reason.
        let shape = try Regex(#"^[^:]+:[0-9]+:[0-9]+: .+$"#)
        for line in result.stderr.split(separator: "\n") {
            #expect(line.wholeMatch(of: shape) != nil, "\(line)")
        }
    }

    @Test func withoutFilesItChecksTheMainFileThenTheDropInsInNameOrder() async throws {
        let directory = try ScratchDirectory()
        let main = try directory.write(
            "manifest.json", #"{"version": 1, "accessories": [{"name": "main", "match": {"id": "1050:*"}}]}"#)
        let dropIns = "\(directory.path)/manifest.d"
        try directory.write(
            "manifest.d/20-b.json", #"{"version": 1, "accessories": [{"name": "b", "match": {"id": "0403:6001"}}]}"#)
        try directory.write(
            "manifest.d/10-a.json", #"{"version": 1, "accessories": [{"name": "a", "match": {"id": "0403:*"}}]}"#)
        try directory.write("manifest.d/README", "not a manifest")
        try directory.write("manifest.d/30-c.json.disabled", "{")
        let result = try await accmon(
            ["manifest", "check", "--manifest", main, "--manifest-dir", dropIns], in: directory)
        // 10-a.json comes before 20-b.json, so b is hidden by a.
        #expect(result.status == 65, "\(result)")
        #expect(
            result.stderr == "\(dropIns)/20-b.json:1:32: entry 'b': can never match: the entry 'a' "
                + "(\(dropIns)/10-a.json:1:32) comes first and matches everything it matches; the first match wins, so "
                + "move 'b' above it or narrow 'a'\n")

        try FileManager.default.removeItem(atPath: "\(dropIns)/10-a.json")
        let fixed = try await accmon(
            ["manifest", "check", "--manifest", main, "--manifest-dir", dropIns], in: directory)
        #expect(fixed.status == 0, "\(fixed)")
        #expect(fixed.stdout == "ok: 2 files, 2 entries\n", "\(fixed)")

        let noDropIns = try await accmon(
            ["manifest", "check", "--manifest", main, "--manifest-dir", "\(directory.path)/none"], in: directory)
        #expect(noDropIns.status == 0, "\(noDropIns)")
        #expect(noDropIns.stdout == "ok: 1 file, 1 entry\n", "\(noDropIns)")

        let noMain = try await accmon(
            ["manifest", "check", "--manifest", "\(directory.path)/nothing.json", "--manifest-dir", dropIns],
            in: directory)
        #expect(noMain.status == 65, "\(noMain)")
        #expect(
            noMain.stderr == "\(directory.path)/nothing.json:1:1: cannot read the file: No such file or directory\n")
    }

    static let usageErrors: [[String]] = [
        ["manifest"],
        ["manifest", "bogus"],
        ["manifest", "check", "--bogus"],
        ["manifest", "check", "a.json", "--manifest", "b.json"],
        ["manifest", "check", "--manifest"],
        ["manifest", "generate", "--bogus"],
        ["manifest", "generate", "--kind", "toaster"],
        ["manifest", "generate", "extra"],
    ]

    @Test(arguments: usageErrors)
    func usageErrorsExit64(_ arguments: [String]) async throws {
        let directory = try ScratchDirectory()
        let result = try await accmon(
            arguments, in: directory, environment: ["ACCMON_SOCKET": "\(directory.path)/none.sock"])
        #expect(result.status == 64, "\(result)")
        #expect(result.stderr.hasPrefix("Error: "), "\(result)")
        #expect(result.stderr.contains("Usage: accmon manifest check"), "\(result)")
        #expect(result.stdout.isEmpty, "\(result)")
    }

    @Test func helpIsPrintedToStdoutWithExitZero() async throws {
        let directory = try ScratchDirectory()
        for arguments in [["manifest", "--help"], ["help", "manifest"], ["manifest", "check", "-h"]] {
            let result = try await accmon(arguments, in: directory)
            #expect(result.status == 0, "\(arguments): \(result)")
            #expect(result.stdout.hasPrefix("Usage: accmon manifest check"), "\(arguments): \(result)")
        }
        let main = try await accmon(["--help"], in: directory)
        #expect(main.stdout.contains("  manifest  "), "\(main)")
    }
}
