import AccmonManifest
import AccmonSys
import Glibc
import Synchronization

/// Where the user and group names of a manifest are looked up: the system's account databases, or a test's.
public protocol AccountDirectory: Sendable {
    /// The uid of user `name`, `nil` when there is none. May block (a directory service): it is never called on
    /// the broker's loop.
    func userID(named name: String) -> UInt32?
    /// The gid of group `name`, `nil` when there is none. May block, as ``userID(named:)``.
    func groupID(named name: String) -> UInt32?
    /// The name of user `uid`, `nil` when there is none. May block, as ``userID(named:)``.
    func userName(of uid: UInt32) -> String?
}

extension AccountDirectory {
    /// A directory that knows no names of uids: claims then show uids.
    public func userName(of uid: UInt32) -> String? { nil }
}

/// The system's account databases (NSS).
public struct SystemAccounts: AccountDirectory {
    public init() {}
    public func userID(named name: String) -> UInt32? { Accounts.userID(name) }
    public func groupID(named name: String) -> UInt32? { Accounts.groupID(name) }
    public func userName(of uid: UInt32) -> String? { Accounts.userName(uid) }
}

/// A manifest read, validated and with its names resolved: ready to be put in force, or refused for its problems.
struct LoadedManifest: Sendable {
    var manifest: Manifest
    var files: [String]
    var accounts: AccountIDs
    /// Why it cannot be put in force; empty when it can.
    var problems: [ManifestProblem]
    /// The load request it answers (``ManifestLoader/requestLoad()``): a `reload` asked before is answered by it.
    var generation: UInt64
}

/// Loads the manifest (files, parsing, validation, account names) on a thread of its own, so that a slow disk, a
/// huge drop-in directory or a slow directory service never holds up the broker loop; the loop puts the result in
/// force when it arrives.
final class ManifestLoader: Sendable {
    private let mainPath: String
    private let dropInDirectory: String
    private let directory: any AccountDirectory
    private let results: Mailbox<LoadedManifest>
    /// How many loads were asked for; a load answers every request made before it started.
    private let requested = Atomic<UInt64>(0)
    private let signal: BlockingSignal

    init(
        mainPath: String, dropInDirectory: String, directory: any AccountDirectory, results: Mailbox<LoadedManifest>
    ) throws(Errno) {
        self.mainPath = mainPath
        self.dropInDirectory = dropInDirectory
        self.directory = directory
        self.results = results
        signal = try BlockingSignal()
        try startThread(name: "accmond-manifest") { [self] in loadLoop() }
    }

    /// Loads at start-up, before any client is served, and returns the result.
    ///
    /// The load runs on a thread of its own while the calling thread waits for it or for a SIGTERM or SIGINT to be
    /// pending (accmond blocks them until the loop's signalfd takes them; this wait leaves them pending): a start-up
    /// load that hangs (a drop-in on a file system that does not answer, a directory service that does not answer
    /// the account lookups) never makes accmond unkillable. When a stop signal comes first, the result is a refused
    /// manifest that says so, and start-up stops at its next step (``Daemon/run()``).
    func loadNow() -> LoadedManifest {
        let generation = requested.load(ordering: .relaxed)
        // try?: without an eventfd, a signalfd or a thread, load here as before.
        guard let load = try? StartUpLoad(), let stops = try? SignalDescriptor([SIGTERM, SIGINT]),
            (try? startThread(name: "accmond-start", { [self] in load.finish(self.load(generation: generation)) }))
                != nil
        else { return self.load(generation: generation) }
        defer { stops.descriptor.close() }
        while true {
            // try?: a failed poll is retried; the result or the signal is still there.
            let ready = (try? waitForReadable([load.done.descriptor, stops.descriptor], timeoutMilliseconds: -1))?
                .ready
            if ready?[0] == true, let loaded = load.result { return loaded }
            if ready?[1] == true {
                let problem = ManifestProblem.unreadable(
                    file: mainPath, reason: "start-up was stopped by a signal while the manifest was being read")
                return LoadedManifest(
                    manifest: .empty, files: [], accounts: AccountIDs(), problems: [problem], generation: generation)
            }
        }
    }

    /// Asks for a load on the loader's thread; its result arrives through the mailbox. Requests made while a load
    /// runs are answered by the next one, which starts once that one is done. Returns the request's generation.
    func requestLoad() -> UInt64 {
        let generation = requested.add(1, ordering: .sequentiallyConsistent).newValue
        signal.signal()
        return generation
    }

    private func loadLoop() {
        while true {
            signal.wait()
            let generation = requested.load(ordering: .sequentiallyConsistent)
            results.post([load(generation: generation)])
        }
    }

    private func load(generation: UInt64) -> LoadedManifest {
        let (paths, listing) = ManifestFiles.paths(explicit: nil, main: mainPath, directory: dropInDirectory)
        let (read, unreadable) = ManifestFiles.read(paths)
        var problems = listing + unreadable
        var manifest = Manifest.empty
        switch Manifest.parse(files: read) {
        case .success(let parsed): manifest = parsed
        case .failure(let found): problems += found.problems
        }
        let accounts =
            problems.isEmpty
            ? AccountIDs(
                resolving: manifest.accountNames, userID: directory.userID(named:), groupID: directory.groupID(named:))
            : AccountIDs()
        return LoadedManifest(
            manifest: manifest, files: read.map(\.path), accounts: accounts, problems: problems, generation: generation)
    }
}

/// The start-up load's result, handed from its thread: owned by both, so that the eventfd stays open for the thread
/// even when the waiting thread has gone on without it.
private final class StartUpLoad: Sendable {
    let done: WakeupEvent
    private let loaded = Mutex<LoadedManifest?>(nil)

    init() throws(Errno) { done = try WakeupEvent() }

    deinit { done.descriptor.close() }

    var result: LoadedManifest? { loaded.withLock { $0 } }

    func finish(_ manifest: LoadedManifest) {
        loaded.withLock { $0 = manifest }
        done.signal()
    }
}
