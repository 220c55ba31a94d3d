import Testing

/// Every test of this target that starts real processes (mosquitto, accmond, accmon-mqtt) runs in a suite nested in
/// this one, one at a time: each starts several processes, and the machine may have two cores.
@Suite(.serialized) struct BridgeProcessTests {}

/// Waits until `text()` contains `fragment`; returns whether it did in time.
func waitFor(_ fragment: String, timeout: Duration = .seconds(15), in text: () -> String) async -> Bool {
    await eventuallyHolds(timeout: timeout) { text().contains(fragment) }
}

/// `condition`, polled every 20 ms until it holds or `timeout` passes.
func eventuallyHolds(timeout: Duration = .seconds(15), _ condition: () async -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if await condition() { return true }
        try? await Task.sleep(for: .milliseconds(20))  // try?: a cancelled sleep just polls again
    }
    return await condition()
}
