/// Delays between reconnection attempts: 0.1 s after the first failure, doubling up to a ceiling.
struct Backoff: Sendable, Hashable {
    var ceilingSeconds: Double
    /// Consecutive failures so far.
    private(set) var failures = 0

    init(ceilingSeconds: Double) { self.ceilingSeconds = ceilingSeconds }

    /// Counts a failure; returns the delay before the next attempt, in seconds.
    mutating func failed() -> Double {
        failures += 1
        return min(0.1 * Double(1 << min(failures - 1, 20)), ceilingSeconds)
    }

    /// Whether the failure just counted is worth a log line above debug level: the first few, then one in thirty
    /// (a broker down for a night must not fill the journal).
    var isWorthReporting: Bool { failures <= 5 || failures % 30 == 0 }

    mutating func succeeded() { failures = 0 }
}

/// Nanoseconds in `seconds`, for deadlines on the monotonic clock.
func nanoseconds(_ seconds: Double) -> UInt64 { UInt64(seconds * 1e9) }
