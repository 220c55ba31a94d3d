public import AccmonProtocol
import FoundationEssentials

/// The claim on one connection as its retained claim topic shows it (`<prefix>/<host>/claims/<accessoryID>/
/// <connectionID>`, docs/MQTT.md §12): the `claim` field of a claimed accessory object in the fleet view.
///
/// On the wire: `{"claimID":"c-3","holder":{...},"reason":"...","since":...,"state":"held","waiting":0}`, the fields
/// of the local `claim` field (``ClaimSummary``) that one connection's topic carries; the claim's other connections
/// and accessory ids are not in it.
public struct FleetClaim: Codable, Sendable, Hashable {
    public var claimID: String
    public var holder: Party
    /// When it was granted (wall clock, seconds since the epoch).
    public var since: Double
    public var reason: String
    /// Claim requests waiting in line for any of its accessories.
    public var waiting: Int
    /// `held`, or `returning` while an accessory it holds is away.
    public var state: String
    /// The id of the accessory whose connection it holds (not in the `claim` field: the accessory object has it).
    public var accessoryID = ""

    private enum CodingKeys: String, CodingKey { case claimID, holder, since, reason, waiting, state }

    public init(
        claimID: String, holder: Party, since: Double, reason: String, waiting: Int, state: String = "held",
        accessoryID: String = ""
    ) {
        self.claimID = claimID
        self.holder = holder
        self.since = since
        self.reason = reason
        self.waiting = waiting
        self.state = state
        self.accessoryID = accessoryID
    }

    public init(_ remote: RemoteClaimState) {
        self.init(
            claimID: remote.claimID, holder: remote.holder, since: remote.since, reason: remote.reason,
            waiting: remote.waiting, state: remote.state, accessoryID: remote.accessoryID)
    }

    /// The claim in a retained claim topic's payload, or `nil` when it is not one.
    static func decode(_ payload: [UInt8]) -> FleetClaim? {
        // try?: not a claim is nil, by contract.
        (try? JSONDecoder().decode(RemoteClaimState.self, from: Data(payload))).map(FleetClaim.init)
    }
}

/// An accessory object with its `claim` field (absent when it is free), as the fleet view prints it: the accessory's
/// own fields and `claim` in one JSON object.
public struct FleetAccessory: Encodable, Sendable, Hashable {
    public var accessory: Accessory
    public var claim: FleetClaim?

    private enum Keys: String, CodingKey { case claim }

    public init(_ accessory: Accessory, claim: FleetClaim?) {
        self.accessory = accessory
        self.claim = claim
    }

    public func encode(to encoder: any Encoder) throws {
        try accessory.encode(to: encoder)
        if let claim {
            var container = encoder.container(keyedBy: Keys.self)
            try container.encode(claim, forKey: .claim)
        }
    }
}
