import AccmonLogging
import AccmonManifest
import AccmonProtocol
import AccmonTestSupport
import Testing

@testable import AccmondKit

/// The ring under the history: bounded, in order, evicting the oldest; and the history on it: numbered, timed, and
/// visible to each principal as the accessory's verdict said when the entry was recorded.
@Suite struct HistoryRingTests {
    /// Random appends to rings of random capacities hold exactly the newest `capacity` elements, oldest first, and
    /// count what they evicted.
    @Test func theRingKeepsTheNewestInOrder() {
        let seed = SplitMix64.testSeed()
        var random = SplitMix64(seed: seed)
        for _ in 0..<300 {
            let capacity = Int(random.next(below: 12))
            var ring = BoundedRing<Int>(capacity: capacity)
            var appended: [Int] = []
            for value in 0..<Int(random.next(below: 40)) {
                let evicted = ring.append(value)
                appended.append(value)
                let expected = Array(appended.suffix(capacity))
                #expect(ring.elements == expected, "ACCMON_TEST_SEED=\(seed) capacity \(capacity)")
                #expect(ring.count == expected.count && ring.count <= capacity)
                #expect(evicted == (appended.count > capacity ? appended[appended.count - capacity - 1] : nil))
                #expect(ring.evicted == max(0, appended.count - capacity))
                #expect(ring.last == expected.last)
                #expect((0..<ring.count).map { ring[$0] } == expected)
                var newestFirst: [Int] = []
                ring.forEachNewestFirst {
                    newestFirst.append($0); return true
                }
                #expect(newestFirst == expected.reversed())
            }
            #expect(ring.emptied.isEmpty && ring.emptied.capacity == capacity && ring.emptied.evicted == 0)
        }
    }

    /// Stopping the newest-first walk early stops it.
    @Test func theWalkStopsWhenAsked() {
        var ring = BoundedRing<Int>(capacity: 5)
        ring.append(contentsOf: 0..<9)
        var seen: [Int] = []
        ring.forEachNewestFirst {
            seen.append($0); return seen.count < 2
        }
        #expect(seen == [8, 7])
    }

    // MARK: Visibility

    /// Principals: root, two users each in one group, one in both, one in none; their uids and gids.
    static let principals: [ClientPrincipal?] = [
        nil, ClientPrincipal(uid: 0, gids: [0]), ClientPrincipal(uid: 1000, gids: [1000, 20]),
        ClientPrincipal(uid: 1001, gids: [1001, 30]), ClientPrincipal(uid: 1002, gids: [1002, 20, 30]),
        ClientPrincipal(uid: 65534, gids: [65534]),
    ]

    static func randomVerdict(_ random: inout SplitMix64) -> Authentication {
        guard random.next(below: 4) != 0 else { return .rejected(reason: "no entry matches") }
        let users: [Principal] = [.id(1000), .name("alice"), .name("bob"), .id(65534), .name("ghost")]
        let groups: [Principal] = [.id(20), .name("dialout"), .name("lab"), .id(99)]
        func some(_ list: [Principal]) -> [Principal] { list.filter { _ in random.next(below: 3) == 0 } }
        return .allowed(
            entryName: "e", protocols: random.next(below: 2) == 0 ? [] : ["com.example"],
            access: AccessList(users: some(users), groups: some(groups)))
    }

    /// The accounts of a manifest: names resolve to ids, differently from one load to the next.
    static func randomAccounts(_ random: inout SplitMix64) -> AccountIDs {
        AccountIDs(
            users: ["alice": random.next(below: 2) == 0 ? 1001 : 1002, "bob": 1000],
            groups: ["dialout": 20, "lab": random.next(below: 2) == 0 ? 30 : 31])
    }

    /// Random sequences of entries (every kind, random verdicts, accounts that change as after reloads, random
    /// accessories) in rings of random capacities; then random queries by every principal, admin or not. Each answer
    /// is what a plain model says: the newest `limit` of the entries kept, recorded after `since`, passing the
    /// filter, and visible as their verdict and accounts said when recorded (rejected ones to admins only), oldest
    /// first. Numbers increase by one; times do not go back.
    @Test func eachPrincipalSeesWhatItCouldSeeWhenRecorded() throws {
        let seed = SplitMix64.testSeed()
        var random = SplitMix64(seed: seed)
        let kinds = HistoryEntry.Kind.allCases
        let accessories = [
            Accessory(kind: .usb, vendorID: "1d6b", productID: "0104"),
            Accessory(kind: .serial, vendorID: "0403", productID: "6001"),
            Accessory(kind: .bluetoothHID, vendorID: "05ac", productID: "0265", protocolStrings: ["com.example"]),
        ]
        for _ in 0..<60 {
            let capacity = 1 + Int(random.next(below: 30))
            let history = try History(capacity: capacity, directory: nil, logger: Logger(label: "test"))
            var recorded: [(entry: HistoryEntry, verdict: Authentication, accounts: AccountIDs)] = []
            var accounts = Self.randomAccounts(&random)
            for _ in 0..<Int(random.next(below: 80)) {
                if random.next(below: 10) == 0 { accounts = Self.randomAccounts(&random) }
                let verdict = Self.randomVerdict(&random)
                let kind = kinds[Int(random.next(below: UInt64(kinds.count)))]
                let accessory = accessories[Int(random.next(below: UInt64(accessories.count)))]
                history.record(
                    kind, accessory: verdict.announced(accessory), verdict: verdict, accounts: accounts,
                    eventSeq: random.next(below: 2) == 0 ? random.next() : nil,
                    actor: random.next(below: 2) == 0 ? Party(user: "alice", uid: 1001) : nil, reason: "r")
                let query = HistoryQuery(limit: HistoryQuery.maximumLimit)
                let root = ClientPrincipal(uid: 0, gids: [0])
                let newest = try #require(
                    history.entries(matching: query, for: root, isAdmin: true, byteBudget: .max).entries.last)
                recorded.append((newest, verdict, accounts))
                #expect(newest.seq == UInt64(recorded.count) && newest.kind == kind, "ACCMON_TEST_SEED=\(seed)")
            }
            let kept = recorded.suffix(capacity)
            #expect(history.count == kept.count)
            for (earlier, later) in zip(kept, kept.dropFirst()) {
                #expect(later.entry.seq == earlier.entry.seq + 1 && later.entry.time >= earlier.entry.time)
            }
            for principal in Self.principals {
                for isAdmin in [false, true] {
                    let since = random.next(below: 3) == 0 ? kept.randomElement(using: &random)?.entry.time : nil
                    let before = random.next(below: 3) == 0 ? kept.randomElement(using: &random)?.entry.seq : nil
                    let filter = Fixtures.filters.randomElement(using: &random)!
                    let limit = 1 + Int(random.next(below: 40))
                    let budget = random.next(below: 2) == 0 ? Int.max : Int(random.next(below: 4000))
                    let query = HistoryQuery(since: since, before: before, limit: limit, filter: filter)
                    let answer = history.entries(matching: query, for: principal, isAdmin: isAdmin, byteBudget: budget)
                    let model = kept.filter { item in
                        let visible: Bool =
                            if item.entry.kind == .rejected || !item.verdict.isAllowed {
                                isAdmin
                            } else if case .allowed(_, _, let access) = item.verdict, let principal {
                                access.allows(uid: principal.uid, gids: principal.gids, accounts: item.accounts)
                            } else {
                                false
                            }
                        return visible && filter.matches(item.entry.accessory)
                            && since.map { item.entry.time > $0 } ?? true && before.map { item.entry.seq < $0 } ?? true
                    }.map(\.entry).suffix(limit)
                    // Within the budget: the newest entries whose lines and commas fit, at least one.
                    var fitting = 0
                    var bytes = 0
                    for entry in model.reversed() {
                        bytes += Self.encodedCount(entry) + (fitting > 0 ? 1 : 0)
                        guard fitting == 0 || bytes <= budget else { break }
                        fitting += 1
                    }
                    let who = principal?.description ?? "nobody known"
                    let context = "ACCMON_TEST_SEED=\(seed): \(who) admin \(isAdmin)"
                    #expect(answer.entries == Array(model.suffix(fitting)), "\(context)")
                    #expect(answer.truncated == (fitting < model.count), "\(context)")
                    // Paging back with `before` from the oldest entry given yields the rest, no gap, no duplicate.
                    var pages = [answer.entries]
                    var page = answer
                    var rest = query
                    while page.truncated, let oldest = page.entries.first?.seq {
                        rest.before = oldest
                        rest.limit -= page.entries.count
                        page = history.entries(matching: rest, for: principal, isAdmin: isAdmin, byteBudget: budget)
                        #expect(!page.entries.isEmpty, "\(context)")
                        pages.append(page.entries)
                    }
                    #expect(pages.reversed().flatMap { $0 } == Array(model), "\(context)")
                }
            }
        }
    }

    /// The bytes `entry` takes in a `history` reply.
    static func encodedCount(_ entry: HistoryEntry) -> Int {
        var out = JSONOutput(capacity: 256)
        HistoryLineWriter.entry(entry, into: &out)
        return out.count
    }

    /// A history of capacity 0 records nothing and numbers nothing.
    @Test func aHistoryOfNoEntriesIsOff() throws {
        let history = try History(capacity: 0, directory: nil, logger: Logger(label: "test"))
        history.record(
            .connect, accessory: Accessory(kind: .usb), verdict: .rejected(reason: ""), accounts: AccountIDs())
        #expect(history.count == 0 && history.lastSeq == 0)
        #expect(history.entries(matching: HistoryQuery(), for: nil, isAdmin: true, byteBudget: .max).entries.isEmpty)
    }
}
