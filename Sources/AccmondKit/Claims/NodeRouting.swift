/// Who acts on the device nodes of claimed accessories.
public struct NodeRouting: Sendable {
    /// The directory below which simulated accessories' nodes are enforced by accmond itself
    /// (`--simulated-nodes DIR`); `nil`: simulated nodes are left alone.
    public var simulatedNodes: String?
    /// The helper's socket (`--node-helper PATH`); `nil`: claims on real devices are refused.
    public var helperSocket: String?

    /// Where the package's `accmon-nodes.socket` listens.
    public static let defaultHelperSocket = "/run/accmon-nodes/nodes.sock"

    public init(simulatedNodes: String? = nil, helperSocket: String? = NodeRouting.defaultHelperSocket) {
        self.simulatedNodes = simulatedNodes
        self.helperSocket = helperSocket
    }

    /// The operations for each node, or why none act on it.
    var route: NodeGuard.Route {
        let simulatedNodes = simulatedNodes
        let helperSocket = helperSocket
        return { target in
            switch target {
            case .node(_, simulated: true):
                guard simulatedNodes != nil else {
                    return .failure(.init(why: "simulated accessory: accmond runs without --simulated-nodes", fails: false))
                }
                return .failure(.init(why: "simulated nodes: not built yet", fails: false))
            case .node(_, simulated: false), .ports:
                guard let helperSocket else {
                    return .failure(.init(why: "accmond runs without a node helper (--node-helper)", fails: true))
                }
                return .failure(.init(why: "accmon-nodes at \(helperSocket): not built yet", fails: true))
            }
        }
    }
}
