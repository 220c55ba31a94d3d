import AccmonProtocol

/// What the daemon pushes without a request: events, and on restore the handed-back state and its end marker.
enum Push: Sendable {
    case event(AccessoryEvent)
    case restore(RestoreState)
    case restored(UInt64)
    /// A claim changed on an accessory the subscription sees (a subscription with claims).
    case claimUpdate(ClaimUpdate)
}

extension ServerMessage {
    /// The request id a reply echoes.
    var requestID: RequestID? {
        switch self {
        case .hello(let id, _, _, _, _), .snapshot(let id, _), .list(let id, _), .status(let id, _), .ok(let id, _),
            .error(let id, _), .claim(let id, _), .claims(let id, _), .history(let id, _, _):
            id
        case .event, .shutdown, .restore, .restored, .claimNotice, .claimUpdate: nil
        }
    }
}
