import AccmonNodes
import AccmonTestSupport
import Foundation
import Testing

@Suite struct NodeStateTests {
    @Test func codesAsOctalModeAndGetfaclEntries() throws {
        let state = NodeState(
            owner: 0, group: 20, mode: 0o660, acl: ExtendedACL(owningGroup: .read, users: [1000: .readWrite]))
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let text = String(decoding: try encoder.encode(state), as: UTF8.self)
        #expect(text == #"{"acl":["group::r--","user:1000:rw-"],"group":20,"mode":"0660","owner":0}"#)
        #expect(try JSONDecoder().decode(NodeState.self, from: Data(text.utf8)) == state)
        #expect("\(state)" == "0:20 0660 group::r-- user:1000:rw-")
    }

    @Test func randomStatesSurviveCoding() throws {
        let seed = SplitMix64.testSeed()
        var random = SplitMix64(seed: seed)
        for _ in 0..<1000 {
            let state = random.nodeState(special: true)
            let decoded = try JSONDecoder().decode(NodeState.self, from: JSONEncoder().encode(state))
            #expect(decoded == state, "seed \(seed)")
        }
    }

    @Test(arguments: [
        (#"{"owner":0,"group":0,"mode":"660"}"#, "not four octal digits"),
        (#"{"owner":0,"group":0,"mode":"0968"}"#, "not four octal digits"),
        (#"{"owner":0,"group":0,"mode":"0660","acl":["user:1000:rw-"]}"#, "no group:: entry"),
        (#"{"owner":0,"group":0,"mode":"0660","acl":["group::rw-","group::r--"]}"#, "two group:: entries"),
        (#"{"owner":0,"group":0,"mode":"0660","acl":["group::rw-","user:x:rw-"]}"#, "'x' is not an id"),
        (
            #"{"owner":0,"group":0,"mode":"0660","acl":["group::rw-","user:7:rw-","user:7:r--"]}"#,
            "two entries for user 7"
        ),
        (#"{"owner":0,"group":0,"mode":"0660","acl":["group::rwz"]}"#, "not an entry"),
        (#"{"owner":0,"group":0,"mode":"0660","acl":["mask::rw-"]}"#, "not a group::, user:ID: or group:ID: entry"),
    ])
    func malformedStatesAreRefusedSayingWhy(json: String, reason: String) {
        #expect {
            try JSONDecoder().decode(NodeState.self, from: Data(json.utf8))
        } throws: { error in
            "\(error)".contains(reason)
        }
    }

    @Test func accessFollowsTheKernelsOrder() {
        let plain = NodeState(owner: 4001, group: 20, mode: 0o640)
        #expect(plain.access(uid: 4001, gids: [20]) == .readWrite)
        #expect(plain.access(uid: 4002, gids: [5000, 20]) == .read)
        #expect(plain.access(uid: 4002, gids: [5000]) == [])
        #expect(plain.access(uid: 0, gids: [0]) == .readWrite, "root is outside the check")
        // The owner gets the owner bits even when the group or others would give more.
        #expect(NodeState(owner: 4001, group: 20, mode: 0o066).access(uid: 4001, gids: [20]) == [])

        let acl = NodeState(
            owner: 0, group: 20, mode: 0o640,
            acl: ExtendedACL(owningGroup: .readWrite, users: [4002: .readWrite], groups: [4101: .write]))
        #expect(acl.access(uid: 4002, gids: [5000]) == .read, "a named user under the mask (r--)")
        #expect(acl.access(uid: 4003, gids: [20]) == .read, "the owning group's rw- under the mask")
        #expect(acl.access(uid: 4003, gids: [4101]) == [], "a named group's -w- under the mask r--")
        #expect(!acl.allows(.readWrite, uid: 4003, gids: [20]))

        // Read through one group entry and write through another: each alone, never both in one open.
        let split = NodeState(
            owner: 0, group: 20, mode: 0o670, acl: ExtendedACL(owningGroup: .read, groups: [4101: .write]))
        #expect(split.access(uid: 4003, gids: [20, 4101]) == .readWrite)
        #expect(!split.allows(.readWrite, uid: 4003, gids: [20, 4101]))

        // An empty mask: the kernel does not look at the ACL, and a named user not in the group gets the other bits.
        let emptyMask = NodeState(
            owner: 0, group: 20, mode: 0o606, acl: ExtendedACL(owningGroup: [], users: [4002: []]))
        #expect(emptyMask.access(uid: 4002, gids: [5000]) == .readWrite)
        #expect(emptyMask.access(uid: 4003, gids: [20]) == [])
    }

    /// While held, a node opens for the holder (as it did before, or read and write with grant) and root, and for
    /// nobody else; no one but root owns it.
    @Test func enforcementOpensForTheHolderAndRootAlone() {
        let seed = SplitMix64.testSeed()
        var random = SplitMix64(seed: seed)
        for round in 0..<3000 {
            let state = random.nodeState(special: true)
            let holder = random.holder()
            let held = state.enforced(holder: holder)
            let context = "seed \(seed), round \(round): \(state) held by \(holder) -> \(held)"
            #expect(held.owner == 0, "\(context)")
            let kept = holder.grant ? Permission.readWrite : state.access(uid: holder.uid, gids: holder.gids)
            #expect(held.access(uid: holder.uid, gids: holder.gids) == kept, "\(context)")
            #expect(held.allows(.readWrite, uid: holder.uid, gids: holder.gids) == (kept == .readWrite), "\(context)")
            #expect(held.access(uid: 0, gids: [0]) == .readWrite, "\(context)")
            for subject in everySubject where subject.uid != holder.uid {
                #expect(held.access(uid: subject.uid, gids: subject.gids) == [], "\(context): \(subject)")
            }
        }
    }

    @Test func aGroupMemberLosesAccessAndAnOwnerLosesOwnership() {
        let node = NodeState(owner: 4001, group: 20, mode: 0o660)
        let held = node.enforced(holder: NodeHolder(uid: 4002, gids: [4002, 20]))
        #expect(held.access(uid: 4002, gids: [4002, 20]) == .readWrite)
        #expect(held.access(uid: 4003, gids: [4003, 20]) == [], "another member of the node's group")
        #expect(held.access(uid: 4001, gids: [4001]) == [], "the owner")
        #expect(
            held
                == NodeState(
                    owner: 0, group: 20, mode: 0o660, acl: ExtendedACL(owningGroup: [], users: [4002: .readWrite])))
        let reader = NodeState(owner: 0, group: 20, mode: 0o640)
        #expect(reader.enforced(holder: NodeHolder(uid: 4002, gids: [20])).access(uid: 4002, gids: [20]) == .read)
        #expect(
            reader.enforced(holder: NodeHolder(uid: 4002, gids: [20], grant: true)).access(uid: 4002, gids: [20])
                == .readWrite)
        #expect(reader.enforced(holder: NodeHolder(uid: 4002, gids: [5000])).access(uid: 4002, gids: [5000]) == [])
    }
}
