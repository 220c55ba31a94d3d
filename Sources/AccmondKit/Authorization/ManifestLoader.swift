import AccmonManifest
import AccmonSys
import Synchronization

/// Where the user and group names of a manifest are looked up: the system's account databases, or a test's.
public protocol AccountDirectory: Sendable {
    /// The uid of user `name`, `nil` when there is none. May block (a directory service): it is never called on
    /// the broker's loop.
    func userID(named name: String) -> UInt32?
    /// The gid of group `name`, `nil` when there is none. May block, as ``userID(named:)``.
    func groupID(named name: String) -> UInt32?
}

/// The system's account databases (NSS).
public struct SystemAccounts: AccountDirectory {
    public init() {}
    public func userID(named name: String) -> UInt32? { Accounts.userID(name) }
    public func groupID(named name: String) -> UInt32? { Accounts.groupID(name) }
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

    /// Loads on the calling thread: at start-up, before any client is served.
    func loadNow() -> LoadedManifest { load(generation: requested.load(ordering: .relaxed)) }

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
