import AccmonNodes
import AccmonTestSupport
import Testing

/// What udev and logind do to a node, on the model: release must restore what they would have given the node
/// without the claim.
enum Rewriter {
    /// udev applying a rule's `OWNER=`, `GROUP=`, `MODE=` (chown, then chmod: with an ACL, the group bits set the
    /// mask).
    static func udev(_ state: NodeState, owner: UInt32, group: UInt32, mode: UInt16) -> NodeState {
        NodeState(owner: owner, group: group, mode: mode, acl: state.acl)
    }

    /// logind's `uaccess` for the seat's user `user`: every named user entry replaced by `user:UID:rw-`, the mask
    /// recomputed (systemd's devnode_acl with flush).
    static func logind(_ state: NodeState, user: UInt32) -> NodeState {
        let acl = ExtendedACL(
            owningGroup: state.owningGroupBits, users: [user: .readWrite], groups: state.acl?.groups ?? [:])
        return NodeState(
            owner: state.owner, group: state.group, mode: state.mode & ~0o070 | acl.unionOfEntries.rawValue << 3,
            acl: acl)
    }
}

@Suite struct RewriteAdoptionTests {
    @Test func aUdevChangeIsRestoredToWhatUdevSet() {
        let original = NodeState(owner: 0, group: 20, mode: 0o660)
        let applied = original.enforced(holder: NodeHolder(uid: 4002, gids: [20]))
        let rewritten = Rewriter.udev(applied, owner: 0, group: 4101, mode: 0o640)
        #expect(original.adopting(rewrite: rewritten, of: applied) == NodeState(owner: 0, group: 4101, mode: 0o640))
        // udev setting again what it set before changes nothing but the claim's mask: the original stays.
        let again = Rewriter.udev(applied, owner: 0, group: 20, mode: 0o660)
        #expect(original.adopting(rewrite: again, of: applied) == original)
    }

    @Test func aSeatChangeIsRestoredToTheNewSeatUser() {
        let seat = NodeState(
            owner: 0, group: 0, mode: 0o664, acl: ExtendedACL(owningGroup: .read, users: [4001: .readWrite]))
        let applied = seat.enforced(holder: NodeHolder(uid: 4002, gids: [4002]))
        let rewritten = Rewriter.logind(applied, user: 4003)
        #expect(
            seat.adopting(rewrite: rewritten, of: applied)
                == NodeState(
                    owner: 0, group: 0, mode: 0o664, acl: ExtendedACL(owningGroup: .read, users: [4003: .readWrite])))
    }

    /// For random nodes, holders and rewrites by udev, the restore is what udev gives the node without the claim,
    /// whenever each value udev sets differs from the claim's or equals the original's (a value udev sets to the
    /// claim's own is indistinguishable from one it left alone).
    @Test func randomUdevRewritesAreRestoredToTheRewrite() {
        let seed = SplitMix64.testSeed()
        var random = SplitMix64(seed: seed)
        var checked = 0
        for round in 0..<20_000 where checked < 2000 {
            let original = random.nodeState()
            let applied = original.enforced(holder: random.holder())
            let owner = random.chance(50) ? 0 : random.pick(Pool.users)
            let group = random.pick(Pool.groups + [0])
            let mode = UInt16(random.next(below: 0o1000))
            let rewritten = Rewriter.udev(applied, owner: owner, group: group, mode: mode)
            let expected = Rewriter.udev(original, owner: owner, group: group, mode: mode)
            func distinguishable<Value: Equatable>(_ part: (NodeState) -> Value) -> Bool {
                part(rewritten) != part(applied) || part(rewritten) == part(original)
            }
            guard distinguishable(\.owner), distinguishable(\.group), distinguishable(\.ownerBits),
                distinguishable(\.groupClassBits), distinguishable(\.otherBits), rewritten != applied
            else { continue }
            checked += 1
            let adopted = original.adopting(rewrite: rewritten, of: applied)
            #expect(
                adopted == expected,
                "seed \(seed), round \(round): \(original) held as \(applied), rewritten \(rewritten)")
        }
        #expect(checked == 2000)
    }

    @Test func randomSeatChangesAreRestoredToTheNewSeatUser() {
        let seed = SplitMix64.testSeed()
        var random = SplitMix64(seed: seed)
        var checked = 0
        for round in 0..<20_000 where checked < 2000 {
            var original = random.nodeState()
            original.mode &= 0o777
            let applied = original.enforced(holder: random.holder())
            let user = random.pick(Pool.users)
            let rewritten = Rewriter.logind(applied, user: user)
            guard rewritten.acl?.users != applied.acl?.users else { continue }
            checked += 1
            let adopted = original.adopting(rewrite: rewritten, of: applied)
            let expected = Rewriter.logind(original, user: user)
            #expect(
                adopted == expected,
                "seed \(seed), round \(round): \(original) held as \(applied), rewritten \(rewritten)")
        }
        #expect(checked == 2000)
    }

    @Test func noRewriteRestoresTheOriginal() {
        let seed = SplitMix64.testSeed()
        var random = SplitMix64(seed: seed)
        for _ in 0..<2000 {
            let original = random.nodeState(special: true)
            let applied = original.enforced(holder: random.holder())
            #expect(original.adopting(rewrite: applied, of: applied) == original, "seed \(seed)")
        }
    }
}
