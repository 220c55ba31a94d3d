/// A systemd template unit that accmond may start instances of: `accmon-NAME@.service`, NAME being 1 to 64 letters,
/// digits, `_` or `-`. accmond chooses every instance, always a number: a connection id (launch on connect) or a uid
/// (relaunch). The form is what the package's polkit rule lets accmond's user start and stop
/// (`packaging/accmon-launch.rules`: numeric instances of `accmon-*@.service`), so a manifest can never make accmond
/// start any other unit.
public struct LaunchTemplate: Sendable, Hashable, CustomStringConvertible {
    /// The template's name, such as `accmon-flasher@.service`.
    public let name: String

    static let prefix = "accmon-"
    static let suffix = "@.service"
    /// The most characters between the prefix and the suffix.
    public static let maximumNameLength = 64

    /// The template named `name`; `nil` when the name is not of the form (see ``problem(with:)``).
    public init?(_ name: String) {
        guard Self.problem(with: name) == nil else { return nil }
        self.name = name
    }

    /// Why `name` is not a template accmond may start, in words; `nil` when it is one.
    public static func problem(with name: String) -> String? {
        let form =
            "accmond starts only instances of templates named \(prefix)NAME\(suffix), NAME being 1 to "
            + "\(maximumNameLength) letters, digits, '_' or '-' (such as \"accmon-flasher@.service\")"
        guard name.hasPrefix(prefix), name.hasSuffix(suffix) else { return "not a template unit of this form: \(form)" }
        let middle = Array(name.utf8.dropFirst(prefix.utf8.count).dropLast(suffix.utf8.count))
        guard name.utf8.count >= prefix.utf8.count + suffix.utf8.count, !middle.isEmpty else {
            return "the template has no NAME: \(form)"
        }
        guard middle.count <= maximumNameLength else { return "NAME is longer than \(maximumNameLength): \(form)" }
        guard middle.allSatisfy(isNameByte) else { return "NAME has a character outside the form: \(form)" }
        return nil
    }

    /// The instance accmond starts for `number` (a connection id or a uid): `accmon-flasher@12.service`.
    public func instance(_ number: UInt64) -> String {
        String(name.dropLast(Self.suffix.utf8.count)) + "@\(number).service"
    }

    /// Whether `unit` is a numeric instance of a template of the form: what the polkit rule allows.
    public static func isInstanceName(_ unit: String) -> Bool {
        guard unit.hasPrefix(prefix), unit.hasSuffix(".service"), let at = unit.utf8.lastIndex(of: UInt8(ascii: "@"))
        else { return false }
        let name = Array(unit.utf8[unit.utf8.index(unit.utf8.startIndex, offsetBy: prefix.utf8.count)..<at])
        let number = Array(unit.utf8[unit.utf8.index(after: at)...].dropLast(".service".utf8.count))
        return !name.isEmpty && name.count <= maximumNameLength && name.allSatisfy(isNameByte) && !number.isEmpty
            && number.count <= 20 && number.allSatisfy { (0x30...0x39).contains($0) }
    }

    private static func isNameByte(_ byte: UInt8) -> Bool {
        FileValidator.isAlphanumeric(byte) || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
    }

    public var description: String { name }
}

/// What a manifest entry's `launch` says: start an instance of `unit` when an accessory the entry admits connects.
public struct LaunchSpec: Sendable, Hashable {
    /// The template; the instance is the connection id (`accmon-flasher@12.service`).
    public var unit: LaunchTemplate
    /// Whether the unit keeps running after the connection ends. A kept unit is started once per accessory: while
    /// the instance started for an earlier connection of the same accessory (same `accessoryID`) is active, a new
    /// connection starts nothing.
    public var keep: Bool

    public init(unit: LaunchTemplate, keep: Bool = false) {
        self.unit = unit
        self.keep = keep
    }
}

/// One element of the manifest's top-level `relaunch`: the users who may register `unit` in a `hello` (docs/
/// SESSIONS.md, "Relaunch"). accmond starts the instance named by the registering uid (`accmon-viewer@1000.service`)
/// and only when the loaded unit runs as that user (its `User=`).
public struct RelaunchPermission: Sendable, Hashable {
    public var unit: LaunchTemplate
    public var access: AccessList
    public var location: ManifestLocation

    public init(unit: LaunchTemplate, access: AccessList, location: ManifestLocation) {
        self.unit = unit
        self.access = access
        self.location = location
    }
}

extension Manifest {
    /// Whether the user (`uid`, with the groups `gids`) may register `template` for relaunch: some element of
    /// `relaunch` names it and its access list allows the user (root always).
    public func mayRegisterRelaunch(_ template: LaunchTemplate, uid: UInt32, gids: [UInt32], accounts: AccountIDs)
        -> Bool
    {
        relaunch.contains { $0.unit == template && $0.access.allows(uid: uid, gids: gids, accounts: accounts) }
    }
}
