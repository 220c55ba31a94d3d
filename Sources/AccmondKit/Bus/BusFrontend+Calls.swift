import AccmonLogging
import AccmonProtocol
import AccmonSystemd

/// Where a call goes: the object it names as the caller may see it, the interface and method, the arguments' types;
/// then the method's own code (the other parts of ``BusFrontend``).
extension BusFrontend {
    /// What kind of object `path` is for the caller, or `nil` when it is none the caller may see.
    enum ObjectKind {
        /// `/`, `/org`, `/org/accmon`: only introspection, naming the next element.
        case ancestor(child: String)
        case manager
        case accessories
        case accessory(ConnectionID)
        case subscriptions
        case subscription(Session)
        case claims
        case claim(Claim)
    }

    private func objectKind(_ path: String, for peer: BusPeer) -> ObjectKind? {
        switch path {
        case "/": return .ancestor(child: "org")
        case "/org": return .ancestor(child: "accmon")
        case "/org/accmon": return .ancestor(child: "Accmon1")
        case BusAPI.managerPath: return .manager
        case BusAPI.accessoriesPath: return .accessories
        case BusAPI.subscriptionsPath: return .subscriptions
        case BusAPI.claimsPath: return .claims
        default:
            if let id = BusAPI.connectionID(ofPath: path) {
                return isVisible(id, to: peer) ? .accessory(id) : nil
            }
            if let number = BusAPI.claimNumber(ofPath: path) { return ownClaim(number, of: peer).map { .claim($0) } }
            if let session = subscriptions[path], session.busEndpoint?.peer == peer.name { return .subscription(session) }
            return nil
        }
    }

    /// The interfaces of an object kind.
    private func interfaces(of kind: ObjectKind) -> [BusInterfaceDescription] {
        switch kind {
        case .ancestor, .accessories, .subscriptions, .claims:
            [StandardBusInterfaces.introspectable, StandardBusInterfaces.peer]
        case .claim: BusAPI.claimInterfaces
        case .manager: BusAPI.managerInterfaces
        case .accessory: BusAPI.accessoryInterfaces
        case .subscription: BusAPI.subscriptionInterfaces
        }
    }

    /// Finds the object, interface and method, checks the arguments' types, then does what the call asks.
    func handle(_ call: BusCall) {
        let peer = peer(of: call)
        guard let kind = objectKind(call.path, for: peer) else {
            fail(call, BusError(.unknownObject, "\(call.path): no such object"))
            return
        }
        let available = interfaces(of: kind)
        let interface: BusInterfaceDescription
        if call.interface.isEmpty {
            guard let found = available.first(where: { $0.method(call.member) != nil }) else {
                fail(call, BusError(.unknownMethod, "\(call.path): no method \(call.member)"))
                return
            }
            interface = found
        } else {
            guard let found = available.first(where: { $0.name == call.interface }) else {
                fail(call, BusError(.unknownInterface, "\(call.path): no interface \(call.interface)"))
                return
            }
            interface = found
        }
        guard let method = interface.method(call.member) else {
            fail(call, BusError(.unknownMethod, "\(interface.name): no method \(call.member)"))
            return
        }
        guard call.signature == method.callSignature else {
            fail(
                call,
                BusError(
                    .invalidArguments,
                    "\(interface.name).\(method.name): takes arguments of type '\(method.callSignature)', not"
                        + " '\(call.signature)'"))
            return
        }
        switch (interface.name, method.name) {
        case ("org.freedesktop.DBus.Introspectable", "Introspect"): introspect(call, kind, peer, available)
        case ("org.freedesktop.DBus.Peer", _): reply(call)  // sd-bus answers Ping and GetMachineId itself
        case ("org.freedesktop.DBus.Properties", let member): properties(call, member, kind, peer, available)
        case ("org.freedesktop.DBus.ObjectManager", "GetManagedObjects"): managedObjects(call, peer)
        case (BusAPI.managerInterface, "Subscribe"): subscribe(call, peer)
        case (BusAPI.managerInterface, _): adminCall(call, peer)
        case (BusAPI.accessoryInterface, _):
            guard case .accessory(let connection) = kind else { return }
            open(call, peer, connection)
        case (BusAPI.claimInterface, _):
            guard case .claim(let claim) = kind else { return }
            releaseClaim(call, claim)
        case (BusAPI.subscriptionInterface, let member):
            guard case .subscription(let session) = kind else { return }
            subscriptionCall(call, member, session)
        default:
            fail(call, BusError(.unknownMethod, "\(interface.name): no method \(call.member)"))
        }
    }

    /// Answers `Introspect`: the object's interfaces and the children the caller may see.
    private func introspect(_ call: BusCall, _ kind: ObjectKind, _ peer: BusPeer, _ available: [BusInterfaceDescription]) {
        let children: [String]
        switch kind {
        case .ancestor(let child): children = [child]
        case .manager: children = ["accessories", "claims", "subscriptions"]
        case .accessories:
            watch(peer)
            children = visibleAccessories(for: peer).accessories.map { String($0.connectionID.rawValue) }
        case .subscriptions:
            children = peer.subscriptions.sorted().map { String($0.dropFirst(BusAPI.subscriptionsPath.count + 1)) }
        case .accessory:
            watch(peer)
            children = []
        case .subscription, .claim: children = []
        case .claims:
            let own = peer.claimSession.map { session in
                state.claims?.book.claims.values.filter { $0.holder.session == session.number }.map(\.number) ?? []
            } ?? []
            children = own.sorted().map(String.init)
        }
        reply(call, [.string(BusInterfaceDescription.document(interfaces: available, children: children))])
    }
}
