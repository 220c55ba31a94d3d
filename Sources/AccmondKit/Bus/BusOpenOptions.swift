import AccmonSystemd

/// The options of `Accessory.Open` and `OpenProtocol` (`a{sv}`), checked; pure.
struct BusOpenOptions: Sendable, Hashable {
    /// Wait in line when someone holds the accessory (the reply comes when the claim is granted).
    var wait = false
    /// Open read only (default: read and write).
    var readOnly = false
    /// The claim's reason, shown to whoever asks for the accessory meanwhile.
    var reason = ""
    /// The longest the claim may last.
    var maxSeconds: Double?
    /// End the claim when the caller's login session is no longer in front (logind).
    var releaseWhenInactive = false

    static let known: [(name: String, signature: String)] = [
        ("wait", "b"), ("read-only", "b"), ("reason", "s"), ("max-seconds", "d"), ("release-when-inactive", "b"),
    ]

    init() {}

    /// Reads the options; `method` names the call in errors.
    /// - Throws: ``BusError/Name/invalidOption`` naming the option and what is wrong with it.
    init(_ value: BusValue, method: String) throws(BusError) {
        for (key, option) in try BusOptionEntries.checked(value, method: method, known: Self.known) {
            switch (key, option) {
            case ("wait", .boolean(let flag)): wait = flag
            case ("read-only", .boolean(let flag)): readOnly = flag
            case ("release-when-inactive", .boolean(let flag)): releaseWhenInactive = flag
            case ("reason", .string(let text)):
                guard text.utf8.count <= 256 else {
                    throw BusError(.invalidOption, "\(method): options: reason: longer than 256 bytes")
                }
                reason = text
            case ("max-seconds", .double(let seconds)):
                guard seconds > 0, seconds <= 86_400 * 365 else {
                    throw BusError(.invalidOption, "\(method): options: max-seconds: \(seconds) is not in (0, 1 year]")
                }
                maxSeconds = seconds
            default: break
            }
        }
    }
}
