import AccmonLogging
import AccmonProtocol
import AccmonSys
import Synchronization

/// Whose a held node is: the user who may open it (with the access it had, or read and write with `grant`), and its
/// groups. `uid` `nil`: nobody but root (a remote holder with no local user).
struct NodeHolder: Sendable, Hashable {
    var uid: UInt32?
    var gids: [UInt32]
    var grant: Bool
}

/// What became of an operation on one node.
enum NodeStep: Sendable, Hashable {
    /// Done: a hold is enforced, a release restored.
    case done
    /// Not done, and not an error: `why` (a symbolic link whose target is held, a node outside
    /// `--simulated-nodes`...).
    case skipped(String)
    /// Failed: `why`, as `context: object: reason`.
    case failed(String)
    /// A real device's node was gone when it was to be held: the device is re-enumerating (reset, or disconnected
    /// by a cut), udev reports it, and the claim follows it. Not a failure of the claim.
    case gone(String)
}

/// The node operations a claim needs, done by whoever may: the privileged helper `accmon-nodes` for real devices,
/// accmond itself for the files and ptys of simulated accessories below `--simulated-nodes`. Called on the node
/// guard's thread only, one operation at a time, so an implementation needs no lock of its own.
protocol NodeOperations {
    /// Enforces a claim on the node at `path` (again, when it is held already: a udev event may have rewritten it).
    func hold(_ path: String, for holder: NodeHolder) -> NodeStep
    /// Restores the node exactly as it was before it was held (or as udev or logind last rewrote it).
    func release(_ path: String) -> NodeStep
    /// The processes that have the node open.
    func openers(of path: String) -> [NodeOpener]
    /// The processes that have each node open, in order (one look at the processes for all).
    func openers(ofEach paths: [String]) -> [[NodeOpener]]
    /// Cuts the descriptors open on the node where Linux can; says what was done, or why not.
    func cut(_ path: String) -> NodeStep
    /// Marks a USB port path as claimed (or not): a node udev creates under a marked port is root's alone until the
    /// claim applies to it.
    func markPort(_ portPath: String, claimed: Bool) -> NodeStep
    /// Opens a held node for I/O (read and write, or read only) for its holder: the descriptor, or why not.
    func open(_ path: String, readOnly: Bool) -> (step: NodeStep, descriptor: FileDescriptor?)
    /// Whether `uid` with `gids` could open the node (read and write, or read only) by its own permissions, with no
    /// claim: the node's state before any claim (``AccmonNodes/NodeControl/unclaimedState(of:)``), checked as the
    /// kernel checks it. `nil` with why when the node cannot be looked at.
    func permits(_ path: String, uid: UInt32, gids: [UInt32], readOnly: Bool) -> (permitted: Bool?, step: NodeStep)
}

/// One operation on a node.
enum NodeOperation: Sendable, Hashable {
    case hold(String, NodeHolder)
    case release(String)
    case openers(String)
    case cut(String)
    case markPort(String, claimed: Bool)
    case open(String, readOnly: Bool)
    /// Whether a user could open the node by its own permissions, before any claim.
    case permits(String, uid: UInt32, gids: [UInt32], readOnly: Bool)
}

/// What an operation came to.
struct NodeResult: Sendable, Hashable {
    var operation: NodeOperation
    var step: NodeStep
    var openers: [NodeOpener] = []
    /// For `open`: the node's descriptor, which whoever takes the result must close (or hand on).
    var descriptor: FileDescriptor?
    /// For `permits`: the answer, `nil` when the node could not be looked at (``step`` says why).
    var permitted: Bool?
}

/// Runs node operations on a thread of its own, `accmond-nodes`, in the order they were submitted, and posts each
/// batch's results to the broker loop: the loop never waits on the helper or on a slow file system.
///
/// Each path goes to the operations that may act on it (``route``): a simulated accessory's node below
/// `--simulated-nodes` to accmond's own, a real device's node to the helper's; a node no one may touch is skipped,
/// with why.
final class NodeGuard: Sendable {
    /// What an operation acts on: a node (of a simulated accessory or a real device), or the marks of claimed ports.
    enum Target: Sendable, Hashable {
        case node(String, simulated: Bool)
        case ports
    }


    /// Why no operations act on a target; `fails` when that refuses the claim (a real device without a reachable
    /// helper), not when the node is merely left alone (a simulated node outside `--simulated-nodes`).
    struct NodeRefusal: Error, Sendable {
        var why: String
        var fails: Bool
    }

    struct Batch: Sendable {
        var number: UInt64
        var operations: [(NodeOperation, simulated: Bool)]
    }

    struct BatchResult: Sendable {
        var number: UInt64
        var results: [NodeResult]
    }

    private let router: NodeRouter
    private let pending = Mutex<[Batch]>([])
    private let wakeup: WakeupEvent
    private let results: Mailbox<BatchResult>
    private let logger: Logger
    private let started = Mutex(false)
    private let nextNumber = Mutex<UInt64>(1)

    init(router: NodeRouter, results: Mailbox<BatchResult>, logger: Logger) throws(Errno) {
        self.router = router
        self.results = results
        self.logger = logger
        wakeup = try WakeupEvent()
    }

    /// Queues operations, done in order after every earlier batch; returns the batch's number, which its result
    /// carries. An empty batch is answered too (in order), so a caller may wait on it without special cases.
    func submit(_ operations: [(NodeOperation, simulated: Bool)]) -> UInt64 {
        let number = nextNumber.withLock { next in
            defer { next += 1 }
            return next
        }
        pending.withLock { $0.append(Batch(number: number, operations: operations)) }
        let start = started.withLock { started in
            defer { started = true }
            return !started
        }
        if start {
            do {
                try startThread(name: "accmond-nodes") { [self] in run() }
            } catch {
                // No thread: every operation fails, said in its result, and claims are refused.
                let failed = pending.withLock { batches in
                    defer { batches = [] }
                    return batches
                }
                results.post(
                    failed.map { batch in
                        BatchResult(
                            number: batch.number,
                            results: batch.operations.map {
                                NodeResult(operation: $0.0, step: .failed("accmond: node thread: \(error)"))
                            })
                    })
                started.withLock { $0 = false }
                return number
            }
        }
        wakeup.signal()
        return number
    }

    /// Does `operations` on the calling thread: at start-up, before the loop serves, so that claims restored from
    /// the state file are enforced again first; then releases what the helper (and accmond's own keeper) hold that
    /// no claim covers (``NodeLedger``). Returns the operations' results.
    func runNow(_ operations: [(NodeOperation, simulated: Bool)]) -> [NodeResult] {
        defer { reconcile() }
        return perform(operations)
    }

    private func run() {
        let clock = ContinuousClock()
        var reconcileAt: ContinuousClock.Instant?
        while true {
            var timeout: Int32 = -1
            if let reconcileAt {
                let (seconds, attoseconds) = max(.zero, reconcileAt - clock.now).components
                timeout = Int32(clamping: seconds * 1000 + attoseconds / 1_000_000_000_000_000)
            }
            _ = try? waitForReadable([wakeup.descriptor], timeoutMilliseconds: timeout)  // try?: EINTR, looked at again
            wakeup.drain()
            let batches = pending.withLock { pending in
                defer { pending = [] }
                return pending
            }
            if !batches.isEmpty {
                results.post(
                    batches.map { batch in
                        BatchResult(number: batch.number, results: perform(batch.operations))
                    })
            }
            if let due = reconcileAt, clock.now >= due {
                reconcile()
                reconcileAt = nil
            }
            if reconcileAt == nil, let delay = router.millisecondsUntilReconcile {
                reconcileAt = clock.now + .milliseconds(delay)
            }
        }
    }

    /// Releases what a node control holds that no claim wants, where its ledger says it may; logs what it did.
    private func reconcile() {
        for (side, outcome) in router.reconcile() {
            for path in outcome.released {
                logger.notice(
                    .claimEnforcement, "\(side): \(path) was held for no claim (a release that failed, or a claim that "
                        + "ended meanwhile): released", ["node.path": path])
            }
            for port in outcome.unmarked {
                logger.notice(.claimEnforcement, "\(side): port \(port) was marked for no claim: unmarked")
            }
            for failure in outcome.failures {
                logger.warning(.claimEnforcement, "\(side): could not release what no claim holds: \(failure)")
            }
        }
    }

    /// Performs `operations` in order; a run of `openers` of nodes on the same side (simulated or not) is one look
    /// at the processes.
    private func perform(_ operations: [(NodeOperation, simulated: Bool)]) -> [NodeResult] {
        var results: [NodeResult] = []
        var index = operations.startIndex
        while index < operations.endIndex {
            let simulated = operations[index].simulated
            var paths: [String] = []
            while index + paths.count < operations.endIndex, operations[index + paths.count].simulated == simulated,
                case .openers(let path) = operations[index + paths.count].0
            {
                paths.append(path)
            }
            guard paths.count > 1, case .success(let found) = router.route(.node(paths[0], simulated: simulated)) else {
                results.append(perform(operations[index].0, simulated: simulated))
                index += 1
                continue
            }
            for (path, openers) in zip(paths, found.openers(ofEach: paths)) {
                results.append(NodeResult(operation: .openers(path), step: .done, openers: openers))
            }
            index += paths.count
        }
        return results
    }

    private func perform(_ operation: NodeOperation, simulated: Bool) -> NodeResult {
        let target: Target
        switch operation {
        case .hold(let path, _), .release(let path), .openers(let path), .cut(let path), .open(let path, _),
            .permits(let path, _, _, _):
            target = .node(path, simulated: simulated)
        case .markPort:
            // Only real devices are re-enumerated by udev.
            guard !simulated else {
                return NodeResult(operation: operation, step: .skipped("simulated accessories have no udev rule"))
            }
            target = .ports
        }
        let operations: any NodeOperations
        switch router.route(target) {
        case .success(let found): operations = found
        case .failure(let refusal):
            return NodeResult(operation: operation, step: refusal.fails ? .failed(refusal.why) : .skipped(refusal.why))
        }
        switch operation {
        case .hold(let path, let holder): return NodeResult(operation: operation, step: operations.hold(path, for: holder))
        case .release(let path): return NodeResult(operation: operation, step: operations.release(path))
        case .openers(let path):
            return NodeResult(operation: operation, step: .done, openers: operations.openers(of: path))
        case .cut(let path): return NodeResult(operation: operation, step: operations.cut(path))
        case .markPort(let port, let claimed):
            return NodeResult(operation: operation, step: operations.markPort(port, claimed: claimed))
        case .open(let path, let readOnly):
            let (step, descriptor) = operations.open(path, readOnly: readOnly)
            return NodeResult(operation: operation, step: step, descriptor: descriptor)
        case .permits(let path, let uid, let gids, let readOnly):
            let (permitted, step) = operations.permits(path, uid: uid, gids: gids, readOnly: readOnly)
            return NodeResult(operation: operation, step: step, permitted: permitted)
        }
    }
}
