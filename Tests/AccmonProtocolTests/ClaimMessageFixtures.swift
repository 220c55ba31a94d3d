import AccmonProtocol
import AccmonTestSupport

/// Claim messages for the codec's round trips: every field set and left out.
let claimMessages: [ServerMessage] = {
    let holder = Party(user: "alice", uid: 1000, pid: 4242, client: "accmon")
    let remote = Party(user: "ci", remote: true)
    let summary = ClaimSummary(
        claimID: "c-3", holder: holder, since: 1_796_000_000.25, reason: "flashing \"fw\"", waiting: 2,
        connections: [ConnectionID(7)], accessoryIDs: ["serial:0403:6001:serial=A5"], expiresAt: 1_796_003_600)
    let bare = ClaimSummary(
        claimID: "c-1", holder: remote, since: 0, reason: "", waiting: 0, state: .returning, connections: [],
        accessoryIDs: ["usb:-:-"])
    let info = ClaimInfo(
        claimID: "c-3", token: "00ff", state: .held, holder: holder, accessories: [Fixtures.fullAccessory],
        nodes: [
            ClaimedNode(path: "/dev/ttyUSB0", enforced: true),
            ClaimedNode(path: "/dev/serial/by-id/x", enforced: false, note: "a symbolic link"),
        ],
        openers: [NodeOpener(path: "/dev/ttyUSB0", pid: 77, uid: 1001, user: "bob", command: "minicom")],
        since: 1_796_000_000.25, reason: "flashing", expiresAt: 1_796_003_600)
    let waiting = ClaimInfo(
        claimID: "c-4", token: "ab", state: .waiting, holder: remote, accessories: [], since: 1, reason: "",
        position: 2, blockers: [summary, bare])
    var messages: [ServerMessage] = []
    for id in Fixtures.requestIDs {
        messages.append(.claim(id: id, info))
        messages.append(.claim(id: id, waiting))
        messages.append(.claims(id: id, ClaimList(claims: [], waiters: [])))
        messages.append(
            .claims(
                id: id,
                ClaimList(
                    claims: [summary, bare],
                    waiters: [
                        ClaimWaiter(
                            claimID: "c-4", party: remote, since: 2, reason: "ci job", connections: [ConnectionID(7)],
                            count: 1, position: 1)
                    ])))
        messages.append(
            .error(id: id, ProtocolError(.claimConflict, "claim: accessories: held", holders: [summary, bare])))
        messages.append(
            .snapshot(
                id: id,
                Snapshot(
                    sequence: 9, accessories: [Fixtures.fullAccessory, Fixtures.minimalAccessory],
                    claims: [Fixtures.fullAccessory.connectionID: summary])))
    }
    for kind in ClaimNotice.Kind.allCases {
        messages.append(.claimNotice(ClaimNotice(claimID: "c-3", kind: kind, time: 5)))
    }
    messages.append(
        .claimNotice(
            ClaimNotice(
                claimID: "c-3", kind: .returned, time: 6, by: holder, reason: "r", claim: info,
                accessory: Fixtures.awkwardAccessory)))
    messages.append(.claimUpdate(ClaimUpdate(connectionID: ConnectionID(7), accessoryID: "a", claim: summary)))
    messages.append(.claimUpdate(ClaimUpdate(connectionID: ConnectionID(8), accessoryID: "", claim: nil)))
    return messages
}()
