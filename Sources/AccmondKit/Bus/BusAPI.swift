import AccmonProtocol
import AccmonSystemd

/// accmond's names on the system bus and the interfaces of its objects (docs/DBUS.md); pure. The shipped
/// introspection file (packaging/dbus/org.accmon.Accmon1.xml) holds the same interfaces, which a test checks.
enum BusAPI {
    static let serviceName = "org.accmon.Accmon1"
    static let managerPath = "/org/accmon/Accmon1"
    static let accessoriesPath = "/org/accmon/Accmon1/accessories"
    static let subscriptionsPath = "/org/accmon/Accmon1/subscriptions"
    static let claimsPath = "/org/accmon/Accmon1/claims"

    static let managerInterface = "org.accmon.Accmon1.Manager"
    static let accessoryInterface = "org.accmon.Accmon1.Accessory"
    static let subscriptionInterface = "org.accmon.Accmon1.Subscription"
    static let claimInterface = "org.accmon.Accmon1.Claim"

    /// polkit's action for opening an accessory's node that the caller could not open by its own permissions.
    static let openAction = "org.accmon.Accmon1.open-accessory"
    /// polkit's action for the admin methods (`ReleaseOther`, `Reload`), beside the manifest's admins.
    static let manageAction = "org.accmon.Accmon1.manage"

    /// The object path of claim number `number`.
    static func claimPath(_ number: UInt64) -> String { "\(claimsPath)/\(number)" }

    /// The claim number a claim object's path names, or `nil`.
    static func claimNumber(ofPath path: String) -> UInt64? {
        guard path.hasPrefix(claimsPath + "/") else { return nil }
        let element = path.dropFirst(claimsPath.count + 1)
        guard !element.isEmpty, element.utf8.count <= 20, element.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
            return nil
        }
        return UInt64(element)
    }

    /// The object path of the accessory of connection `id`.
    static func accessoryPath(_ id: ConnectionID) -> String { "\(accessoriesPath)/\(id.rawValue)" }

    /// The connection an accessory object's path names, or `nil`.
    static func connectionID(ofPath path: String) -> ConnectionID? {
        guard path.hasPrefix(accessoriesPath + "/") else { return nil }
        let element = path.dropFirst(accessoriesPath.count + 1)
        guard !element.isEmpty, element.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), element.utf8.count <= 20,
            let number = UInt64(element)
        else { return nil }
        return ConnectionID(number)
    }

    static let manager = BusInterfaceDescription(
        managerInterface,
        methods: [
            .init("Subscribe", arguments: [.init("options", "a{sv}")], results: [.init("subscription", "o")]),
            .init("ReleaseOther", arguments: [.init("accessory", "o"), .init("reason", "s")]),
            .init("Reload"),
        ],
        properties: [
            .init("Version", "s", changes: .const),
            .init("ProtocolVersion", "u", changes: .const),
            .init("Sequence", "t", changes: .false),
        ])

    /// The accessory's fields, then its claim's.
    static let accessory = BusInterfaceDescription(
        accessoryInterface,
        methods: [
            .init(
                "Open", arguments: [.init("node", "s"), .init("options", "a{sv}")],
                results: [.init("fd", "h"), .init("claim", "o")]),
            .init(
                "OpenProtocol", arguments: [.init("protocol", "s"), .init("options", "a{sv}")],
                results: [.init("fd", "h"), .init("claim", "o")]),
        ],
        properties: BusAccessoryProperties.declared)

    /// A claim made on the bus, its holder's alone.
    static let claim = BusInterfaceDescription(
        claimInterface,
        methods: [.init("Release")],
        signals: [
            .init("Contention", arguments: [.init("details", "a{sv}")]),
            .init("Broken", arguments: [.init("details", "a{sv}")]),
        ],
        properties: [
            .init("ClaimID", "s", changes: .const),
            .init("Holder", "s", changes: .const),
            .init("HolderUID", "u", changes: .const),
            .init("Since", "d", changes: .const),
            .init("Reason", "s", changes: .const),
            .init("Waiting", "u"),
            .init("State", "s"),
            .init("Accessories", "ao"),
        ])

    static let subscription = BusInterfaceDescription(
        subscriptionInterface,
        methods: [
            .init("Ack", arguments: [.init("sequence", "t")]),
            .init("Suspend"),
            .init("Resume"),
            .init("Close"),
        ],
        signals: [
            .init(
                "Snapshot",
                arguments: [.init("sequence", "t"), .init("accessories", "aa{sv}"), .init("restored", "b")]),
            .init("Events", arguments: [.init("events", "a(sta{sv})")]),
        ],
        properties: [
            .init("RestoreID", "s", changes: .const),
            .init("Filter", "a{sv}", changes: .const),
            .init("State", "s"),
            .init("QueuedEvents", "u", changes: .false),
            .init("Acknowledged", "t", changes: .false),
        ])

    /// The interfaces of each kind of object, with the standard ones first.
    static let managerInterfaces = StandardBusInterfaces.common + [StandardBusInterfaces.objectManager, manager]
    static let accessoryInterfaces = StandardBusInterfaces.common + [accessory]
    static let subscriptionInterfaces = StandardBusInterfaces.common + [subscription]
    static let claimInterfaces = StandardBusInterfaces.common + [claim]
}

/// The D-Bus errors accmond answers with: `org.accmon.Accmon1.Error.<name>`, with a message saying where and why.
struct BusError: Error, Sendable, Hashable {
    enum Name: String, Sendable {
        /// The call's arguments do not have the method's signature.
        case invalidArguments = "InvalidArguments"
        /// An option of an `a{sv}` is unknown, or of the wrong type or value.
        case invalidOption = "InvalidOption"
        case unknownMethod = "UnknownMethod"
        case unknownInterface = "UnknownInterface"
        /// No such object, or not one the caller may see.
        case unknownObject = "UnknownObject"
        case unknownProperty = "UnknownProperty"
        case readOnlyProperty = "ReadOnlyProperty"
        /// The caller may not do this.
        case accessDenied = "AccessDenied"
        /// One of accmond's limits was reached (subscriptions of a user, calls waiting).
        case limitReached = "LimitReached"
        /// Someone else holds the accessory (the message names the holder); `wait` waits in line instead.
        case held = "Held"
        /// polkit refused, or is not there to ask, and the caller could not open the node by its own permissions.
        case notAuthorized = "NotAuthorized"
        /// The node is not one of the accessory's (`Open`), or it has no node.
        case noSuchNode = "NoSuchNode"
        /// The accessory does not speak the protocol (`OpenProtocol`).
        case noSuchProtocol = "NoSuchProtocol"
        /// The accessory left, or the claim ended, before the node was opened.
        case gone = "Gone"
        /// What the option asks for needs logind, which does not run here.
        case noLoginSessions = "NoLoginSessions"
        /// The restore id is in use by another session of the same user (on the bus or on the socket).
        case restoreIDInUse = "RestoreIDInUse"
        /// accmond could not read the caller's credentials from the bus.
        case noCredentials = "NoCredentials"
        /// accmond failed at something (the message says what).
        case failed = "Failed"
    }

    var name: Name
    var message: String

    init(_ name: Name, _ message: String) {
        self.name = name
        self.message = message
    }

    var busName: String { "org.accmon.Accmon1.Error.\(name.rawValue)" }
}
