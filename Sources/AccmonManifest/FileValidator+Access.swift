import AccmonJSON
import AccmonProtocol

extension FileValidator {
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
