import AccmonNodes
import AccmonProtocol
import AccmonSys
import Glibc

/// Who acts on the device nodes of claimed accessories.
public struct NodeRouting: Sendable {
    /// Where the package's `accmon-nodes.socket` listens.
    public static let defaultHelperSocket = "/run/accmon-nodes.sock"

    /// The directory below which simulated accessories' nodes are enforced by accmond itself
    /// (`--simulated-nodes DIR`); `nil`: simulated nodes are left alone.
    public var simulatedNodes: String?
    /// The helper's socket (`--node-helper PATH`); `nil`: claims on real devices are refused.
    public var helperSocket: String?
    /// Where accmond keeps its record of the simulated nodes it holds (its state directory).
    var recordDirectory: String?
    /// How long a request to the helper waits for its reply.
    var helperTimeout: Duration = .seconds(10)

    public init(simulatedNodes: String? = nil, helperSocket: String? = NodeRouting.defaultHelperSocket) {
        self.simulatedNodes = simulatedNodes
        self.helperSocket = helperSocket
    }
}

/// The node operations of one daemon, used on one thread at a time (the node guard's, or start-up's before it):
/// accmond's own ``NodeKeeper`` for simulated nodes below `--simulated-nodes`, the helper's link for real devices,
/// each with its ``NodeLedger``. Each is made when first needed, and made again after a failure to make it.
final class NodeRouter: @unchecked Sendable {
    private let routing: NodeRouting
    private var keeper: NodeKeeper?
    private var helper: NodeHelperLink?
    let simulatedLedger = NodeLedger()
    let helperLedger = NodeLedger()

    init(_ routing: NodeRouting) { self.routing = routing }

    func route(_ target: NodeGuard.Target) -> Result<any NodeOperations, NodeGuard.NodeRefusal> {
        switch target {
        case .node(_, simulated: true):
            switch simulatedKeeper() {
            case .success(let keeper): return .success(ControlOperations(keeper, simulated: true, simulatedLedger))
            case .failure(let refusal): return .failure(refusal)
            }
        case .node(_, simulated: false), .ports:
            switch helperLink() {
            case .success(let link): return .success(HelperOperations(link, helperLedger))
            case .failure(let refusal): return .failure(refusal)
            }
        }
    }

    /// Reconciles each side whose ledger says so (``NodeLedger/reconcile(_:)``); returns what each did, by side.
    func reconcile() -> [(side: String, outcome: NodeLedger.Outcome)] {
        var done: [(side: String, outcome: NodeLedger.Outcome)] = []
        if simulatedLedger.needsReconcile {
            if case .success(let keeper) = simulatedKeeper() {
                done.append(("simulated nodes", simulatedLedger.reconcile(keeper)))
            } else {
                simulatedLedger.giveUp()  // no keeper: nothing it could hold
            }
        }
        if helperLedger.needsReconcile {
            // No socket and nothing owed: no helper runs here (a test's accmond, a host without the package's
            // units); one that starts later has no record of this accmond's claims but those it is sent.
            if let socket = routing.helperSocket, access(socket, F_OK) != 0, !helperLedger.owes {
                helperLedger.giveUp()
            } else if case .success(let link) = helperLink() {
                done.append(("accmon-nodes", helperLedger.reconcile(link)))
            } else {
                helperLedger.giveUp()  // no helper configured
            }
        }
        return done
    }

    /// Milliseconds until a reconciliation is due again, if one is.
    var millisecondsUntilReconcile: Int32? {
        let due = [simulatedLedger, helperLedger].filter(\.needsReconcile)
        return due.map(\.retryDelayMilliseconds).min()
    }

    private func simulatedKeeper() -> Result<NodeKeeper, NodeGuard.NodeRefusal> {
        guard let directory = routing.simulatedNodes else {
            return .failure(.init(why: "simulated accessory: accmond runs without --simulated-nodes", fails: false))
        }
        guard let records = routing.recordDirectory else {
            return .failure(.init(why: "--simulated-nodes needs --state-dir (accmond keeps its record there)", fails: true))
        }
        if let keeper { return .success(keeper) }
        do {
            let made = try NodeKeeper(
                policy: .beneath(directory), stateDirectory: records, recordName: "simulated-nodes.json")
            keeper = made
            return .success(made)
        } catch {
            return .failure(.init(why: "\(error)", fails: true))
        }
    }

    private func helperLink() -> Result<NodeHelperLink, NodeGuard.NodeRefusal> {
        guard let socket = routing.helperSocket else {
            return .failure(.init(why: "accmond runs without a node helper (--node-helper none)", fails: true))
        }
        if let helper { return .success(helper) }
        let made = NodeHelperLink(socketPath: socket, timeout: routing.helperTimeout)
        helper = made
        return .success(made)
    }
}

/// The helper's operations: ``ControlOperations`` that also notice a new connection (the helper restarted, or the
/// link reconnected after a failure), after which the helper's holdings are reconciled.
struct HelperOperations: NodeOperations, @unchecked Sendable {
    let link: NodeHelperLink
    let operations: ControlOperations

    init(_ link: NodeHelperLink, _ ledger: NodeLedger) {
        self.link = link
        operations = ControlOperations(link, simulated: false, ledger)
    }

    private func noticingReconnection<Value>(_ body: () -> Value) -> Value {
        let before = link.connections
        defer { if link.connections > before && before > 0 { operations.ledger.reconnected() } }
        return body()
    }

    func hold(_ path: String, for holder: NodeHolder) -> NodeStep { noticingReconnection { operations.hold(path, for: holder) } }
    func release(_ path: String) -> NodeStep { noticingReconnection { operations.release(path) } }
    func openers(of path: String) -> [AccmonProtocol.NodeOpener] { noticingReconnection { operations.openers(of: path) } }
    func openers(ofEach paths: [String]) -> [[AccmonProtocol.NodeOpener]] {
        noticingReconnection { operations.openers(ofEach: paths) }
    }
    func cut(_ path: String) -> NodeStep { noticingReconnection { operations.cut(path) } }
    func markPort(_ portPath: String, claimed: Bool) -> NodeStep {
        noticingReconnection { operations.markPort(portPath, claimed: claimed) }
    }
    func open(_ path: String, readOnly: Bool) -> (step: NodeStep, descriptor: FileDescriptor?) {
        noticingReconnection { operations.open(path, readOnly: readOnly) }
    }
    func permits(_ path: String, uid: UInt32, gids: [UInt32], readOnly: Bool) -> (permitted: Bool?, step: NodeStep) {
        noticingReconnection { operations.permits(path, uid: uid, gids: gids, readOnly: readOnly) }
    }
}

/// ``NodeOperations`` over the node library's ``NodeControl`` (the keeper or the helper's link).
struct ControlOperations: NodeOperations, @unchecked Sendable {
    let control: any NodeControl
    let simulated: Bool
    let ledger: NodeLedger

    init(_ control: any NodeControl, simulated: Bool, _ ledger: NodeLedger) {
        self.control = control
        self.simulated = simulated
        self.ledger = ledger
    }

    func hold(_ path: String, for holder: NodeHolder) -> NodeStep {
        // A remote holder with no local user: the node is root's alone.
        let library = AccmonNodes.NodeHolder(uid: holder.uid ?? 0, gids: holder.uid == nil ? [0] : holder.gids, grant: holder.grant)
        do {
            _ = try control.hold(path, holder: library)
            ledger.held(path, for: library)
            return .done
        } catch {
            // A real device's node gone while it was being held: the device is re-enumerating (a reset, a cut that
            // disconnected it); udev reports its removal, and the claim follows it.
            if error.code == .missing && !simulated { return .gone("\(error)") }
            return step(for: error)
        }
    }

    func release(_ path: String) -> NodeStep {
        do {
            _ = try control.release(path)
            ledger.released(path, succeeded: true)
            return .done
        } catch {
            // Not held (a link, a node left alone): nothing to put back.
            let succeeded = error.code == .notHeld || error.code == .missing || error.code == .refused
            ledger.released(path, succeeded: succeeded)
            return error.code == .notHeld ? .skipped("\(error)") : step(for: error)
        }
    }

    func openers(of path: String) -> [AccmonProtocol.NodeOpener] {
        ((try? control.openers(of: path)) ?? []).map {  // try?: a node gone or left alone has none to name
            AccmonProtocol.NodeOpener(path: path, pid: $0.pid, uid: $0.uid, command: $0.command)
        }
    }

    func openers(ofEach paths: [String]) -> [[AccmonProtocol.NodeOpener]] {
        zip(paths, control.openers(ofEach: paths)).map { path, openers in
            openers.map { AccmonProtocol.NodeOpener(path: path, pid: $0.pid, uid: $0.uid, command: $0.command) }
        }
    }

    func cut(_ path: String) -> NodeStep {
        // The control looks for what has the node open, and cuts nothing when nothing has.
        do {
            let outcome = try control.cut(path)
            switch outcome.method {
            case .hungUp, .reauthorized, .portDisabled: return .done
            case .notCut: return .skipped(outcome.reason ?? "not cut")
            }
        } catch {
            return step(for: error)
        }
    }

    func markPort(_ portPath: String, claimed: Bool) -> NodeStep {
        do {
            if claimed {
                try control.markPort(portPath)
            } else {
                _ = try control.unmarkPort(portPath)
            }
            ledger.marked(portPath, claimed: claimed, succeeded: true)
            return .done
        } catch {
            ledger.marked(portPath, claimed: claimed, succeeded: false)
            return step(for: error)
        }
    }

    func open(_ path: String, readOnly: Bool) -> (step: NodeStep, descriptor: FileDescriptor?) {
        do {
            return (.done, try control.openForIO(path, readOnly: readOnly))
        } catch {
            return (error.code == .missing && !simulated ? .gone("\(error)") : .failed("\(error)"), nil)
        }
    }

    func permits(_ path: String, uid: UInt32, gids: [UInt32], readOnly: Bool) -> (permitted: Bool?, step: NodeStep) {
        do {
            let state = try control.unclaimedState(of: path)
            return (state.allows(readOnly ? .read : .readWrite, uid: uid, gids: gids), .done)
        } catch {
            return (nil, .failed("\(error)"))
        }
    }

    /// A refusal to follow a link, or, for a simulated accessory, to touch a node outside its directory, leaves the
    /// node alone; anything else fails the claim.
    private func step(for error: NodeError) -> NodeStep {
        if error.code == .refused && (simulated || error.reason.contains("symbolic link")) {
            return .skipped(error.reason.contains("symbolic link")
                ? "a symbolic link: not followed (the node it points to is held)" : "\(error)")
        }
        return .failed("\(error)")
    }
}
