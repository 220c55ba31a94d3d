import AccmonNodes
import AccmonProtocol
import AccmonSys

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

    public init(simulatedNodes: String? = nil, helperSocket: String? = NodeRouting.defaultHelperSocket) {
        self.simulatedNodes = simulatedNodes
        self.helperSocket = helperSocket
    }
}

/// The node operations of one daemon, used on one thread at a time (the node guard's, or start-up's before it):
/// accmond's own ``NodeKeeper`` for simulated nodes below `--simulated-nodes`, the helper's link for real devices.
/// Each is made when first needed, and made again after a failure to make it.
final class NodeRouter: @unchecked Sendable {
    private let routing: NodeRouting
    private var keeper: NodeKeeper?
    private var helper: NodeHelperLink?

    init(_ routing: NodeRouting) { self.routing = routing }

    func route(_ target: NodeGuard.Target) -> Result<any NodeOperations, NodeGuard.NodeRefusal> {
        switch target {
        case .node(_, simulated: true):
            guard let directory = routing.simulatedNodes else {
                return .failure(.init(why: "simulated accessory: accmond runs without --simulated-nodes", fails: false))
            }
            guard let records = routing.recordDirectory else {
                return .failure(.init(why: "--simulated-nodes needs --state-dir (accmond keeps its record there)", fails: true))
            }
            if keeper == nil {
                do {
                    keeper = try NodeKeeper(
                        policy: .beneath(directory), stateDirectory: records, recordName: "simulated-nodes.json")
                } catch {
                    return .failure(.init(why: "\(error)", fails: true))
                }
            }
            return .success(ControlOperations(keeper!, simulated: true))
        case .node(_, simulated: false), .ports:
            guard let socket = routing.helperSocket else {
                return .failure(.init(why: "accmond runs without a node helper (--node-helper none)", fails: true))
            }
            if helper == nil { helper = NodeHelperLink(socketPath: socket) }
            return .success(ControlOperations(helper!, simulated: false))
        }
    }
}

/// ``NodeOperations`` over the node library's ``NodeControl`` (the keeper or the helper's link).
struct ControlOperations: NodeOperations, @unchecked Sendable {
    let control: any NodeControl
    let simulated: Bool

    init(_ control: any NodeControl, simulated: Bool) {
        self.control = control
        self.simulated = simulated
    }

    func hold(_ path: String, for holder: NodeHolder) -> NodeStep {
        // A remote holder with no local user: the node is root's alone.
        let library = AccmonNodes.NodeHolder(uid: holder.uid ?? 0, gids: holder.uid == nil ? [0] : holder.gids, grant: holder.grant)
        do {
            _ = try control.hold(path, holder: library)
            return .done
        } catch {
            return step(for: error)
        }
    }

    func release(_ path: String) -> NodeStep {
        do {
            _ = try control.release(path)
            return .done
        } catch {
            // Not held (a link, a node left alone): nothing to put back.
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
        // Only what is open is cut: re-authorizing a USB device re-enumerates it, not worth it for nothing.
        guard !openers(of: path).isEmpty else { return .skipped("nothing has it open") }
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
            return .done
        } catch {
            return step(for: error)
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
