import AccmonManifest
import AccmonTestSupport
import Foundation
import Testing

/// An entry's `launch`, the top-level `relaunch`, and the unit names accmond may start: the names the polkit rule the
/// package ships allows are exactly the names the daemon makes.
@Suite struct LaunchManifestTests {
    static let manifest = """
        {
          "version": 1,
          "relaunch": [{"unit": "accmon-viewer@.service", "access": {"users": ["alice", 1001], "groups": ["lab"]}}],
          "accessories": [
            {"name": "flasher", "match": {"id": "0403:6001"}, "launch": {"unit": "accmon-flasher@.service"}},
            {"name": "logger", "match": {"id": "0403:*"}, "launch": {"unit": "accmon-logger@.service", "keep": true}},
          ],
        }
        """

    static func parsed() throws -> Manifest {
        try Manifest.parse(files: [(path: "m.json", bytes: Array(manifest.utf8))]).get()
    }

    @Test func launchAndRelaunchAreParsed() throws {
        let manifest = try Self.parsed()
        #expect(manifest.entries[0].launch == LaunchSpec(unit: LaunchTemplate("accmon-flasher@.service")!, keep: false))
        #expect(manifest.entries[1].launch?.keep == true)
        #expect(manifest.relaunch.map(\.unit.name) == ["accmon-viewer@.service"])
        #expect(manifest.accountNames.users.contains("alice") && manifest.accountNames.groups.contains("lab"))
    }

    @Test func onlyTheListedUsersMayRegisterATemplate() throws {
        let manifest = try Self.parsed()
        let viewer = LaunchTemplate("accmon-viewer@.service")!
        let accounts = AccountIDs(users: ["alice": 1000], groups: ["lab": 300])
        #expect(manifest.mayRegisterRelaunch(viewer, uid: 1000, gids: [1000], accounts: accounts))
        #expect(manifest.mayRegisterRelaunch(viewer, uid: 1001, gids: [1001], accounts: accounts))
        #expect(manifest.mayRegisterRelaunch(viewer, uid: 1002, gids: [1002, 300], accounts: accounts))
        #expect(!manifest.mayRegisterRelaunch(viewer, uid: 1003, gids: [1003], accounts: accounts))
        #expect(!manifest.mayRegisterRelaunch(LaunchTemplate("accmon-other@.service")!, uid: 1000, gids: [], accounts: accounts))
    }

    @Test func theWriterKeepsLaunchAndRelaunch() throws {
        let manifest = try Self.parsed()
        let text = manifest.formatted()
        let again = try Manifest.parse(files: [(path: "m.json", bytes: Array(text.utf8))]).get()
        #expect(again.entries.map(\.launch) == manifest.entries.map(\.launch))
        #expect(again.relaunch.map(\.unit) == manifest.relaunch.map(\.unit))
        #expect(again.relaunch.map(\.access) == manifest.relaunch.map(\.access))
        #expect(again.formatted() == text)
    }

    @Test(arguments: [
        ("accmon-flasher@.service", true), ("accmon-a@.service", true), ("accmon-A_b-9@.service", true),
        ("accmon-\(String(repeating: "x", count: 64))@.service", true),
        ("accmon-\(String(repeating: "x", count: 65))@.service", false), ("accmon-@.service", false),
        ("accmon-x@1.service", false), ("accmon-x.service", false), ("accmon-x@.socket", false),
        ("rescue.target", false), ("accmond.service", false), ("accmon-a.b@.service", false),
        ("accmon-a/b@.service", false), ("getty@.service", false), ("accmon-é@.service", false),
        ("xaccmon-x@.service", false), ("accmon-x@@.service", false),
    ])
    func templateNames(_ name: String, _ valid: Bool) {
        #expect((LaunchTemplate(name) != nil) == valid)
        #expect((LaunchTemplate.problem(with: name) == nil) == valid)
    }

    @Test func instancesAreNumericAndOfTheForm() {
        let template = LaunchTemplate("accmon-flasher@.service")!
        #expect(template.instance(12) == "accmon-flasher@12.service")
        #expect(template.instance(UInt64.max) == "accmon-flasher@18446744073709551615.service")
        #expect(LaunchTemplate.isInstanceName(template.instance(UInt64.max)))
    }

    /// The regular expression of packaging/polkit/60-accmon.rules accepts a name exactly when the daemon's form does:
    /// every instance accmond makes is allowed, and nothing else is.
    @Test func thePolkitRuleAllowsExactlyTheInstanceForm() throws {
        let rules = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../packaging/polkit/60-accmon.rules").standardizedFileURL
        let text = try String(contentsOf: rules, encoding: .utf8)
        let literal = try #require(text.firstMatch(of: /\/(\^accmon-[^\n]*\$)\/\.test\(unit/)?.1)
        let pattern = try Regex(String(literal))
        var names = [
            "accmon-flasher@12.service", "accmon-flasher@.service", "rescue.target", "accmon-x@1.socket",
            "accmon-x@-1.service", "accmon-x@1a.service", "accmon-x@1.service.d", "accmon-x.y@1.service",
            "accmon-x@1.service\n", "accmon-@1.service", "accmon-x@123456789012345678901.service",
            "accmon-\(String(repeating: "y", count: 64))@7.service", "accmon-\(String(repeating: "y", count: 65))@7.service",
        ]
        var random = AccmonTestSupport.SplitMix64(seed: AccmonTestSupport.SplitMix64.testSeed())
        let alphabet = Array("accmon-@.service0123456789xyz_-./@Aé")
        for _ in 0..<2_000 {
            var name = "accmon-"
            for _ in 0..<random.next(below: 20) { name.append(alphabet[Int(random.next(below: UInt64(alphabet.count)))]) }
            if Bool.random(using: &random) { name += "@\(random.next(below: 100_000)).service" }
            names.append(name)
        }
        for name in names {
            #expect(
                (name.wholeMatch(of: pattern) != nil) == LaunchTemplate.isInstanceName(name),
                "'\(name)': the rule and the daemon disagree")
        }
    }
}
