import AccmonJSON
import AccmonProtocol

/// The admin-written allow-list that authenticates accessories: which ones are announced, with which protocol
/// strings, to which users. The format is in docs/MANIFEST.md.
///
/// A manifest is parsed and validated from files the caller has read (``parse(files:)``), merged in the order given:
/// by convention the main file, then the drop-ins in name order (``orderedDropIns(_:)``). A manifest is a value:
/// to reload, parse the new files and swap the value only when parsing succeeded, so that a bad edit never replaces
/// a good manifest.
///
/// Authentication is first match: the entries are tried in order (files in the order given, entries in file order)
/// and the first whose `match` holds wins. ``parse(files:)`` refuses an entry that an earlier entry hides entirely,
/// so no entry is dead.
public struct Manifest: Sendable, Hashable {
    /// The format version this code reads and writes.
    public static let formatVersion = 1
    /// Where the main file is installed.
    public static let defaultPath = "/etc/accmon/manifest.json"
    /// Where drop-ins are installed; files ending in `.json` are read in name order after the main file.
    public static let defaultDropInDirectory = "/etc/accmon/manifest.d"

    /// The entries, in the order they are tried.
    public var entries: [ManifestEntry]
    /// Who may do admin operations besides root: the union of every file's `admins`. Empty: root only.
    public var admins: AccessList
    /// What happens to an accessory that matches no entry.
    public var defaultAction: DefaultAction
    /// The files the manifest was read from, in order.
    public var files: [String]
    /// Which users may register which templates for relaunch (the top-level `relaunch`, joined across files).
    public var relaunch: [RelaunchPermission]
    /// The local users who may claim in the name of remote (MQTT) users: the bridges' users (the top-level
    /// `bridges`, joined across files). Empty: nobody may.
    public var bridges: AccessList

    /// Creates a manifest.
    public init(
        entries: [ManifestEntry] = [], admins: AccessList = AccessList(), defaultAction: DefaultAction = .reject,
        files: [String] = [], relaunch: [RelaunchPermission] = [], bridges: AccessList = AccessList()
    ) {
        self.entries = entries
        self.admins = admins
        self.defaultAction = defaultAction
        self.files = files
        self.relaunch = relaunch
        self.bridges = bridges
    }

    /// The manifest with no entry: every accessory is rejected, only root is admin. Use it when no manifest is
    /// installed.
    public static let empty = Manifest()

    /// What to do with an accessory that matches no entry.
    public enum DefaultAction: String, Sendable, Hashable, CaseIterable {
        /// Never announce it.
        case reject
    }

    /// Parses, validates and merges manifest files.
    ///
    /// - Parameter files: the files' paths (used in problems and locations) and contents, in merge order.
    /// - Returns: the manifest, or every problem found, sorted by file (in the order given) and position.
    ///   (`Result` needs an `Error`, so the list is wrapped in ``ManifestProblems``, a collection.)
    public static func parse(files: [ManifestFile]) -> Result<Manifest, ManifestProblems> {
        ManifestValidator.parse(files)
    }

    /// Parses, validates and merges manifest files given as `(path, bytes)` pairs; see ``Manifest/parse(files:)``.
    public static func parse(files: [(path: String, bytes: [UInt8])]) -> Result<Manifest, ManifestProblems> {
        parse(files: files.map { ManifestFile(path: $0.path, contents: $0.bytes) })
    }

    /// The drop-in files to read, in merge order, from the names in the drop-in directory: names ending in `.json`
    /// that do not start with `.`, sorted by their UTF-8 bytes (as `LC_ALL=C ls`: `10-lab.json` before
    /// `9-late.json`; number them with leading zeros).
    public static func orderedDropIns(_ names: [String]) -> [String] {
        names.filter { $0.hasSuffix(".json") && !$0.hasPrefix(".") && $0.utf8.count > 5 }
            .sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    }

    /// Decides whether `accessory` is authenticated, and if so with which protocols and for whom.
    ///
    /// - Parameters:
    ///   - accessory: the accessory as classified.
    ///   - descriptorsSHA256: the SHA-256 of its USB descriptors in hex, when the caller computed it apart from
    ///     the accessory; `nil` uses ``Accessory/descriptorsSHA256``. An entry that pins a hash never matches an
    ///     accessory whose hash is unknown (empty).
    /// - Returns: the first matching entry's name, protocols and access list, or the reason for the rejection,
    ///   naming the entry that came closest.
    public func authenticate(_ accessory: Accessory, descriptorsSHA256: String? = nil) -> Authentication {
        let hash = descriptorsSHA256 ?? accessory.descriptorsSHA256
        if let entry = firstMatch(for: accessory, descriptorsSHA256: hash) {
            return .allowed(entryName: entry.name, protocols: entry.protocols, access: entry.effectiveAccess)
        }
        guard !entries.isEmpty else {
            return .rejected(reason: "the manifest has no entries (the default for an unmatched accessory is reject)")
        }
        // The closest entry: the fewest fields that differ, the first in order among equals.
        var closest: (entry: ManifestEntry, mismatches: [String])?
        for entry in entries {
            let mismatches = entry.match.mismatches(accessory, descriptorsSHA256: hash)
            if closest == nil || mismatches.count < closest!.mismatches.count { closest = (entry, mismatches) }
        }
        let (entry, mismatches) = closest!
        return .rejected(
            reason: "no manifest entry matches (default: reject); the closest is '\(entry.name)' at \(entry.location), "
                + "where \(mismatches.joined(separator: ", "))")
    }

    /// The entry that authenticates `accessory`: the first that matches; `nil` when none does.
    public func firstMatch(for accessory: Accessory, descriptorsSHA256: String? = nil) -> ManifestEntry? {
        let hash = descriptorsSHA256 ?? accessory.descriptorsSHA256
        return entries.first { $0.match.matches(accessory, descriptorsSHA256: hash) }
    }

    /// The entry named `name`.
    public func entry(named name: String) -> ManifestEntry? {
        indexOfEntry(named: name).map { entries[$0] }
    }

    /// The unit the entry named `name` launches, if it names one: asked for every accessory that connects, so it
    /// reads the one field instead of copying the whole entry.
    public func launch(ofEntry name: String) -> LaunchSpec? {
        indexOfEntry(named: name).flatMap { entries[$0].launch }
    }

    private func indexOfEntry(named name: String) -> Int? {
        entries.indices.first { entries[$0].name == name }
    }

    /// Whether a user may do admin operations: root always; others when `admins` lists them or one of their groups.
    /// Names in the list count through `accounts` (see ``AccessList/allows(uid:gids:accounts:)``).
    public func isAdmin(uid: UInt32, gids: [UInt32], accounts: AccountIDs) -> Bool {
        admins.allows(uid: uid, gids: gids, accounts: accounts)
    }

    /// Whether a local user may claim in a remote user's name: the top-level `bridges` names the user or a group of
    /// theirs (root too, as in every list, once `bridges` names anyone). Without `bridges`, nobody may.
    public func isBridge(uid: UInt32, gids: [UInt32], accounts: AccountIDs) -> Bool {
        !bridges.isEmpty && bridges.allows(uid: uid, gids: gids, accounts: accounts)
    }

    /// Every user and group name the manifest's access lists and admins mention (the default group included, which
    /// entries without `access` use): what ``AccountIDs`` must resolve.
    public var accountNames: (users: Set<String>, groups: Set<String>) {
        var users: Set<String> = []
        var groups: Set<String> = []
        let claimLists =
            entries.compactMap { $0.claim?.access }
            + entries.compactMap { $0.claim.map { AccessList(users: Array($0.remoteAs.values)) } }
        for list in [admins, bridges] + entries.map(\.effectiveAccess) + claimLists + relaunch.map(\.access) {
            for case .name(let name) in list.users { users.insert(name) }
            for case .name(let name) in list.groups { groups.insert(name) }
        }
        return (users, groups)
    }
}

/// One file of a manifest, as read by the caller.
public struct ManifestFile: Sendable, Hashable {
    /// The path, as shown in problems and locations.
    public var path: String
    /// The bytes of the file.
    public var contents: [UInt8]

    public init(path: String, contents: [UInt8]) {
        self.path = path
        self.contents = contents
    }
}

/// Where something is in a manifest: file and position.
public struct ManifestLocation: Sendable, Hashable, CustomStringConvertible {
    public var file: String
    public var position: SourcePosition

    public init(file: String, position: SourcePosition) {
        self.file = file
        self.position = position
    }

    /// `file:line:column`.
    public var description: String { "\(file):\(position.line):\(position.column)" }
}

/// The outcome of ``Manifest/authenticate(_:descriptorsSHA256:)``.
public enum Authentication: Sendable, Hashable {
    /// The accessory matches the entry `entryName`: announce it with `protocols` as its protocol strings, to the
    /// users `access` allows.
    case allowed(entryName: String, protocols: [String], access: AccessList)
    /// No entry matches: do not announce the accessory. `reason` is for the log.
    case rejected(reason: String)

    /// Whether the accessory is authenticated.
    public var isAllowed: Bool {
        if case .allowed = self { true } else { false }
    }
}

/// One entry of a manifest: which accessories it authenticates, their protocols and who may see them.
public struct ManifestEntry: Sendable, Hashable {
    /// The entry's name, unique in the manifest.
    public var name: String
    /// A free-text note (the JSON key `comment`), empty when absent.
    public var comment: String
    /// Which accessories it authenticates.
    public var match: ManifestMatch
    /// The protocol strings an accessory it authenticates speaks, delivered to clients as its `protocolStrings`.
    public var protocols: [String]
    /// Who may see the accessory; `nil` when the entry has no `access`, which means ``AccessList/defaultAccess``.
    public var access: AccessList?
    /// The systemd unit accmond starts when an accessory the entry admits connects; `nil` for none.
    public var launch: LaunchSpec?
    /// Who may claim the entry's accessories and how claims behave; `nil` for the defaults (``ClaimPolicy/default``).
    public var claim: ClaimPolicy?
    /// Where the entry starts.
    public var location: ManifestLocation

    public init(
        name: String, comment: String = "", match: ManifestMatch, protocols: [String] = [], access: AccessList? = nil,
        launch: LaunchSpec? = nil, claim: ClaimPolicy? = nil,
        location: ManifestLocation = ManifestLocation(file: "", position: .start)
    ) {
        self.name = name
        self.comment = comment
        self.match = match
        self.protocols = protocols
        self.access = access
        self.launch = launch
        self.claim = claim
        self.location = location
    }

    /// The access list that applies: ``access``, or the default.
    public var effectiveAccess: AccessList { access ?? .defaultAccess }

    /// The claim policy that applies: ``claim``, or the default.
    public var effectiveClaim: ClaimPolicy { claim ?? .default }
}

/// A `vendor:product` pattern: each half is four hex digits or `*`.
public struct USBIDPattern: Sendable, Hashable, CustomStringConvertible {
    /// Four lowercase hex digits; `nil` for `*`.
    public var vendor: String?
    /// Four lowercase hex digits; `nil` for `*`.
    public var product: String?

    public init(vendor: String?, product: String?) {
        self.vendor = vendor?.lowercased()
        self.product = product?.lowercased()
    }

    /// Whether the accessory's ids match (hex compares without regard to case).
    public func matches(vendorID: String, productID: String) -> Bool {
        (vendor == nil || vendor == vendorID.lowercased()) && (product == nil || product == productID.lowercased())
    }

    /// `0403:6001`, `0403:*`, `*:*`.
    public var description: String { "\(vendor ?? "*"):\(product ?? "*")" }
}

/// What a manifest entry requires of an accessory; every part is optional and every set part must hold.
public struct ManifestMatch: Sendable, Hashable {
    /// The accessory's kind.
    public var kind: AccessoryKind?
    /// Vendor and product ids.
    public var id: USBIDPattern?
    /// The serial number, a ``GlobPattern`` (a text without wildcards is an exact match).
    public var serial: GlobPattern?
    /// The manufacturer name.
    public var manufacturer: GlobPattern?
    /// The product name (``Accessory/name``).
    public var product: GlobPattern?
    /// The USB port path, such as `1-1.2`.
    public var port: GlobPattern?
    /// The SHA-256 of the USB descriptors: 64 lowercase hex digits.
    public var descriptorsSHA256: String?
    /// A Bluetooth device address, `aa:bb:cc:dd:ee:ff` in lowercase; only `bluetooth-hid` accessories have one
    /// (udev's `HID_UNIQ`, which accmond reports as the serial number).
    public var address: String?

    public init(
        kind: AccessoryKind? = nil, id: USBIDPattern? = nil, serial: GlobPattern? = nil,
        manufacturer: GlobPattern? = nil, product: GlobPattern? = nil, port: GlobPattern? = nil,
        descriptorsSHA256: String? = nil, address: String? = nil
    ) {
        self.kind = kind
        self.id = id
        self.serial = serial
        self.manufacturer = manufacturer
        self.product = product
        self.port = port
        self.descriptorsSHA256 = descriptorsSHA256?.lowercased()
        self.address = address?.lowercased()
    }

    /// Whether `accessory` satisfies every set part; `descriptorsSHA256` is its descriptor hash (empty: unknown).
    public func matches(_ accessory: Accessory, descriptorsSHA256 hash: String) -> Bool {
        if let kind, accessory.kind != kind { return false }
        if let id, !id.matches(vendorID: accessory.vendorID, productID: accessory.productID) { return false }
        if let serial, !serial.matches(accessory.serialNumber) { return false }
        if let manufacturer, !manufacturer.matches(accessory.manufacturer) { return false }
        if let product, !product.matches(accessory.name) { return false }
        if let port, !port.matches(accessory.portPath) { return false }
        if let descriptorsSHA256, hash.lowercased() != descriptorsSHA256 { return false }
        if let address, accessory.kind != .bluetoothHID || accessory.serialNumber.lowercased() != address {
            return false
        }
        return true
    }

    /// Every part `accessory` fails, in words (empty when it matches).
    public func mismatches(_ accessory: Accessory, descriptorsSHA256 hash: String) -> [String] {
        var found: [String] = []
        func quoted(_ text: String) -> String { text.isEmpty ? "none" : "\"\(shown(text))\"" }
        if let kind, accessory.kind != kind { found.append("kind is \(accessory.kind.rawValue), not \(kind.rawValue)") }
        if let id, !id.matches(vendorID: accessory.vendorID, productID: accessory.productID) {
            found.append("id \(accessory.usbID) is not \(id)")
        }
        if let serial, !serial.matches(accessory.serialNumber) {
            found.append("serial \(quoted(accessory.serialNumber)) does not match \"\(shown(serial.source))\"")
        }
        if let manufacturer, !manufacturer.matches(accessory.manufacturer) {
            found.append(
                "manufacturer \(quoted(accessory.manufacturer)) does not match \"\(shown(manufacturer.source))\"")
        }
        if let product, !product.matches(accessory.name) {
            found.append("product \(quoted(accessory.name)) does not match \"\(shown(product.source))\"")
        }
        if let port, !port.matches(accessory.portPath) {
            found.append("port \(quoted(accessory.portPath)) does not match \"\(shown(port.source))\"")
        }
        if let descriptorsSHA256, hash.lowercased() != descriptorsSHA256 {
            found.append(hash.isEmpty ? "the descriptor hash is unknown" : "the descriptor hash differs")
        }
        if let address {
            if accessory.kind != .bluetoothHID {
                found.append("an address needs a bluetooth-hid accessory")
            } else if accessory.serialNumber.lowercased() != address {
                found.append("address \(quoted(accessory.serialNumber)) is not \(address)")
            }
        }
        return found
    }

    /// Whether every accessory this match accepts is also accepted by `other`: `other` sets no part that this one
    /// does not pin at least as tightly. Conservative: `false` when it cannot tell (two different wildcards).
    public func isCovered(by other: ManifestMatch) -> Bool {
        func covered(_ mine: GlobPattern?, _ theirs: GlobPattern?) -> Bool {
            guard let theirs, !theirs.matchesEverything else { return true }
            guard let mine else { return false }
            if mine.source == theirs.source { return true }
            if let literal = mine.literalValue { return theirs.matches(literal) }
            return false
        }
        func coveredHalf(_ mine: String?, _ theirs: String?) -> Bool {
            theirs == nil || mine == theirs
        }
        // An address implies bluetooth-hid.
        let myKind = kind ?? (address != nil ? .bluetoothHID : nil)
        if let theirKind = other.kind, theirKind != myKind { return false }
        if let theirID = other.id, theirID.vendor != nil || theirID.product != nil {
            guard let id, coveredHalf(id.vendor, theirID.vendor), coveredHalf(id.product, theirID.product) else {
                return false
            }
        }
        if let theirHash = other.descriptorsSHA256, theirHash != descriptorsSHA256 { return false }
        if let theirAddress = other.address, theirAddress != address { return false }
        return covered(serial, other.serial) && covered(manufacturer, other.manufacturer)
            && covered(product, other.product) && covered(port, other.port)
    }
}
