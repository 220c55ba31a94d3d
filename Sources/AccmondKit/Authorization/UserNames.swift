import AccmonSys
import Synchronization

/// The names of the uids that claim, resolved on a thread of its own, `accmond-names`, so that the loop never waits
/// on the account databases (a directory service may take seconds): the loop asks with ``name(of:)``, which answers
/// from the cache or asks the thread and answers `""` until the name has come back through the mailbox.
final class UserNames {
    /// The uids asked for and not yet taken by the thread.
    private final class Asked: Sendable {
        let uids = Mutex<[UInt32]>([])
    }

    private let directory: any AccountDirectory
    private let asked = Asked()
    private let signal: BlockingSignal
    private let results: Mailbox<(uid: UInt32, name: String)>
    private var cache: [UInt32: String] = [:]
    private var requested: Set<UInt32> = []
    private var started = false

    init(directory: any AccountDirectory, results: Mailbox<(uid: UInt32, name: String)>) throws(Errno) {
        self.directory = directory
        self.results = results
        signal = try BlockingSignal()
    }

    /// The name of `uid`: from the cache, or `""` while it is being looked up (it is asked for once).
    func name(of uid: UInt32) -> String {
        if let name = cache[uid] { return name }
        guard !requested.contains(uid) else { return "" }
        requested.insert(uid)
        asked.uids.withLock { $0.append(uid) }
        if !started {
            started = true
            let directory = directory
            let asked = asked
            let signal = signal
            let results = results
            do {
                try startThread(name: "accmond-names") {
                    while true {
                        signal.wait()
                        let uids = asked.uids.withLock { pending in
                            defer { pending = [] }
                            return pending
                        }
                        // A uid without a name is shown as "uid N" by the clients: post "" for it.
                        results.post(uids.map { ($0, directory.userName(of: $0) ?? "") })
                    }
                }
            } catch {
                started = false  // names stay empty; clients show uids
            }
        }
        signal.signal()
        return ""
    }

    /// Asks for the name of `uid` ahead of need (a client connected).
    func warm(_ uid: UInt32) {
        _ = name(of: uid)
    }

    /// Takes the names looked up since the last turn; returns the uids whose name is now known.
    func takeResults() -> [UInt32] {
        let found = results.take()
        for (uid, name) in found { cache[uid] = name }
        return found.map(\.uid)
    }
}
