import AccmonManifest
import AccmonProtocol
import AccmonSystemd

/// The object manager and the accessory objects: what a peer may see, properties, and the signals that keep a
/// watching peer's view true (docs/DBUS.md, "Objects" and "Who sees what").
extension BusFrontend {
    // MARK: What a peer sees

    /// The accessory of connection `id` as `peer` sees it (with the manifest's protocol strings); `nil` when it is
    /// not connected or the manifest hides it from `peer` (rejected accessories are never on the bus).
    func visibleAccessory(_ id: ConnectionID, to peer: BusPeer) -> Accessory? {
        guard let key = state.registry.key(of: id), let accessory = state.registry.accessory(under: key),
            let verdict = state.authorizer.verdict(id),
            verdict.isVisible(to: peer.principal, includingRejected: false, accounts: state.authorizer.accounts)
        else { return nil }
        return verdict.announced(accessory)
    }

    func isVisible(_ id: ConnectionID, to peer: BusPeer) -> Bool { visibleAccessory(id, to: peer) != nil }

    /// Every accessory `peer` may see, with the claims on them.
    func visibleAccessories(for peer: BusPeer) -> Snapshot {
        publisher.visibleSnapshot(for: peer.principal, filter: .all, includeRejected: false, claims: true)
    }

    /// The claim on connection `id`, as everyone who sees the accessory sees it.
    func claim(on id: ConnectionID) -> ClaimSummary? { state.claims?.summaries(of: [id])[id] }

    // MARK: Calls

    /// `GetManagedObjects`: every accessory the caller may see, with its properties; the caller watches from now on,
    /// so that the signals it gets after this reply are exactly the changes after it (the loop makes both).
    func managedObjects(_ call: BusCall, _ peer: BusPeer) {
        watch(peer)
        let snapshot = visibleAccessories(for: peer)
        reply(
            call,
            made: BusBody { (message: BusMessage) throws(SystemdBusError) in
                try message.container("a", "{oa{sa{sv}}}") { () throws(SystemdBusError) in
                    for accessory in snapshot.accessories {
                        try message.container("e", "oa{sa{sv}}") { () throws(SystemdBusError) in
                            try message.append(objectPath: BusAPI.accessoryPath(accessory.connectionID))
                            try BusAccessoryProperties.writeInterfaces(
                                accessory, claim: snapshot.claims[accessory.connectionID], into: message)
                        }
                    }
                }
            })
    }

    /// `org.freedesktop.DBus.Properties`: `Get` and `GetAll` of the object's interfaces; `Set` is refused (every
    /// property is read-only: requests are methods).
    func properties(
        _ call: BusCall, _ member: String, _ kind: ObjectKind, _ peer: BusPeer, _ available: [BusInterfaceDescription]
    ) {
        guard let interfaceName = call.arguments.first?.text,
            let interface = available.first(where: { $0.name == interfaceName })
        else {
            let named = call.arguments.first?.text ?? ""
            fail(call, BusError(.unknownInterface, "\(member): \(call.path) has no interface '\(named)'"))
            return
        }
        if case .accessory = kind { watch(peer) }
        switch member {
        case "Get":
            let name = call.arguments[1].text ?? ""
            guard interface.property(name) != nil,
                let value = propertyValues(interface.name, kind, peer).first(where: { $0.0 == name })?.1
            else {
                fail(call, BusError(.unknownProperty, "Get: \(interface.name) has no property '\(name)'"))
                return
            }
            reply(call, [.variant(value)])
        case "GetAll":
            reply(call, [.vardict(propertyValues(interface.name, kind, peer))])
        default:
            let name = call.arguments[1].text ?? ""
            if interface.property(name) != nil {
                fail(call, BusError(.readOnlyProperty, "Set: \(interface.name).\(name) is read-only"))
            } else {
                fail(call, BusError(.unknownProperty, "Set: \(interface.name) has no property '\(name)'"))
            }
        }
    }

    /// The properties of `interface` on an object of `kind`, in their declared order.
    private func propertyValues(_ interface: String, _ kind: ObjectKind, _ peer: BusPeer) -> [(String, BusValue)] {
        switch (interface, kind) {
        case (BusAPI.managerInterface, .manager):
            return [
                ("Version", .string(AccmonVersion.current)),
                ("ProtocolVersion", .uint32(UInt32(WireFormat.supportedVersions.upperBound))),
                ("Sequence", .uint64(state.registry.sequence)),
            ]
        case (BusAPI.accessoryInterface, .accessory(let id)):
            guard let accessory = visibleAccessory(id, to: peer) else { return [] }
            return BusAccessoryProperties.all(accessory, claim: claim(on: id))
        case (BusAPI.subscriptionInterface, .subscription(let session)):
            return subscriptionProperties(session)
        case (BusAPI.claimInterface, .claim(let claim)):
            return claimProperties(claim)
        default:
            return []
        }
    }

    // MARK: Signals to watchers

    /// The watching peers that may see what `verdict` decides under `accounts`.
    private func watchers(seeing verdict: Authentication, accounts: AccountIDs) -> [String] {
        peers.values.filter {
            $0.watches && verdict.isVisible(to: $0.principal, includingRejected: false, accounts: accounts)
        }.map(\.name).sorted()
    }

    /// An accessory connected or disconnected (as the loop announced it): `InterfacesAdded` or `InterfacesRemoved`
    /// to each watcher that may see it.
    func accessoryPublished(_ event: AccessoryEvent, verdict: Authentication, accounts: AccountIDs) {
        guard watcherCount > 0 else { return }
        let destinations = watchers(seeing: verdict, accounts: accounts)
        announce(event.change, event.accessory, to: destinations)
    }

    /// After a reload: the watchers that see the accessory now and did not (`InterfacesAdded`), and those that saw it
    /// and do not any more (`InterfacesRemoved`).
    func visibilityChanged(
        _ accessory: Accessory, before: Authentication, oldAccounts: AccountIDs, after: Authentication,
        accounts: AccountIDs
    ) {
        guard watcherCount > 0 else { return }
        let saw = Set(watchers(seeing: before, accounts: oldAccounts))
        let sees = Set(watchers(seeing: after, accounts: accounts))
        announce(.disconnect, before.announced(accessory), to: saw.subtracting(sees).sorted())
        announce(.connect, after.announced(accessory), to: sees.subtracting(saw).sorted())
    }

    private func announce(_ change: AccessoryEvent.Change, _ accessory: Accessory, to destinations: [String]) {
        guard !destinations.isEmpty else { return }
        let path = BusAPI.accessoryPath(accessory.connectionID)
        switch change {
        case .connect:
            let claim = claim(on: accessory.connectionID)
            signal(
                destinations, path: BusAPI.managerPath, interface: StandardBusInterfaces.objectManager.name,
                member: "InterfacesAdded",
                BusBody { (message: BusMessage) throws(SystemdBusError) in
                    try message.append(objectPath: path)
                    try BusAccessoryProperties.writeInterfaces(accessory, claim: claim, into: message)
                })
        case .disconnect:
            signal(
                destinations, path: BusAPI.managerPath, interface: StandardBusInterfaces.objectManager.name,
                member: "InterfacesRemoved", BusBody(values: [.objectPath(path), .strings([BusAPI.accessoryInterface])]))
        }
    }

    /// A claim on the accessory changed: `PropertiesChanged` of its claim properties to each watcher that sees it.
    func claimChanged(_ id: ConnectionID, verdict: Authentication, claim: ClaimSummary?) {
        guard watcherCount > 0 else { return }
        let destinations = watchers(seeing: verdict, accounts: state.authorizer.accounts)
        signal(
            destinations, path: BusAPI.accessoryPath(id), interface: StandardBusInterfaces.properties.name,
            member: "PropertiesChanged",
            BusBody(values: [
                .string(BusAPI.accessoryInterface), .vardict(BusAccessoryProperties.claimValues(claim)), .strings([]),
            ]))
    }
}
