/// A broker's list of URLs (its nodes or listeners) and which one a client tries next.
///
/// A client that cannot connect, or whose connection is lost, tries the next address at once; once every address
/// failed since the last connection, it backs off before the next round, as with one address (docs/MQTT.md §2).
public struct BrokerRotation: Sendable, Hashable {
    public let addresses: [BrokerAddress]
    /// The index of the address to try next.
    public private(set) var index = 0
    /// Addresses that failed since the last connection that succeeded (or since the last back-off).
    private var failuresInRound = 0

    public init(_ addresses: [BrokerAddress]) {
        precondition(!addresses.isEmpty, "a broker needs an address")
        self.addresses = addresses
    }

    /// The address to connect to.
    public var current: BrokerAddress { addresses[index] }

    /// A connection to ``current`` failed or was lost: moves to the next address. Returns whether to try it at once
    /// (some address of the list has not failed since the last connection); `false`: every one has, back off first.
    public mutating func failed() -> Bool {
        index = (index + 1) % addresses.count
        failuresInRound += 1
        guard failuresInRound >= addresses.count else { return true }
        failuresInRound = 0
        return false
    }

    /// Moves to the next address without counting a failure (a reader that tries every address in one go).
    public mutating func advance() { index = (index + 1) % addresses.count }

    /// A connection to ``current`` was accepted.
    public mutating func connected() { failuresInRound = 0 }
}

extension BrokerAddress {
    /// Parses a list of broker URLs separated by commas (`--broker`, or the elements of `broker` in mqtt.json), such
    /// as `mqtt://node-a:1883,mqtt://node-b:1883`: spaces around a URL are ignored; an empty element, a URL given
    /// twice, and `mqtt://` beside `mqtts://` are refused (the list is one broker's nodes or listeners, with one login
    /// and one set of TLS files).
    public static func parseList(_ text: String) -> Result<[BrokerAddress], BrokerURLProblem> {
        let parts = text.split(separator: ",", omittingEmptySubsequences: false).map {
            String($0.drop { $0 == " " }.reversed().drop { $0 == " " }.reversed())
        }
        return parseList(parts)
    }

    /// Parses broker URLs, one per element (see ``parseList(_:)-(String)``).
    public static func parseList(_ urls: [String]) -> Result<[BrokerAddress], BrokerURLProblem> {
        guard !urls.isEmpty else { return .failure(BrokerURLProblem("no broker URL")) }
        var addresses: [BrokerAddress] = []
        for (number, url) in urls.enumerated() {
            guard !url.isEmpty else {
                return .failure(BrokerURLProblem("URL \(number + 1) of \(urls.count) is empty"))
            }
            switch parse(url) {
            case .failure(let problem): return .failure(problem)
            case .success(let address):
                if addresses.contains(address) {
                    return .failure(BrokerURLProblem("'\(url)': given twice (as \(address))"))
                }
                if let first = addresses.first, first.usesTLS != address.usesTLS {
                    return .failure(
                        BrokerURLProblem(
                            "'\(url)': mqtt:// and mqtts:// in one list: the list is one broker's nodes or listeners, "
                                + "with one login and one set of TLS files"))
                }
                addresses.append(address)
            }
        }
        return .success(addresses)
    }
}
