import AccmonClient
import AccmonOptions
import AccmonSys
import AccmonSystemd
import Glibc

struct OpenCommand: Command {
    static let name = "open"
    static let abstract = "Open an accessory's device node through accmond on the system bus and run a command with it."
    static let usage = """
        Usage: accmon open [FILTER OPTIONS | --connection ID] [--node PATH | --protocol NAME] [--wait] [--read-only]
                           [--reason TEXT] [--max-duration SECONDS] [--no-ask] [--release-when-inactive]
                           -- COMMAND [ARGS...]

        \(abstract)
        Asks accmond over the system bus (org.accmon.Accmon1, docs/DBUS.md) to claim the accessory for this user and
        hand over its node's descriptor (Accessory.Open): COMMAND runs with it as descriptor 3 (ACCMON_OPEN_FD=3),
        without needing the node's group or a view of /dev. A user who could not open the node by its own
        permissions needs polkit's leave (org.accmon.Accmon1.open-accessory: given to the user in front of the seat;
        otherwise an authentication agent may ask for a password). The claim lasts while COMMAND runs; if it is
        broken, COMMAND gets SIGTERM, then SIGKILL 10 s later.

            accmon open --kind serial --vendor 0403 -- sh -c 'stty -F /dev/fd/3 115200 raw; cat <&3'

        Options:
          --connection ID    the accessory of this connection
          --node PATH        which of its nodes (default: its first)
          --protocol NAME    the node of the accessory that speaks this protocol string (OpenProtocol)
          --wait             wait in line while someone holds it
          --read-only        open it read only (default: read and write)
          --reason TEXT      why: shown to whoever asks for it meanwhile
          --max-duration SECONDS
                             end the claim after this long at the latest
          --no-ask           never let polkit ask for a password
          --release-when-inactive
                             end the claim (and COMMAND) when this user's login session leaves the front (switched
                             away from, or locked; logind)
        \(filterOptionsHelp)

        COMMAND's environment: ACCMON_OPEN_FD (3), ACCMON_OPEN_NODE (the node's path on the host), ACCMON_OPEN_CLAIM
        (the claim's object path), ACCMON_OPEN_CONNECTION.

        Exit status: COMMAND's (128 + the signal if a signal ended it); 75 when the accessory is held (without
        --wait) or the claim was broken; 77 not permitted (the manifest or polkit); 69 no bus or no accmond on it;
        64 usage; 1 when nothing or more than one accessory matches; 126/127 when COMMAND cannot be run.

        """

    var filter = AccessoryFilter()
    var connection: ConnectionID?
    var node = ""
    var protocolString: String?
    var wait = false
    var readOnly = false
    var reason = ""
    var maxSeconds: Double?
    var ask = true
    var releaseWhenInactive = false
    var command: [String] = []

    init(_ arguments: inout OptionCursor, socket: String?) throws(UsageError) {
        var filtered = false
        while let option = try arguments.nextOption(commandInto: &command) {
            switch option {
            case "--connection":
                let text = try arguments.value(for: option)
                guard let number = UInt64(text) else {
                    throw UsageError("--connection: '\(text)' is not a connection id (a number such as 12)")
                }
                connection = ConnectionID(number)
            case "--node": node = try arguments.value(for: option)
            case "--protocol": protocolString = try arguments.value(for: option)
            case "--wait": wait = true
            case "--read-only": readOnly = true
            case "--reason": reason = try arguments.value(for: option)
            case "--max-duration": maxSeconds = try arguments.seconds(for: option, in: 0.001...31_536_000)
            case "--no-ask": ask = false
            case "--release-when-inactive": releaseWhenInactive = true
            case "--socket": _ = try arguments.value(for: option)  // accepted as everywhere; the bus is used
            default:
                guard try parseFilterOption(option, &arguments, into: &filter) else {
                    throw UsageError("unknown option '\(option)'")
                }
                filtered = true
            }
        }
        guard !command.isEmpty else { throw UsageError("a command to run is required, after --") }
        if connection != nil && filtered {
            throw UsageError("--connection names the accessory: it does not go with filter options")
        }
        if protocolString != nil && !node.isEmpty { throw UsageError("--node and --protocol: one of them") }
        if reason.utf8.count > 256 { throw UsageError("--reason: longer than 256 bytes") }
    }

    func run() async throws(AccmonError) {
        guard let executable = TiedChild.resolve(command[0], path: environmentValue("PATH")) else {
            writeError("accmon: open: \(command[0]): command not found\n")
            exit(127)
        }
        let opened = openOverTheBus()
        var run = OpenRun(
            command: ClaimRun.Command(executable: executable, arguments: command), opened: opened.opened,
            bus: opened.bus)
        exit(await run.run())
    }

    /// Connects to the system bus, finds the accessory and opens it; exits with the right status when it cannot.
    private func openOverTheBus() -> (bus: BusConnection, opened: OpenedNode) {
        let bus: BusConnection
        do {
            bus = try BusConnection(address: nil)
        } catch {
            fail(.unavailable, "cannot connect to the system bus: \(error)")
        }
        let path: String
        if let connection {
            path = "/org/accmon/Accmon1/accessories/\(connection.rawValue)"
        } else {
            do throws(SystemdBusError) {
                path = try findAccessory(on: bus)
            } catch {
                fail(Self.exitCode(for: error), "\(error.description)")
            }
        }
        do throws(SystemdBusError) {
            let call = try bus.methodCall(
                destination: "org.accmon.Accmon1", path: path, interface: "org.accmon.Accmon1.Accessory",
                member: protocolString == nil ? "Open" : "OpenProtocol")
            var options: [(String, BusValue)] = [("wait", .boolean(wait)), ("read-only", .boolean(readOnly))]
            if !reason.isEmpty { options.append(("reason", .string(reason))) }
            if let maxSeconds { options.append(("max-seconds", .double(maxSeconds))) }
            if releaseWhenInactive { options.append(("release-when-inactive", .boolean(true))) }
            try call.append([.string(protocolString ?? node), .vardict(options)])
            if ask { call.allowInteractiveAuthorization() }
            // In line, or asked for a password: as long as it takes.
            let reply = try bus.call(call, timeoutMicroseconds: wait || ask ? UInt64.max : 25_000_000)
            let values = try reply.readArguments()
            guard values.count == 2, case .unixFD(let passed) = values[0], case .objectPath(let claim) = values[1] else {
                fail(.failure, "accmond's reply is not (h fd, o claim)")
            }
            // The reply's descriptor is the message's: a copy of our own outlives it.
            let descriptor = fcntl(passed, F_DUPFD_CLOEXEC, 10)
            guard descriptor >= 0 else { fail(.failure, "dup: \(Errno.current)") }
            let accessory = try bus.getProperty(path, "org.accmon.Accmon1.Accessory", "DeviceNodes")
            let nodes = accessory.flatMap { value -> [String]? in
                guard case .array(_, let items) = value else { return nil }
                return items.compactMap(\.text)
            } ?? []
            return (
                bus,
                OpenedNode(
                    descriptor: FileDescriptor(rawValue: descriptor), claimPath: claim,
                    node: node.isEmpty ? nodes.first ?? "" : node, connection: path.split(separator: "/").last.map(String.init) ?? "")
            )
        } catch {
            fail(Self.exitCode(for: error), "\(error.description)")
        }
    }

    /// The one accessory of the object manager's that the filter selects.
    private func findAccessory(on bus: BusConnection) throws(SystemdBusError) -> String {
        let call = try bus.methodCall(
            destination: "org.accmon.Accmon1", path: "/org/accmon/Accmon1",
            interface: "org.freedesktop.DBus.ObjectManager", member: "GetManagedObjects")
        let reply = try bus.call(call, timeoutMicroseconds: 25_000_000)
        var matching: [String] = []
        guard case .array(_, let objects)? = try reply.readArguments().first else { return "" }
        for case .dictEntry(.objectPath(let path), let interfaces) in objects {
            guard case .array(_, let entries) = interfaces else { continue }
            for case .dictEntry(.string("org.accmon.Accmon1.Accessory"), let properties) in entries {
                if let fields = properties.stringKeyedEntries, Self.accessory(fields).map(filter.matches) == true {
                    matching.append(path)
                }
            }
        }
        guard matching.count == 1 else {
            fail(
                .failure,
                matching.isEmpty
                    ? "no accessory you may see matches" : "\(matching.count) accessories match (\(matching.joined(separator: ", ")));"
                        + " name one with --connection")
        }
        return matching[0]
    }

    /// The fields a filter reads, from an accessory object's properties.
    static func accessory(_ fields: [(key: String, value: BusValue)]) -> Accessory? {
        let values = Dictionary(fields, uniquingKeysWith: { first, _ in first })
        guard case .string(let kindName)? = values["Kind"], let kind = AccessoryKind(rawValue: kindName) else { return nil }
        var accessory = Accessory(kind: kind)
        if case .uint16(let vendor)? = values["VendorID"] { accessory.vendorID = Self.hex(vendor) }
        if case .uint16(let product)? = values["ProductID"] { accessory.productID = Self.hex(product) }
        if case .array(_, let protocols)? = values["ProtocolStrings"] { accessory.protocolStrings = protocols.compactMap(\.text) }
        return accessory
    }

    private static func hex(_ number: UInt16) -> String {
        let digits = String(number, radix: 16)
        return String(repeating: "0", count: 4 - digits.count) + digits
    }

    static func exitCode(for error: SystemdBusError) -> ExitCode {
        switch error.name {
        case "org.accmon.Accmon1.Error.Held", "org.accmon.Accmon1.Error.Gone": .timedOut
        case "org.accmon.Accmon1.Error.NotAuthorized", "org.accmon.Accmon1.Error.AccessDenied",
            "org.freedesktop.DBus.Error.AccessDenied":
            .permissionDenied
        case "org.freedesktop.DBus.Error.ServiceUnknown", "org.freedesktop.DBus.Error.NameHasNoOwner", "": .unavailable
        default: .failure
        }
    }

    private func fail(_ code: ExitCode, _ message: String) -> Never {
        writeError("accmon: open: \(message)\n")
        exit(code)
    }
}

/// The descriptor `accmon open` got, and what it opens.
struct OpenedNode {
    var descriptor: FileDescriptor
    var claimPath: String
    var node: String
    var connection: String
}
