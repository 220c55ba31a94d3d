// accmon-bench-client SOCKET [--handler | --reader-executor]: an app that receives events through AccmonClient, as an
// app would.
//
// Subscribes to every accessory, prints `ready` once the snapshot is in, then for each event prints one line
// `CHANGE SERIAL T_NS` with a single write(2), where T_NS is CLOCK_MONOTONIC when the event reached the app. By
// default the events come from the subscription's async sequence (`for try await`, on Swift's cooperative pool); with
// `--handler` they come to a handler on the connection's reader thread (`subscribe(_:includeRejected:onUpdate:)`); with
// `--reader-executor` from the async sequence in a task that prefers the connection's reader executor
// (`withTaskExecutorPreference(connection.readerExecutor)`), so the loop runs on the reader thread.
// The bench times the line again as it reads it (stamp.c), as it does for `accmon watch --json` and `udevadm monitor`.
import AccmonClient
import Glibc

func emit(_ text: String) {
    var text = text
    text.withUTF8 { bytes in
        var offset = 0
        while offset < bytes.count {
            let written = write(1, bytes.baseAddress! + offset, bytes.count - offset)
            if written <= 0 { exit(1) }
            offset += written
        }
    }
}

/// Prints the line of an event: its change and serial number, stamped now.
func emit(change: String, serial: String) {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    emit("\(change) \(serial) \(Int(now.tv_sec) * 1_000_000_000 + now.tv_nsec)\n")
}

/// Prints the subscription's events from a loop in a task that prefers the connection's reader executor. Not isolated
/// to the main actor, as this file's top-level code is: an actor's isolation wins over an executor preference.
func emitOnTheReaderThread(_ subscription: AccessorySubscription, _ connection: AccmonConnection) async throws {
    try await withTaskExecutorPreference(connection.readerExecutor) {
        for try await event in subscription {
            emit(change: event.change.rawValue, serial: event.accessory.serialNumber)
        }
    }
}

let arguments = CommandLine.arguments.dropFirst()
let socketPath = arguments.first { !$0.hasPrefix("--") }
do {
    let connection = try await AccmonConnection.connect(socketPath: socketPath, clientName: "accmon-bench-client")
    if arguments.contains("--handler") {
        let observation = try await connection.subscribe { update in
            switch update {
            case .snapshot(let snapshot): emit("ready \(snapshot.accessories.count)\n")
            case .event(let event): emit(change: event.change.rawValue, serial: event.accessory.serialNumber)
            }
        }
        try await observation.waitForEnd()
    } else if arguments.contains("--reader-executor") {
        let subscription = try await connection.subscribe()
        emit("ready \(subscription.snapshot.accessories.count)\n")
        try await emitOnTheReaderThread(subscription, connection)
    } else {
        let subscription = try await connection.subscribe()
        emit("ready \(subscription.snapshot.accessories.count)\n")
        for try await event in subscription {
            emit(change: event.change.rawValue, serial: event.accessory.serialNumber)
        }
    }
} catch {
    emit("error \(error)\n")
    exit(1)
}
