import AccmonClient
import AccmonOptions
import Synchronization

struct WaitCommand: Command {
    static let name = "wait"
    static let abstract = "Wait until a matching accessory is connected; print its first device node."
    static let usage = """
        Usage: accmon wait [--kind KIND] [--vendor ID] [--product ID] [--protocol NAME] [--serial SERIAL]
                           [--timeout SECONDS] [--json] [--socket PATH]

        \(abstract)
        Returns at once when one is connected already. For shell scripts:
            PORT=$(accmon wait --kind serial --vendor 0403 --timeout 30)

        Options:
          --serial SERIAL    only the accessory with this serial number
          --timeout SECONDS  give up after this long: exit 75
          --json             print {"version":1,"accessory":{...}} instead of the device node (an accessory
                             without a device node prints an empty line without --json)
        \(filterOptionsHelp)
        \(CommonOptions.help)

        Exit status: 0 found, 75 timed out, 69 accmond unreachable, 64 usage error.

        """

    var common: CommonOptions
    var filter = AccessoryFilter()
    var serial: String?
    var timeout: Double?
    var json = false

    init(_ arguments: inout OptionCursor, socket: String?) throws(UsageError) {
        common = CommonOptions(socket: socket)
        while let option = try arguments.next() {
            switch option {
            case "--serial": serial = try arguments.value(for: option)
            case "--timeout": timeout = try arguments.seconds(for: option, in: 0...Double.greatestFiniteMagnitude)
            case "--json": json = true
            default:
                if try common.parse(option, &arguments) { continue }
                if try parseFilterOption(option, &arguments, into: &filter) { continue }
                throw UsageError("unknown option '\(option)'")
            }
        }
    }

    struct Output: Encodable {
        var version = jsonOutputVersion
        var accessory: Accessory
    }

    private func matches(_ accessory: Accessory) -> Bool {
        serial.map { $0 == accessory.serialNumber } ?? true
    }

    private func report(_ accessory: Accessory) {
        writeOut(json ? jsonLine(Output(accessory: accessory)) : (accessory.deviceNodes.first ?? "") + "\n")
    }

    func run() async throws(AccmonError) {
        let connection = try await common.connect()
        let timedOut = Flag()
        let timer = timeout.map { seconds in
            Task { [connection] in
                guard (try? await Task.sleep(for: .seconds(seconds))) != nil else { return }  // try?: cancelled: found
                timedOut.raise()
                connection.close()
            }
        }
        defer { timer?.cancel() }
        do {
            // The snapshot and the stream after it are one step (PROTOCOL §6): nothing connects unseen between them.
            let subscription = try await connection.subscribe(filter)
            if let present = subscription.snapshot.accessories.first(where: matches) {
                report(present)
                return
            }
            for try await event in subscription where event.change == .connect && matches(event.accessory) {
                report(event.accessory)
                return
            }
        } catch {
            if !timedOut.isRaised {
                throw error as? AccmonError ?? AccmonError(.connectionClosed, "accmon: wait: \(error)")
            }
        }
        writeError(
            "accmon: wait: no matching accessory connected within \(Self.shown(timeout ?? 0)) s\n")
        exit(.timedOut)
    }

    private static func shown(_ seconds: Double) -> String {
        seconds == seconds.rounded() ? String(Int(seconds)) : String(seconds)
    }
}

/// A flag one task raises and another reads.
final class Flag: Sendable {
    private let raised = Atomic<Bool>(false)
    func raise() { raised.store(true, ordering: .sequentiallyConsistent) }
    var isRaised: Bool { raised.load(ordering: .sequentiallyConsistent) }
}
