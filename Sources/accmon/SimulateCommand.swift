import AccmonClient
import AccmonManifest
import AccmonOptions
import Glibc
import Synchronization

struct SimulateCommand: Command {
    static let name = "simulate"
    static let abstract = "Plug or unplug a simulated accessory (accmond must run with --simulate)."
    static let usage = """
        Usage: accmon simulate connect --kind KIND [ACCESSORY OPTIONS] [--socket PATH]
               accmon simulate disconnect CONNECTION_ID [--socket PATH]

        \(abstract)
        `connect` prints the new connection id.

        Accessory options (every field of the accessory model):
          --kind KIND            usb, serial or bluetooth-hid (required)
          --vendor ID            vendor id (hex)          --product ID         product id (hex)
          --name TEXT            display name             --manufacturer TEXT  manufacturer
          --model TEXT           model number             --serial TEXT        serial number
          --firmware TEXT        firmware revision        --hardware TEXT      hardware revision
          --protocol NAME        a protocol string (repeatable)
          --node PATH            a device node (repeatable)
          --sysfs PATH           sysfs path               --port PATH          USB port path (such as 1-1.2)
          --interface NUMBER     USB interface number of a serial port (such as 00)
          --id TEXT              accessory id (default: derived from kind, ids and serial or port)
        \(CommonOptions.help)

        """

    enum Action {
        case connect(Accessory)
        case disconnect(ConnectionID)
    }

    var common: CommonOptions
    var action: Action

    init(_ arguments: inout OptionCursor, socket: String?) throws(UsageError) {
        common = CommonOptions(socket: socket)
        switch try arguments.next() {
        case "connect":
            var kind: AccessoryKind?
            var accessory = Accessory(kind: .usb)
            var accessoryID: String?
            while let option = try arguments.next() {
                if try common.parse(option, &arguments) { continue }
                switch option {
                case "--kind": kind = try parseKind(arguments.value(for: option))
                case "--vendor": accessory.vendorID = try parseHexID(arguments.value(for: option), option)
                case "--product": accessory.productID = try parseHexID(arguments.value(for: option), option)
                case "--name": accessory.name = try arguments.value(for: option)
                case "--manufacturer": accessory.manufacturer = try arguments.value(for: option)
                case "--model": accessory.modelNumber = try arguments.value(for: option)
                case "--serial": accessory.serialNumber = try arguments.value(for: option)
                case "--firmware": accessory.firmwareRevision = try arguments.value(for: option)
                case "--hardware": accessory.hardwareRevision = try arguments.value(for: option)
                case "--protocol": accessory.protocolStrings.append(try arguments.value(for: option))
                case "--node": accessory.deviceNodes.append(try arguments.value(for: option))
                case "--sysfs": accessory.sysfsPath = try arguments.value(for: option)
                case "--port": accessory.portPath = try arguments.value(for: option)
                case "--interface": accessory.interfaceNumber = try arguments.value(for: option)
                case "--id": accessoryID = try arguments.value(for: option)
                default: throw UsageError("unknown option '\(option)'")
                }
            }
            guard let kind else { throw UsageError("simulate connect: --kind is required") }
            accessory.kind = kind
            accessory.accessoryID = accessoryID ?? accessory.derivedAccessoryID
            action = .connect(accessory)
        case "disconnect":
            var connectionID: ConnectionID?
            while let argument = try arguments.next() {
                if try common.parse(argument, &arguments) { continue }
                guard connectionID == nil, let number = UInt64(argument) else {
                    throw UsageError("simulate disconnect: '\(argument)' is not a connection id")
                }
                connectionID = ConnectionID(number)
            }
            guard let connectionID else { throw UsageError("simulate disconnect: CONNECTION_ID is required") }
            action = .disconnect(connectionID)
        case let other?:
            throw UsageError("simulate: unknown action '\(other)' (expected connect or disconnect)")
        case nil:
            throw UsageError("simulate: an action is required (connect or disconnect)")
        }
    }

    func run() async throws(AccmonError) {
        let connection = try await common.connect()
        defer { connection.close() }
        switch action {
        case .connect(let accessory):
            writeOut("\(try await connection.simulateConnect(accessory))\n")
        case .disconnect(let connectionID):
            try await connection.simulateDisconnect(connectionID)
        }
    }
}
