import AccmonJSON
import AccmonProtocol

extension FileValidator {
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
}
