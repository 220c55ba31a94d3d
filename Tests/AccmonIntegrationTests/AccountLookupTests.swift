import AccmonClient
import AccmonLogging
import AccmonProtocol
import AccmonSys
import AccmonTestSupport
import Foundation
import Synchronization
import Testing

@testable import AccmondKit

/// An account directory whose lookup of one user blocks until the test opens its gate, as a directory service that
/// does not answer would.
final class GatedDirectory: AccountDirectory {
    let blockedName: String
    private let gate: BlockingSignal
    private let asked = Mutex<[String]>([])
    private let returned = Atomic<Bool>(false)

    init(blocking name: String) throws {
        blockedName = name
        gate = try BlockingSignal()
    }

    func userID(named name: String) -> UInt32? {
        asked.withLock { $0.append(name) }
        guard name == blockedName else { return nil }
        gate.wait()
        returned.store(true, ordering: .sequentiallyConsistent)
        return 4242
    }

    func groupID(named name: String) -> UInt32? { name == "accmon" ? 999 : nil }

    /// Lets the blocked lookup return.
    func open() { gate.signal() }
    var hasBeenAsked: Bool { asked.withLock { $0.contains(blockedName) } }
    var hasReturned: Bool { returned.load(ordering: .sequentiallyConsistent) }
}

@Suite("Account lookups off the loop")
struct AccountLookupTests {
    /// A manifest whose only entry admits every accessory to `users`.
    static func manifest(users: [String]) -> String {
        let names = users.map { "\"\($0)\"" }.joined(separator: ",")
        return #"{"version": 1, "accessories": [{"name": "all", "match": {"id": "*:*"}, "access": {"users": ["#
            + names + "]}}]}"
    }

    /// While the manifest loader waits on a lookup that does not return, the loop keeps serving: a subscriber gets
    /// the events of plugs made meanwhile, `list` is answered, and the `reload` that caused the lookup is answered
    /// only once the lookup returns.
    @Test func eventsFlowWhileALookupBlocks() async throws {
        let directory = try TemporaryDirectory()
        let manifestPath = directory.file("manifest.json")
        try Self.manifest(users: ["root"]).write(toFile: manifestPath, atomically: true, encoding: .utf8)
        let accounts = try GatedDirectory(blocking: "slow-user")
        var configuration = DaemonConfiguration(
            socketPath: directory.file("accmond.sock"), simulate: true, watchesUdev: false,
            manifestPath: manifestPath, manifestDirectory: directory.file("manifest.d"), stateDirectory: nil,
            handlesSignals: false, logger: Logger(label: "test", level: .critical))
        configuration.notifiesServiceManager = false
        configuration.accounts = accounts
        let daemon = try Daemon(configuration: configuration)
        let finished = Mutex(false)
        try startThread(name: "test-daemon") {
            try? daemon.run()  // try?: the assertions below see a daemon that did not run
            finished.withLock { $0 = true }
        }
        defer { accounts.open() }  // a failed expectation must not leave the loader thread blocked

        let socket = directory.file("accmond.sock")
        #expect(
            await eventually { (try? await AccmonConnection.connect(socketPath: socket, clientName: "probe")) != nil })
        let subscriber = try await AccmonConnection.connect(socketPath: socket, clientName: "subscriber")
        let subscription = try await subscriber.subscribe(AccessoryFilter())

        // The reload names a user whose lookup blocks.
        try Self.manifest(users: ["root", "slow-user"]).write(toFile: manifestPath, atomically: true, encoding: .utf8)
        let admin = try await AccmonConnection.connect(socketPath: socket, clientName: "admin")
        let reloaded = Atomic<Bool>(false)
        let reload = Task {
            try await admin.reloadManifest()
            reloaded.store(true, ordering: .sequentiallyConsistent)
        }
        #expect(await eventually { accounts.hasBeenAsked }, "the reload never looked the user up")

        // The lookup has not returned: the loop still serves everyone else. (Bounded: a loop that waits on the
        // lookup never answers, and the gate opens only below.)
        let served = Task { () async throws -> Int in
            let plugger = try await AccmonConnection.connect(socketPath: socket, clientName: "plugger")
            var events = subscription.makeAsyncIterator()
            for serial in ["A", "B", "C"] {
                let accessory = Accessory(kind: .serial, serialNumber: serial, vendorID: "0403", productID: "6001")
                let connectionID = try await plugger.simulateConnect(accessory)
                let event = try #require(try await events.next())
                #expect(event.change == .connect && event.accessory.connectionID == connectionID)
            }
            return try await plugger.list(AccessoryFilter()).accessories.count
        }
        let done = Atomic<Bool>(false)
        Task {
            _ = try? await served.value  // try?: the result is checked below
            done.store(true, ordering: .sequentiallyConsistent)
        }
        #expect(
            await eventually(timeout: .seconds(20)) { done.load(ordering: .sequentiallyConsistent) },
            "the loop did not serve while a lookup blocked")
        #expect(!accounts.hasReturned && !reloaded.load(ordering: .sequentiallyConsistent))
        accounts.open()
        #expect(try await served.value == 3)

        // Once it returns, the reload is answered.
        try await reload.value
        #expect(accounts.hasReturned)
        daemon.requestStop()
        #expect(await eventually { finished.withLock { $0 } })
    }
}
