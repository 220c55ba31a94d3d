/// A D-Bus interface as introspection describes it (the D-Bus specification, "Introspection Data Format"): its
/// methods, signals and properties with their types. Pure: a service declares its interfaces once, answers
/// `Introspect` from them and checks calls and property accesses against them.
public struct BusInterfaceDescription: Sendable, Hashable {
    /// A named argument of a method or signal.
    public struct Argument: Sendable, Hashable {
        public var name: String
        public var signature: String
        public init(_ name: String, _ signature: String) {
            self.name = name
            self.signature = signature
        }
    }

    public struct Method: Sendable, Hashable {
        public var name: String
        public var arguments: [Argument]
        public var results: [Argument]
        public init(_ name: String, arguments: [Argument] = [], results: [Argument] = []) {
            self.name = name
            self.arguments = arguments
            self.results = results
        }
        /// The signature a call must have: its arguments' types in order.
        public var callSignature: String { arguments.map(\.signature).joined() }
    }

    public struct Signal: Sendable, Hashable {
        public var name: String
        public var arguments: [Argument]
        public init(_ name: String, arguments: [Argument] = []) {
            self.name = name
            self.arguments = arguments
        }
    }

    /// How a property changes, as the `org.freedesktop.DBus.Property.EmitsChangedSignal` annotation says.
    public enum ChangeSignal: String, Sendable, Hashable {
        /// `PropertiesChanged` carries the new value.
        case `true`
        /// `PropertiesChanged` names it without its value.
        case invalidates
        /// It never changes while the object exists.
        case const
        /// It changes without a signal: read it when needed.
        case `false`
    }

    public struct Property: Sendable, Hashable {
        public var name: String
        public var signature: String
        public var changeSignal: ChangeSignal
        public init(_ name: String, _ signature: String, changes: ChangeSignal = .true) {
            self.name = name
            self.signature = signature
            self.changeSignal = changes
        }
    }

    public var name: String
    public var methods: [Method]
    public var signals: [Signal]
    /// Every property is read-only: a service of this kind takes requests as method calls.
    public var properties: [Property]

    public init(_ name: String, methods: [Method] = [], signals: [Signal] = [], properties: [Property] = []) {
        self.name = name
        self.methods = methods
        self.signals = signals
        self.properties = properties
    }

    public func method(_ name: String) -> Method? { methods.first { $0.name == name } }
    public func property(_ name: String) -> Property? { properties.first { $0.name == name } }

    /// The interface's `<interface>` element, indented by `indent` spaces.
    public func xml(indent: Int = 2) -> String {
        let pad = String(repeating: " ", count: indent)
        var lines = ["\(pad)<interface name=\"\(name)\">"]
        for method in methods {
            if method.arguments.isEmpty && method.results.isEmpty {
                lines.append("\(pad)  <method name=\"\(method.name)\"/>")
                continue
            }
            lines.append("\(pad)  <method name=\"\(method.name)\">")
            for argument in method.arguments {
                lines.append(Self.argument(argument, direction: "in", pad: pad + "    "))
            }
            for result in method.results {
                lines.append(Self.argument(result, direction: "out", pad: pad + "    "))
            }
            lines.append("\(pad)  </method>")
        }
        for signal in signals {
            if signal.arguments.isEmpty {
                lines.append("\(pad)  <signal name=\"\(signal.name)\"/>")
                continue
            }
            lines.append("\(pad)  <signal name=\"\(signal.name)\">")
            for argument in signal.arguments { lines.append(Self.argument(argument, direction: nil, pad: pad + "    ")) }
            lines.append("\(pad)  </signal>")
        }
        for property in properties {
            let open = "\(pad)  <property name=\"\(property.name)\" type=\"\(property.signature)\" access=\"read\""
            if property.changeSignal == .true {
                lines.append(open + "/>")
            } else {
                lines.append(open + ">")
                lines.append(
                    "\(pad)    <annotation name=\"org.freedesktop.DBus.Property.EmitsChangedSignal\" "
                        + "value=\"\(property.changeSignal.rawValue)\"/>")
                lines.append("\(pad)  </property>")
            }
        }
        lines.append("\(pad)</interface>")
        return lines.joined(separator: "\n")
    }

    private static func argument(_ argument: Argument, direction: String?, pad: String) -> String {
        "\(pad)<arg name=\"\(argument.name)\" type=\"\(argument.signature)\""
            + (direction.map { " direction=\"\($0)\"" } ?? "") + "/>"
    }

    /// An object's introspection document: its interfaces, then its child nodes by name.
    public static func document(interfaces: [BusInterfaceDescription], children: [String]) -> String {
        var lines = [
            "<!DOCTYPE node PUBLIC \"-//freedesktop//DTD D-BUS Object Introspection 1.0//EN\"",
            " \"http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd\">",
            "<node>",
        ]
        lines += interfaces.map { $0.xml() }
        lines += children.map { "  <node name=\"\($0)\"/>" }
        lines.append("</node>")
        return lines.joined(separator: "\n") + "\n"
    }
}

/// The interfaces every object of a service has (org.freedesktop.DBus.*), as their specification declares them.
public enum StandardBusInterfaces {
    public static let peer = BusInterfaceDescription(
        "org.freedesktop.DBus.Peer",
        methods: [.init("Ping"), .init("GetMachineId", results: [.init("machine_uuid", "s")])])

    public static let introspectable = BusInterfaceDescription(
        "org.freedesktop.DBus.Introspectable", methods: [.init("Introspect", results: [.init("xml_data", "s")])])

    public static let properties = BusInterfaceDescription(
        "org.freedesktop.DBus.Properties",
        methods: [
            .init("Get", arguments: [.init("interface_name", "s"), .init("property_name", "s")], results: [.init("value", "v")]),
            .init("GetAll", arguments: [.init("interface_name", "s")], results: [.init("props", "a{sv}")]),
            .init(
                "Set", arguments: [.init("interface_name", "s"), .init("property_name", "s"), .init("value", "v")]),
        ],
        signals: [
            .init(
                "PropertiesChanged",
                arguments: [
                    .init("interface_name", "s"), .init("changed_properties", "a{sv}"),
                    .init("invalidated_properties", "as"),
                ])
        ])

    public static let objectManager = BusInterfaceDescription(
        "org.freedesktop.DBus.ObjectManager",
        methods: [.init("GetManagedObjects", results: [.init("object_paths_interfaces_and_properties", "a{oa{sa{sv}}}")])],
        signals: [
            .init(
                "InterfacesAdded",
                arguments: [.init("object_path", "o"), .init("interfaces_and_properties", "a{sa{sv}}")]),
            .init("InterfacesRemoved", arguments: [.init("object_path", "o"), .init("interfaces", "as")]),
        ])

    /// Peer, Introspectable and Properties: what every object of the service implements.
    public static let common = [peer, introspectable, properties]
}
