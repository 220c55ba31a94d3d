import AccmonJSON
import AccmonProtocol
/// Turns manifest files into a ``Manifest``: parses each with ``PositionedJSON`` and validates the value tree, so that
/// every problem, syntax or semantic, has a position. Every problem is collected; a syntax error ends the checks of
/// its file only.
enum ManifestValidator {
    static func parse(_ files: [ManifestFile]) -> Result<Manifest, ManifestProblems> {
        var problems: [ManifestProblem] = []
        var manifest = Manifest(files: files.map(\.path))
        var names: [String: ManifestLocation] = [:]
        for file in files {
            var validator = FileValidator(path: file.path)
            let outcome = validator.validate(file.contents)
            var fileProblems = validator.problems
            manifest.admins = manifest.admins.union(outcome.admins ?? AccessList())
            for candidate in outcome.entries {
                if let name = candidate.name {
                    let location = ManifestLocation(file: file.path, position: candidate.namePosition)
                    if let first = names[name] {
                        fileProblems.append(
                            ManifestProblem(
                                .duplicateName, file: file.path, position: candidate.namePosition,
                                reason: "entry '\(name)': name: '\(name)' is already the name of the entry at \(first)")
                        )
                        continue
                    }
                    names[name] = location
                }
                guard let entry = candidate.entry else { continue }
                if let earlier = manifest.entries.first(where: { entry.match.isCovered(by: $0.match) }) {
                    fileProblems.append(
                        ManifestProblem(
                            .unreachableEntry, file: file.path, position: entry.location.position,
                            reason: "entry '\(entry.name)': can never match: the entry '\(earlier.name)' "
                                + "(\(earlier.location)) comes first and matches everything it matches; the first "
                                + "match wins, so move '\(entry.name)' above it or narrow '\(earlier.name)'"))
                    continue
                }
                manifest.entries.append(entry)
            }
            // Stable: problems at one position keep the order they were found in.
            problems += fileProblems.enumerated().sorted {
                ($0.element.position, $0.offset) < ($1.element.position, $1.offset)
            }
            .map(\.element)
        }
        return problems.isEmpty ? .success(manifest) : .failure(ManifestProblems(problems))
    }
}

/// An entry as far as it could be validated: its name (for duplicate checks) even when the rest is wrong.
struct EntryCandidate {
    var name: String?
    var namePosition: SourcePosition
    var entry: ManifestEntry?
}

/// Validates one file's value tree, collecting problems.
struct FileValidator {
    let path: String
    var problems: [ManifestProblem] = []

    init(path: String) { self.path = path }

    struct Outcome {
        var entries: [EntryCandidate] = []
        var admins: AccessList?
    }

    static let topKeys = ["version", "default", "admins", "accessories"]
    static let entryKeys = ["name", "comment", "match", "protocols", "access"]
    static let matchKeys = ["kind", "id", "serial", "manufacturer", "product", "port", "descriptorsSHA256", "address"]
    static let accessKeys = ["users", "groups"]

    mutating func report(_ code: ManifestProblem.Code, _ position: SourcePosition, _ reason: String) {
        problems.append(ManifestProblem(code, file: path, position: position, reason: reason))
    }

    mutating func validate(_ contents: [UInt8]) -> Outcome {
        var outcome = Outcome()
        let root: PositionedJSON
        switch PositionedJSON.parse(contents) {
        case .success(let value): root = value
        case .failure(let error):
            report(.syntax, error.position, error.reason)
            return outcome
        }
        guard case .object = root.value else {
            report(
                .wrongType, root.position,
                "the manifest must be a JSON object, such as {\"version\": 1, \"accessories\": [...]}; found "
                    + root.typeDescription)
            return outcome
        }
        // The version first: the rest of a file in another version is not checked against this one.
        guard case .object(let pairs) = root.value, validateVersion(pairs.first { $0.key == "version" }, root),
            let members = members(of: root, "manifest", Self.topKeys)
        else { return outcome }
        if let member = members["default"], let text = string(member.value, "default") {
            if Manifest.DefaultAction(rawValue: text) == nil {
                report(
                    .invalidValue, member.value.position,
                    "default: '\(shown(text))' is not supported: an accessory that matches no entry is rejected "
                        + "(write \"reject\" or remove the key)")
            }
        }
        if let member = members["admins"] {
            outcome.admins = accessList(
                member.value, "admins", emptyHint: "remove \"admins\" to leave admin operations to root")
        }
        if let member = members["accessories"] {
            guard case .array(let elements) = member.value.value else {
                report(
                    .wrongType, member.value.position,
                    "accessories: expected an array of entries, found \(member.value.typeDescription)")
                return outcome
            }
            for (index, element) in elements.enumerated() {
                outcome.entries.append(entry(element, index: index))
            }
        }
        return outcome
    }

    /// Checks `version`; returns false when the rest of the file must not be checked (a version from elsewhere).
    mutating func validateVersion(_ member: PositionedJSON.Member?, _ root: PositionedJSON) -> Bool {
        guard let member else {
            report(
                .missingKey, root.position,
                "manifest: missing key 'version': add \"version\": \(Manifest.formatVersion)")
            return true
        }
        switch member.value.value {
        case .number(let text) where text == String(Manifest.formatVersion):
            return true
        case .number(let text):
            report(
                .unsupportedVersion, member.value.position,
                "version: \(text) is not supported: this accmon reads version \(Manifest.formatVersion)")
            return false
        case .string(let text) where text == String(Manifest.formatVersion):
            report(.wrongType, member.value.position, "version: write the number \(text), not the string \"\(text)\"")
            return true
        default:
            report(
                .wrongType, member.value.position,
                "version: expected the number \(Manifest.formatVersion), found \(member.value.typeDescription)")
            return true
        }
    }

    // MARK: Entries

    mutating func entry(_ node: PositionedJSON, index: Int) -> EntryCandidate {
        var candidate = EntryCandidate(name: nil, namePosition: node.position, entry: nil)
        var label = "entry #\(index + 1)"
        if case .object(let pairs) = node.value, let name = pairs.first(where: { $0.key == "name" }),
            case .string(let text) = name.value.value
        {
            label = "entry '\(shown(text))'"
        }
        guard case .object = node.value else {
            report(
                .wrongType, node.position,
                "\(label): expected an entry object ({\"name\": ..., \"match\": {...}}), found \(node.typeDescription)")
            return candidate
        }
        let before = problems.count
        guard let members = members(of: node, label, Self.entryKeys) else { return candidate }
        var name = ""
        if let member = members["name"] {
            if let text = string(member.value, "\(label): name") {
                if Self.isValidEntryName(text) {
                    name = text
                    candidate.name = text
                    candidate.namePosition = member.value.position
                } else {
                    report(
                        .invalidValue, member.value.position,
                        "\(label): name: '\(shown(text))' is not a valid name: use 1 to 64 letters, digits, "
                            + "'.', '_' or '-', "
                            + "starting with a letter or a digit")
                }
            }
        } else {
            report(.missingKey, node.position, "\(label): missing key 'name'")
        }
        var comment = ""
        if let member = members["comment"], let text = string(member.value, "\(label): comment") { comment = text }
        var match: ManifestMatch?
        if let member = members["match"] {
            match = self.match(member.value, "\(label): match")
        } else {
            report(.missingKey, node.position, "\(label): missing key 'match' (what accessories the entry allows)")
        }
        var protocols: [String] = []
        if let member = members["protocols"] { protocols = self.protocols(member.value, "\(label): protocols") }
        var access: AccessList?
        if let member = members["access"] {
            access = accessList(
                member.value, "\(label): access",
                emptyHint:
                    "remove \"access\" for the default (members of the \(AccessList.defaultGroup) group and root)")
        }
        if problems.count == before, let match {
            candidate.entry = ManifestEntry(
                name: name, comment: comment, match: match, protocols: protocols, access: access,
                location: ManifestLocation(file: path, position: node.position))
        }
        return candidate
    }

    static func isValidEntryName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard (1...64).contains(bytes.count), isAlphanumeric(bytes[0]) else { return false }
        return bytes.allSatisfy {
            isAlphanumeric($0) || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "-")
        }
    }

    static func isAlphanumeric(_ byte: UInt8) -> Bool {
        (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
    }

    // MARK: Match

    mutating func match(_ node: PositionedJSON, _ context: String) -> ManifestMatch? {
        guard let members = members(of: node, context, Self.matchKeys) else { return nil }
        let before = problems.count
        guard !members.isEmpty else {
            report(
                .empty, node.position,
                "\(context): is empty: name at least one property; to allow every accessory, write \"id\": \"*:*\"")
            return nil
        }
        var match = ManifestMatch()
        if let member = members["kind"], let text = string(member.value, "\(context).kind") {
            if let kind = AccessoryKind(rawValue: text) {
                match.kind = kind
            } else {
                let kinds = AccessoryKind.allCases.map(\.rawValue)
                report(
                    .invalidValue, member.value.position,
                    "\(context).kind: '\(shown(text))' is not a kind\(suggestion(text, kinds)) (kinds: "
                        + "\(kinds.joined(separator: ", ")))"
                )
            }
        }
        if let member = members["id"], let text = string(member.value, "\(context).id") {
            match.id = usbID(text, member.value, "\(context).id")
        }
        match.serial = glob(members["serial"], "\(context).serial")
        match.manufacturer = glob(members["manufacturer"], "\(context).manufacturer")
        match.product = glob(members["product"], "\(context).product")
        if let port = glob(members["port"], "\(context).port") {
            if let literal = port.literalValue, !Self.isPortPath(literal) {
                report(
                    .invalidValue, members["port"]!.value.position,
                    "\(context).port: '\(shown(literal))' is not a USB port path such as \"1-1.2\" "
                        + "(bus-port, then .port for "
                        + "each hub)")
            } else if port.source.unicodeScalars.contains(where: { !"0123456789.-*?[]!^\\".unicodeScalars.contains($0) }
            ) {
                report(
                    .invalidValue, members["port"]!.value.position,
                    "\(context).port: '\(shown(port.source))' is not a USB port path pattern: use digits, '.', '-' and "
                        + "wildcards, such as \"1-1.*\"")
            } else {
                match.port = port
            }
        }
        if let member = members["descriptorsSHA256"], let text = string(member.value, "\(context).descriptorsSHA256") {
            let bytes = Array(text.utf8)
            if let bad = bytes.firstIndex(where: { !Hex.isDigit($0) }) {
                report(
                    .invalidValue,
                    member.value.position(ofCharacter: text.unicodeScalars.count(before: bad, in: bytes)),
                    "\(context).descriptorsSHA256: '\(shown(text))' is not a SHA-256 in hex (64 hex digits, "
                        + "as sha256sum prints)"
                )
            } else if bytes.count != 64 {
                report(
                    .invalidValue, member.value.position,
                    "\(context).descriptorsSHA256: has \(bytes.count) hex digits; a SHA-256 has 64 (as "
                        + "sha256sum prints)"
                )
            } else {
                match.descriptorsSHA256 = text.lowercased()
            }
        }
        if let member = members["address"], let text = string(member.value, "\(context).address") {
            if Self.isBluetoothAddress(text) {
                match.address = text.lowercased()
            } else {
                report(
                    .invalidValue, member.value.position,
                    "\(context).address: '\(shown(text))' is not a Bluetooth address such as \"28:37:37:1a:2b:3c\"")
            }
        }
        // Parts that cannot hold together.
        if let kind = match.kind, kind != .bluetoothHID, let member = members["address"], match.address != nil {
            report(
                .conflict, member.keyPosition,
                "\(context): address: only bluetooth-hid accessories have an address, and kind is '\(kind.rawValue)'")
        }
        for key in ["port", "descriptorsSHA256"] {
            guard let member = members[key] else { continue }
            if match.kind == .bluetoothHID {
                report(
                    .conflict, member.keyPosition,
                    "\(context): \(key): a bluetooth-hid accessory has no USB \(key == "port" ? "port" : "descriptors")"
                )
            } else if match.kind == nil, match.address != nil {
                report(
                    .conflict, member.keyPosition,
                    "\(context): \(key): cannot be combined with address (a Bluetooth accessory has no USB "
                        + "\(key == "port" ? "port" : "descriptors"))")
            }
        }
        return problems.count == before ? match : nil
    }

    mutating func usbID(_ text: String, _ node: PositionedJSON, _ context: String) -> USBIDPattern? {
        let halves = text.split(separator: ":", omittingEmptySubsequences: false)
        guard halves.count == 2 else {
            report(
                .invalidValue, node.position,
                "\(context): '\(shown(text))' is not vendor:product, such as \"0403:6001\", \"0403:*\" or \"*:*\"")
            return nil
        }
        var ids: [String?] = []
        var offset = 0
        for (half, what) in zip(halves, ["vendor", "product"]) {
            if half == "*" {
                ids.append(nil)
            } else if half.utf8.count == 4, half.utf8.allSatisfy(Hex.isDigit) {
                ids.append(half.lowercased())
            } else {
                let hint = half.contains("*") ? " (a wildcard is a whole '*', not part of an id)" : ""
                report(
                    .invalidValue, node.position(ofCharacter: offset),
                    "\(context): the \(what) id '\(shown(String(half)))' must be 4 hex digits or '*'\(hint), "
                        + "such as \"0403:6001\""
                )
                return nil
            }
            offset += half.unicodeScalars.count + 1
        }
        return USBIDPattern(vendor: ids[0], product: ids[1])
    }

    mutating func glob(_ member: PositionedJSON.Member?, _ context: String) -> GlobPattern? {
        guard let member, let text = string(member.value, context) else { return nil }
        guard !text.isEmpty else {
            report(.empty, member.value.position, "\(context): is empty; remove the key to match any value")
            return nil
        }
        do {
            return try GlobPattern(text)
        } catch {
            report(
                .invalidValue, member.value.position(ofCharacter: error.offset),
                "\(context): bad pattern '\(shown(text))': \(error.reason)")
            return nil
        }
    }

    static func isPortPath(_ text: String) -> Bool {
        let parts = text.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2, isNumber(parts[0]) else { return false }
        return parts[1].split(separator: ".", omittingEmptySubsequences: false).allSatisfy(isNumber)
    }

    static func isNumber(_ text: Substring) -> Bool {
        !text.isEmpty && text.utf8.count <= 3 && text.utf8.allSatisfy { (0x30...0x39).contains($0) }
    }

    static func isBluetoothAddress(_ text: String) -> Bool {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        return parts.count == 6 && parts.allSatisfy { $0.utf8.count == 2 && $0.utf8.allSatisfy(Hex.isDigit) }
    }

    // MARK: Protocols and access

    mutating func protocols(_ node: PositionedJSON, _ context: String) -> [String] {
        guard case .array(let elements) = node.value else {
            report(.wrongType, node.position, "\(context): expected an array of strings, found \(node.typeDescription)")
            return []
        }
        var seen: [String: SourcePosition] = [:]
        var result: [String] = []
        for element in elements {
            guard let text = string(element, "\(context)") else { continue }
            if text.isEmpty || text.utf8.count > 255
                || text.unicodeScalars.contains(where: { $0.value <= 0x20 || $0.value == 0x7F })
            {
                report(
                    .invalidValue, element.position,
                    "\(context): '\(shown(text))' is not a protocol string: use 1 to 255 characters without "
                        + "spaces, such as "
                        + "\"com.example.protocol\"")
                continue
            }
            if let first = seen[text] {
                report(
                    .invalidValue, element.position, "\(context): '\(shown(text))' is listed twice (first at \(first))")
                continue
            }
            seen[text] = element.position
            result.append(text)
        }
        return result
    }

    mutating func accessList(_ node: PositionedJSON, _ context: String, emptyHint: String) -> AccessList? {
        guard let members = members(of: node, context, Self.accessKeys) else { return nil }
        let before = problems.count
        guard !members.isEmpty else {
            report(.empty, node.position, "\(context): names no user or group; \(emptyHint)")
            return nil
        }
        var list = AccessList()
        for (key, what) in [("users", "user"), ("groups", "group")] {
            guard let member = members[key] else { continue }
            let field = "\(context).\(key)"
            guard case .array(let elements) = member.value.value else {
                report(
                    .wrongType, member.value.position,
                    "\(field): expected an array of \(what) names or ids, found \(member.value.typeDescription)")
                continue
            }
            guard !elements.isEmpty else {
                report(
                    .empty, member.value.position,
                    "\(field): the list is empty: name at least one \(what), or remove the key")
                continue
            }
            var principals: [Principal] = []
            for element in elements {
                guard let principal = principal(element, field, what) else { continue }
                if principals.contains(principal) {
                    report(
                        .invalidValue, element.position, "\(field): '\(shown(principal.description))' is listed twice")
                    continue
                }
                principals.append(principal)
            }
            if key == "users" { list.users = principals } else { list.groups = principals }
        }
        return problems.count == before ? list : nil
    }

    mutating func principal(_ node: PositionedJSON, _ context: String, _ what: String) -> Principal? {
        switch node.value {
        case .string(let name):
            if !name.isEmpty, name.utf8.allSatisfy({ (0x30...0x39).contains($0) }) {
                report(
                    .invalidValue, node.position,
                    "\(context): '\(shown(name))' looks like a numeric id: write it as a number (\(name)) or "
                        + "use the name"
                )
                return nil
            }
            guard Self.isValidAccountName(name) else {
                report(
                    .invalidValue, node.position,
                    "\(context): '\(shown(name))' is not a valid \(what) name (1 to 32 letters, digits, '_', "
                        + "'.' or '-', "
                        + "not starting with '-')")
                return nil
            }
            return .name(name)
        case .number(let text):
            guard text.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let id = UInt32(text), id != UInt32.max else {
                report(
                    .invalidValue, node.position,
                    "\(context): \(text) is not a valid \(what) id (an integer from 0 to 4294967294)")
                return nil
            }
            return .id(id)
        default:
            report(
                .wrongType, node.position, "\(context): expected a \(what) name or id, found \(node.typeDescription)")
            return nil
        }
    }

    static func isValidAccountName(_ name: String) -> Bool {
        var bytes = Array(name.utf8)
        if bytes.last == UInt8(ascii: "$") { bytes.removeLast() }  // Samba machine accounts.
        guard (1...32).contains(bytes.count), bytes[0] != UInt8(ascii: "-") else { return false }
        return bytes.allSatisfy {
            isAlphanumeric($0) || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "-")
        }
    }

    // MARK: Helpers

    /// The members of an object by key, after reporting unknown and duplicate keys (the first of duplicates is
    /// kept); `nil`, reported, when `node` is not an object.
    mutating func members(
        of node: PositionedJSON, _ context: String, _ known: [String]
    )
        -> [String: PositionedJSON.Member]?
    {
        guard case .object(let pairs) = node.value else {
            report(.wrongType, node.position, "\(context): expected an object, found \(node.typeDescription)")
            return nil
        }
        var result: [String: PositionedJSON.Member] = [:]
        for pair in pairs {
            if let first = result[pair.key] {
                report(
                    .duplicateKey, pair.keyPosition,
                    "\(context): key '\(shown(pair.key))' appears twice (first at \(first.keyPosition)); keep one")
                continue
            }
            guard known.contains(pair.key) else {
                let hint = suggestion(pair.key, known)
                report(
                    .unknownKey, pair.keyPosition,
                    "\(context): unknown key '\(shown(pair.key))'"
                        + (hint.isEmpty ? " (known keys: \(known.joined(separator: ", ")))" : hint))
                continue
            }
            result[pair.key] = pair
        }
        return result
    }

    /// The string in `node`; `nil`, reported, for another type.
    mutating func string(_ node: PositionedJSON, _ context: String) -> String? {
        if case .string(let text) = node.value { return text }
        report(.wrongType, node.position, "\(context): expected a string, found \(node.typeDescription)")
        return nil
    }

    /// ` (did you mean 'x'?)` when a candidate is close to `word` (same letters in another case, or at most two
    /// edits away); empty otherwise.
    func suggestion(_ word: String, _ candidates: [String]) -> String {
        var best: (candidate: String, distance: Int)?
        for candidate in candidates {
            let (mine, theirs) = (word.lowercased(), candidate.lowercased())
            let distance =
                mine == theirs
                ? 0
                : mine.count >= 3 && theirs.hasPrefix(mine)
                    ? 1
                    : editDistance(Array(mine.unicodeScalars), Array(theirs.unicodeScalars))
            if distance <= 2, distance < (best?.distance ?? .max) { best = (candidate, distance) }
        }
        return best.map { " (did you mean '\($0.candidate)'?)" } ?? ""
    }
}

/// The Levenshtein distance between two short sequences.
func editDistance(_ a: [Unicode.Scalar], _ b: [Unicode.Scalar]) -> Int {
    if a.isEmpty { return b.count }
    if b.isEmpty { return a.count }
    var previous = Array(0...b.count)
    var current = Array(repeating: 0, count: b.count + 1)
    for i in 1...a.count {
        current[0] = i
        for j in 1...b.count {
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
        }
        swap(&previous, &current)
    }
    return previous[b.count]
}

extension String.UnicodeScalarView {
    /// The number of scalars that start before byte `offset` of `bytes` (the UTF-8 of this text).
    func count(before offset: Int, in bytes: [UInt8]) -> Int {
        bytes[..<offset].reduce(0) { $0 + ($1 & 0xC0 == 0x80 ? 0 : 1) }
    }
}
