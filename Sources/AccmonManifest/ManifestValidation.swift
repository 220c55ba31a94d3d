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
            manifest.relaunch += outcome.relaunch
            manifest.bridges = manifest.bridges.union(outcome.bridges ?? AccessList())
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
        var relaunch: [RelaunchPermission] = []
        var bridges: AccessList?
    }

    static let topKeys = ["version", "default", "admins", "accessories", "relaunch", "bridges"]
    static let entryKeys = ["name", "comment", "match", "protocols", "access", "launch", "claim"]
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
        if let member = members["relaunch"] { outcome.relaunch = relaunch(member.value) }
        if let member = members["bridges"] {
            outcome.bridges = accessList(
                member.value, "bridges",
                emptyHint: "name the MQTT bridge's user (such as {\"users\": [\"accmon-mqtt\"]}), or remove the key")
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
        var launch: LaunchSpec?
        if let member = members["launch"] { launch = self.launch(member.value, "\(label): launch") }
        var claim: ClaimPolicy?
        if let member = members["claim"] { claim = self.claim(member.value, "\(label): claim") }
        if problems.count == before, let match {
            candidate.entry = ManifestEntry(
                name: name, comment: comment, match: match, protocols: protocols, access: access, launch: launch,
                claim: claim, location: ManifestLocation(file: path, position: node.position))
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
