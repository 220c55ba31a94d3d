import AccmonSys

/// At most one log line per kind of event per interval, saying how many happened since the last one: a flood (a
/// client over its limits, `accept` out of descriptors) fills no disk.
struct LogThrottle {
    let intervalNanoseconds: UInt64
    private var lastLogged: [String: UInt64] = [:]
    private var suppressed: [String: Int] = [:]

    init(intervalSeconds: Double = 10) { intervalNanoseconds = UInt64(intervalSeconds * 1e9) }

    /// Counts one occurrence of `kind`. Returns how many occurred since the last line (this one included) when a line
    /// is due now, `nil` when it is not.
    mutating func occurrence(of kind: String, now: UInt64 = monotonicNanoseconds()) -> Int? {
        let count = suppressed[kind, default: 0] + 1
        if let last = lastLogged[kind], now &- last < intervalNanoseconds {
            suppressed[kind] = count
            return nil
        }
        lastLogged[kind] = now
        suppressed[kind] = 0
        return count
    }
}
