import AccmonManifest
import Testing

/// An entry's `claim` (who may check its accessories out, and how claims behave) and the top-level `bridges`.
@Suite struct ClaimManifestTests {
    static let manifest = """
        {
          "version": 1,
          "bridges": {"users": ["accmon-mqtt"]},
          "accessories": [
            {"name": "bench", "match": {"id": "0403:6001"}, "access": {"groups": ["lab"]},
             "claim": {"users": ["alice"], "groups": ["ci"], "remote": ["ci", {"user": "qa", "as": "qa-runner"}], "grant": true,
                       "returnSeconds": 30, "maxSeconds": 3600}},
            {"name": "plain", "match": {"id": "0403:*"}},
          ],
        }
        """

    static func parsed() throws -> Manifest {
        try Manifest.parse(files: [(path: "m.json", bytes: Array(manifest.utf8))]).get()
    }

    @Test func claimAndBridgesAreParsed() throws {
        let manifest = try Self.parsed()
        let claim = try #require(manifest.entries[0].claim)
        #expect(claim.access == AccessList(users: [.name("alice")], groups: [.name("ci")]))
        #expect(claim.remote == ["ci", "qa"] && claim.remoteAs == ["qa": .name("qa-runner")])
        #expect(claim.localUser(for: "qa", accounts: AccountIDs(users: ["qa-runner": 1500])) == 1500)
        #expect(claim.localUser(for: "ci", accounts: AccountIDs(users: ["qa-runner": 1500])) == nil)
        #expect(manifest.accountNames.users.contains("qa-runner"))
        #expect(claim.grant && claim.returnSeconds == 30 && claim.maxSeconds == 3600)
        #expect(manifest.entries[1].claim == nil)
        #expect(manifest.entries[1].effectiveClaim == .default)
        #expect(ClaimPolicy.default.returnSeconds == 10 && !ClaimPolicy.default.grant)
        #expect(manifest.bridges == AccessList(users: [.name("accmon-mqtt")]))
        #expect(manifest.accountNames.users.isSuperset(of: ["alice", "accmon-mqtt"]))
        #expect(manifest.accountNames.groups.isSuperset(of: ["ci", "lab"]))
    }

    @Test func aClaimListNarrowsWhoSeesTheAccessory() throws {
        let manifest = try Self.parsed()
        let accounts = AccountIDs(users: ["alice": 1000, "bob": 1001], groups: ["lab": 300, "ci": 301])
        let entry = manifest.entries[0]
        func mayClaim(_ uid: UInt32, _ gids: [UInt32]) -> Bool {
            entry.effectiveClaim.allowsLocal(uid: uid, gids: gids, entryAccess: entry.effectiveAccess, accounts: accounts)
        }
        #expect(mayClaim(1000, [1000, 300]))  // alice, who sees it
        #expect(!mayClaim(1000, [1000]))  // alice, who does not see it (not in lab)
        #expect(!mayClaim(1001, [1001, 300]))  // bob sees it but is not in the claim list
        #expect(mayClaim(1001, [1001, 300, 301]))  // through the group ci
        #expect(mayClaim(0, [0]))
        // Without `claim`, whoever sees it may claim it.
        let plain = manifest.entries[1]
        #expect(
            plain.effectiveClaim.allowsLocal(
                uid: 1001, gids: [1001, 999], entryAccess: AccessList(groups: [.id(999)]), accounts: accounts))
        #expect(entry.effectiveClaim.allowsRemote("qa") && !entry.effectiveClaim.allowsRemote("mallory"))
        #expect(!plain.effectiveClaim.allowsRemote("ci"))
    }

    @Test func onlyTheBridgesListedMaySpeakForRemoteUsers() throws {
        let manifest = try Self.parsed()
        let accounts = AccountIDs(users: ["accmon-mqtt": 998])
        #expect(manifest.isBridge(uid: 998, gids: [998], accounts: accounts))
        #expect(!manifest.isBridge(uid: 1000, gids: [1000], accounts: accounts))
        #expect(!Manifest.empty.isBridge(uid: 0, gids: [0], accounts: accounts))
    }

    @Test func theWriterKeepsClaimAndBridges() throws {
        let manifest = try Self.parsed()
        let text = manifest.formatted()
        let again = try Manifest.parse(files: [(path: "m.json", bytes: Array(text.utf8))]).get()
        #expect(again.entries.map(\.claim) == manifest.entries.map(\.claim))
        #expect(again.bridges == manifest.bridges)
        #expect(again.formatted() == text)
    }
}
