/// One thing that happened to an accessory, as accmond's history keeps it: a connect, a disconnect, a connect the
/// manifest rejected (shown to admins only), or a claim's life (claim, release, contention, break).
///
/// On the wire (keys sorted, absent fields left out):
/// `{"accessory":{...},"actor":{...},"eventSeq":41,"holder":{...},"kind":"connect","reason":"...","seq":12,
/// "time":1796000000.123}`.
public struct HistoryEntry: Codable, Sendable, Hashable {
    /// What happened.
    public enum Kind: String, Codable, Sendable, Hashable, CaseIterable {
        /// The accessory connected, and the manifest admitted it.
        case connect
        /// The accessory disconnected.
        case disconnect
        /// The accessory connected, and the manifest rejected it (admins only); `reason` says why.
        case rejected
        /// Someone claimed (checked out) the accessory: `actor` is the claimer.
        case claim
        /// A claim ended: `holder` held it.
        case release
        /// Someone asked for an accessory another holds: `actor` asked, `holder` holds.
        case contention
        /// An admin broke someone's claim: `actor` is the admin, `holder` held it.
        case `break`
    }

    /// The history's own number: strictly increasing, kept across restarts of accmond.
    public var seq: UInt64
    /// When it was recorded: wall-clock seconds since the epoch.
    public var time: Double
    /// What happened.
    public var kind: Kind
    /// The accessory, as the viewer may see it (with the manifest's protocol strings).
    public var accessory: Accessory
    /// The `seq` of the event (connect, disconnect, rejected); `nil` for claim entries.
    public var eventSeq: UInt64?
    /// Who acted: the claimer, the admin who broke a claim.
    public var actor: Party?
    /// The claim's holder.
    public var holder: Party?
    /// A claim's or a break's reason, or why the manifest rejected the accessory.
    public var reason: String?

    /// Creates an entry.
    public init(
        seq: UInt64, time: Double, kind: Kind, accessory: Accessory, eventSeq: UInt64? = nil, actor: Party? = nil,
        holder: Party? = nil, reason: String? = nil
    ) {
        self.seq = seq
        self.time = time
        self.kind = kind
        self.accessory = accessory
        self.eventSeq = eventSeq
        self.actor = actor
        self.holder = holder
        self.reason = reason
    }
}

/// What a `history` request asks for: the newest ``limit`` entries recorded after ``since``, numbered below
/// ``before``, that pass ``filter``, oldest first.
public struct HistoryQuery: Sendable, Hashable {
    /// The default number of entries.
    public static let defaultLimit = 100
    /// The most entries one request may ask for.
    public static let maximumLimit = 10_000

    /// Only entries recorded after this time (seconds since the epoch); `nil` for all.
    public var since: Double?
    /// Only entries whose ``HistoryEntry/seq`` is below this; `nil` for all. A client pages back through a
    /// `truncated` reply by asking again with its oldest entry's `seq`.
    public var before: UInt64?
    /// At most this many entries, the newest (1 to ``maximumLimit``).
    public var limit: Int
    /// Only entries whose accessory passes this filter.
    public var filter: AccessoryFilter

    /// Creates a query.
    public init(
        since: Double? = nil, before: UInt64? = nil, limit: Int = defaultLimit, filter: AccessoryFilter = .all
    ) {
        self.since = since
        self.before = before
        self.limit = limit
        self.filter = filter
    }
}
