// accmon-bench-client SOCKET: an app that receives events through AccmonClient, as an app would.
//
// Subscribes to every accessory, prints `ready` once the snapshot is in, then for each event handed to it by the
// subscription's async sequence prints one line `CHANGE SERIAL T_NS` with a single write(2), where T_NS is
// CLOCK_MONOTONIC when the event reached this loop. The bench times the line again as it reads it (stamp.c), as
// it does for `accmon watch --json` and `udevadm monitor`.
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

let socketPath = CommandLine.arguments.count > 1 ? CommandLine.arguments[1] : nil
do {
    let connection = try await AccmonConnection.connect(socketPath: socketPath, clientName: "accmon-bench-client")
    let subscription = try await connection.subscribe()
    emit("ready \(subscription.snapshot.accessories.count)\n")
    for try await event in subscription {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        emit(
            "\(event.change.rawValue) \(event.accessory.serialNumber) \(Int(now.tv_sec) * 1_000_000_000 + now.tv_nsec)\n"
        )
    }
} catch {
    emit("error \(error)\n")
    exit(1)
}
