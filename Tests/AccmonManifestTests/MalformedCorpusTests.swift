import AccmonJSON
import AccmonManifest
import AccmonProtocol
import Foundation
import Testing

/// The corpus in Corpus/: one malformed manifest per file, whose `// expect: line:column: reason` comments list
/// every problem it must produce, in order (`{file}` stands for the file's path).
enum Corpus {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Corpus")

    static let names: [String] = {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []  // try?: none → the count test fails
        return names.filter { $0.hasSuffix(".json") }.sorted()
    }()

    static func contents(_ name: String) throws -> [UInt8] {
        Array(try Data(contentsOf: directory.appendingPathComponent(name)))
    }

    /// The expected problems as `line:column: reason`, with `{file}` replaced by `path`.
    static func expectations(_ name: String, path: String) throws -> [String] {
        String(decoding: try contents(name), as: UTF8.self).split(separator: "\n")
            .filter { $0.hasPrefix("// expect: ") }
            .map { $0.dropFirst("// expect: ".count).replacingOccurrences(of: "{file}", with: path) }
    }
}

@Suite("Malformed manifests: every problem with its position")
struct MalformedCorpusTests {
    @Test func theCorpusHasAtLeastThirtyManifests() {
        #expect(Corpus.names.count >= 30, "\(Corpus.names)")
    }

    @Test(arguments: Corpus.names)
    func reportsExactlyTheExpectedProblems(_ name: String) throws {
        let expected = try Corpus.expectations(name, path: name)
        #expect(!expected.isEmpty, "\(name) has no expect: line")
        switch Manifest.parse(files: [(path: name, bytes: try Corpus.contents(name))]) {
        case .success:
            Issue.record("\(name) parsed without problems")
        case .failure(let problems):
            #expect(problems.map { "\($0.line):\($0.column): \($0.reason)" } == expected)
            for problem in problems {
                #expect("\(problem)" == "\(name):\(problem.line):\(problem.column): \(problem.reason)")
                #expect(problem.line >= 1 && problem.column >= 1)
            }
        }
    }

    @Test func namesMustBeUniqueAcrossFiles() {
        let main = #"{"version": 1, "accessories": [{"name": "ftdi", "match": {"id": "0403:6001"}}]}"#
        let dropIn = """
            {
              "version": 1,
              "accessories": [
                {"name": "keys", "match": {"id": "1050:*"}},
                {"name": "ftdi", "match": {"id": "0403:6015"}},
              ],
            }
            """
        let result = Manifest.parse(files: [
            (path: "/etc/accmon/manifest.json", bytes: Array(main.utf8)),
            (path: "/etc/accmon/manifest.d/10-lab.json", bytes: Array(dropIn.utf8)),
        ])
        #expect(
            result.problemLines == [
                "/etc/accmon/manifest.d/10-lab.json:5:14: entry 'ftdi': name: 'ftdi' is already the name of the entry at "
                    + "/etc/accmon/manifest.json:1:41"
            ])
        #expect(result.problemCodes == [.duplicateName])
    }

    @Test func anEntryHiddenByAnEarlierFileIsUnreachable() {
        let main = #"{"version": 1, "accessories": [{"name": "all-ftdi", "match": {"id": "0403:*"}}]}"#
        let dropIn = #"{"version": 1, "accessories": [{"name": "one", "match": {"id": "0403:6001", "serial": "X*"}}]}"#
        let result = Manifest.parse(files: [
            (path: "main.json", bytes: Array(main.utf8)), (path: "d.json", bytes: Array(dropIn.utf8)),
        ])
        #expect(
            result.problemLines == [
                "d.json:1:32: entry 'one': can never match: the entry 'all-ftdi' (main.json:1:32) comes first and matches "
                    + "everything it matches; the first match wins, so move 'one' above it or narrow 'all-ftdi'"
            ])
    }

    @Test func problemsOfSeveralFilesComeInFileOrderThenPositionOrder() {
        let first = "{\"version\": 1,\n \"x\": 1, \"y\": 2}"
        let second = "{\"version\": 3}"
        let third = "{\"version\": 1, \"accessories\": [{\"name\": \"a\", \"match\": {\"id\": \"1:2\"}}], \"z\": 0}"
        let result = Manifest.parse(files: [
            (path: "b.json", bytes: Array(first.utf8)), (path: "a.json", bytes: Array(second.utf8)),
            (path: "c.json", bytes: Array(third.utf8)),
        ])
        #expect(
            result.problemLines.map { String($0.prefix { $0 != " " }) } == [
                "b.json:2:2:", "b.json:2:10:", "a.json:1:13:", "c.json:1:63:", "c.json:1:72:",
            ])
    }

    @Test func anUnreadableFileIsAProblemAtItsStart() {
        let problem = ManifestProblem.unreadable(file: "/etc/accmon/manifest.json", reason: "Permission denied")
        #expect("\(problem)" == "/etc/accmon/manifest.json:1:1: cannot read the file: Permission denied")
        #expect(problem.code == .unreadable)
    }

    @Test func aGoodManifestStillReportsNothing() throws {
        let example = try Data(
            contentsOf: Corpus.directory.appendingPathComponent("../../../docs/examples/manifest.json"))
        let manifest = try Manifest.parse(files: [(path: "manifest.json", bytes: Array(example))]).get()
        #expect(
            manifest.entries.map(\.name) == [
                "lab-flasher", "ftdi-serial", "yubikey", "magic-keyboard", "front-panel-arduino",
            ])
        #expect(manifest.admins == AccessList(groups: [.name("sudo")]))
    }
}

extension Result<Manifest, ManifestProblems> {
    var problemLines: [String] {
        if case .failure(let problems) = self { return problems.map(\.description) }
        return []
    }
    var problemCodes: [ManifestProblem.Code] {
        if case .failure(let problems) = self { return problems.map(\.code) }
        return []
    }
}
