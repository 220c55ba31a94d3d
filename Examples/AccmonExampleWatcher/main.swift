// A minimal app using AccmonClient: prints the serial accessories connected now, then each one that comes or
// goes, and says goodbye to each accessory through its own disconnect handler.
//
//     swift run AccmonExampleWatcher [SOCKET]
import AccmonClient

let socketPath = CommandLine.arguments.dropFirst().first
do {
    let connection = try await AccmonConnection.connect(socketPath: socketPath, clientName: "example-watcher")
    print("connected to accmond \(connection.daemonVersion) as session \(connection.sessionID)")
    let subscription = try await connection.subscribe(AccessoryFilter(kind: .serial))
    func watch(_ accessory: Accessory) {
        subscription.onDisconnect(of: accessory) { gone in
            print("goodbye, \(gone.name) (connection \(gone.connectionID))")
        }
    }
    for accessory in subscription.snapshot.accessories {
        print("present: \(accessory.name) at \(accessory.deviceNodes.first ?? "-")")
        watch(accessory)
    }
    for try await event in subscription {
        print("\(event.change.rawValue): \(event.accessory.name) [seq \(event.sequence)]")
        if event.change == .connect { watch(event.accessory) }
    }
} catch let error as AccmonError {
    print(error.message)
}
