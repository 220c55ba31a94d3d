import AccmonJSON
import AccmonProtocol

extension Manifest {
    /// The manifest as text, in the canonical layout: two-space indents, keys in the documented order, one match
    /// property per line, empty optional parts left out.
    ///
    /// Parsing the text gives back a manifest that formats to the same text (comments aside, which the value does
    /// not keep: pass them again as `header`).
    ///
    /// - Parameter header: lines of a comment put before the JSON, each written as `// line`.
    public func formatted(header: [String] = []) -> String {
        var out = ""
        for line in header.flatMap({ $0.split(separator: "\n", omittingEmptySubsequences: false) }) {
            out += line.isEmpty ? "//\n" : "// \(line)\n"
        }
        out += "{\n"
        out += "  \"version\": \(Manifest.formatVersion),\n"
        out += "  \"default\": \(jsonString(defaultAction.rawValue)),\n"
        if !admins.isEmpty { out += "  \"admins\": \(Self.format(admins)),\n" }
        if !bridges.isEmpty { out += "  \"bridges\": \(Self.format(bridges)),\n" }
        if !relaunch.isEmpty {
            out += "  \"relaunch\": [\n"
            out +=
                relaunch.map {
                    "    {\"unit\": \(jsonString($0.unit.name)), \"access\": \(Self.format($0.access))}"
                }.joined(separator: ",\n") + "\n"
            out += "  ],\n"
        }
        if entries.isEmpty {
            out += "  \"accessories\": []\n"
        } else {
            out += "  \"accessories\": [\n"
            out += entries.map(Self.format).joined(separator: ",\n") + "\n"
            out += "  ]\n"
        }
        out += "}\n"
        return out
    }

    static func format(_ entry: ManifestEntry) -> String {
        var lines = ["\"name\": \(jsonString(entry.name))"]
        if !entry.comment.isEmpty { lines.append("\"comment\": \(jsonString(entry.comment))") }
        let match = entry.match
        var parts: [(String, String)] = []
        if let kind = match.kind { parts.append(("kind", kind.rawValue)) }
        if let id = match.id { parts.append(("id", id.description)) }
        if let serial = match.serial { parts.append(("serial", serial.source)) }
        if let address = match.address { parts.append(("address", address)) }
        if let manufacturer = match.manufacturer { parts.append(("manufacturer", manufacturer.source)) }
        if let product = match.product { parts.append(("product", product.source)) }
        if let port = match.port { parts.append(("port", port.source)) }
        if let hash = match.descriptorsSHA256 { parts.append(("descriptorsSHA256", hash)) }
        lines.append(
            "\"match\": {\n"
                + parts.map { "        \(jsonString($0.0)): \(jsonString($0.1))" }.joined(separator: ",\n")
                + "\n      }")
        if !entry.protocols.isEmpty {
            lines.append("\"protocols\": [\(entry.protocols.map(jsonString).joined(separator: ", "))]")
        }
        if let access = entry.access { lines.append("\"access\": \(format(access))") }
        if let launch = entry.launch {
            lines.append(
                "\"launch\": {\"unit\": \(jsonString(launch.unit.name))" + (launch.keep ? ", \"keep\": true}" : "}"))
        }
        if let claim = entry.claim { lines.append("\"claim\": \(format(claim))") }
        return "    {\n" + lines.map { "      \($0)" }.joined(separator: ",\n") + "\n    }"
    }

    /// An entry's `claim` on one line, its defaults left out.
    static func format(_ claim: ClaimPolicy) -> String {
        var parts: [String] = []
        if let access = claim.access {
            // The access list's members, without its braces.
            parts.append(String(format(access).dropFirst().dropLast()))
        }
        if !claim.remote.isEmpty {
            let users = claim.remote.map { user in
                guard let local = claim.remoteAs[user] else { return jsonString(user) }
                let target: String
                switch local {
                case .name(let name): target = jsonString(name)
                case .id(let id): target = String(id)
                }
                return "{\"user\": \(jsonString(user)), \"as\": \(target)}"
            }
            parts.append("\"remote\": [\(users.joined(separator: ", "))]")
        }
        if claim.grant { parts.append("\"grant\": true") }
        if claim.returnSeconds != ClaimPolicy.defaultReturnSeconds {
            parts.append("\"returnSeconds\": \(formatSeconds(claim.returnSeconds))")
        }
        if let maxSeconds = claim.maxSeconds { parts.append("\"maxSeconds\": \(formatSeconds(maxSeconds))") }
        return "{" + parts.joined(separator: ", ") + "}"
    }

    private static func formatSeconds(_ seconds: Double) -> String {
        seconds == seconds.rounded() && abs(seconds) < 1e15 ? String(Int64(seconds)) : String(seconds)
    }

    static func format(_ list: AccessList) -> String {
        func principals(_ items: [Principal]) -> String {
            "["
                + items.map { principal in
                    switch principal {
                    case .name(let name): jsonString(name)
                    case .id(let id): String(id)
                    }
                }.joined(separator: ", ") + "]"
        }
        var parts: [String] = []
        if !list.users.isEmpty { parts.append("\"users\": \(principals(list.users))") }
        if !list.groups.isEmpty { parts.append("\"groups\": \(principals(list.groups))") }
        return "{" + parts.joined(separator: ", ") + "}"
    }
}

/// `text` as a JSON string literal; control characters escaped, everything else as is.
func jsonString(_ text: String) -> String {
    var out = "\""
    for scalar in text.unicodeScalars {
        switch scalar {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\n": out += "\\n"
        case "\r": out += "\\r"
        case "\t": out += "\\t"
        case _ where scalar.value < 0x20 || scalar.value == 0x7F: out += "\\u\(Hex.uppercase(scalar.value, digits: 4))"
        default: out.unicodeScalars.append(scalar)
        }
    }
    return out + "\""
}

/// Builds a manifest that allows exactly the given accessories, as `usbguard generate-policy` does: each is pinned
/// by kind and ids, then by serial number (for Bluetooth: address) when it has one, else by USB port, and by its
/// descriptor hash when asked.
public enum ManifestGenerator {
    /// A generated manifest and what the admin should know about it.
    public struct Output: Sendable, Hashable {
        /// The manifest.
        public var manifest: Manifest
        /// Notes for stderr: accessories pinned loosely, hashes missing, duplicates left out.
        public var notes: [String]
        /// The header comment of ``text``.
        public var header: [String]

        /// The manifest as text, with its header comment.
        public var text: String { manifest.formatted(header: header) }
    }

    /// The header comment of a generated manifest.
    public static func header(count: Int) -> [String] {
        [
            "Generated by `accmon manifest generate`: allows exactly the \(count) "
                + (count == 1 ? "accessory" : "accessories") + " connected when it ran.",
            "Review it, then install it as \(Manifest.defaultPath) or as a drop-in in "
                + "\(Manifest.defaultDropInDirectory)/; check it with `accmon manifest check FILE`.",
        ]
    }

    /// Generates entries for `accessories`, in order.
    ///
    /// - Parameters:
    ///   - accessories: the accessories connected now (from `list`).
    ///   - pinDescriptorHashes: also pin ``Accessory/descriptorsSHA256`` (USB and serial accessories that have one).
    public static func generate(from accessories: [Accessory], pinDescriptorHashes: Bool) -> Output {
        var entries: [ManifestEntry] = []
        var notes: [String] = []
        var names: Set<String> = []
        for accessory in accessories {
            let label =
                "\(accessory.kind.rawValue) \(shown(accessory.usbID)) "
                + (accessory.name.isEmpty ? "(no name)" : "\"\(shown(accessory.name))\"")
            var match = ManifestMatch(kind: accessory.kind)
            if let vendor = Hex.usbID(accessory.vendorID),
                let product = Hex.usbID(accessory.productID)
            {
                match.id = USBIDPattern(vendor: vendor, product: product)
            }
            if accessory.kind == .bluetoothHID, FileValidator.isBluetoothAddress(accessory.serialNumber) {
                match.address = accessory.serialNumber.lowercased()
            } else if !accessory.serialNumber.isEmpty {
                match.serial = literal(accessory.serialNumber)
            } else if accessory.kind != .bluetoothHID, FileValidator.isPortPath(accessory.portPath) {
                match.port = literal(accessory.portPath)
            } else if !accessory.name.isEmpty {
                match.product = literal(accessory.name)
                notes.append("\(label): no serial number and no USB port: matched by kind, id and product name only")
            } else {
                notes.append("\(label): no serial number, USB port or name: matched by kind and id only")
            }
            if pinDescriptorHashes && accessory.kind != .bluetoothHID {
                let hash = accessory.descriptorsSHA256
                if hash.utf8.count == 64, hash.utf8.allSatisfy(Hex.isDigit) {
                    match.descriptorsSHA256 = hash.lowercased()
                } else {
                    notes.append("\(label): the daemon reports no descriptor hash: not pinned")
                }
            }
            if let earlier = entries.first(where: { match.isCovered(by: $0.match) }) {
                notes.append("\(label): already allowed by the entry '\(earlier.name)': left out")
                continue
            }
            var protocols: [String] = []
            for text in accessory.protocolStrings where isProtocolString(text) && !protocols.contains(text) {
                protocols.append(text)
            }
            let name = uniqueName(for: accessory, taken: names)
            names.insert(name)
            let comment = [accessory.manufacturer, accessory.name].filter { !$0.isEmpty }.joined(separator: " ")
            entries.append(ManifestEntry(name: name, comment: comment, match: match, protocols: protocols))
        }
        return Output(
            manifest: Manifest(entries: entries), notes: notes, header: header(count: accessories.count))
    }

    static func literal(_ text: String) -> GlobPattern {
        // An escaped text always compiles.
        try! GlobPattern(GlobPattern.escaping(text))
    }

    static func isProtocolString(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 255
            && !text.unicodeScalars.contains { $0.value <= 0x20 || $0.value == 0x7F }
    }

    /// `kind-product-name`, lowercased, other characters as `-`; `-2`, `-3`... when taken.
    static func uniqueName(for accessory: Accessory, taken: Set<String>) -> String {
        var slug = ""
        for byte in accessory.name.lowercased().utf8 {
            if FileValidator.isAlphanumeric(byte) {
                slug.unicodeScalars.append(UnicodeScalar(byte))
            } else if !slug.isEmpty && !slug.hasSuffix("-") {
                slug += "-"
            }
        }
        while slug.hasSuffix("-") { slug.removeLast() }
        if slug.isEmpty {
            slug = [accessory.vendorID, accessory.productID].filter { !$0.isEmpty }.joined(separator: "-").lowercased()
            slug = String(
                slug.unicodeScalars.filter { $0.isASCII && FileValidator.isAlphanumeric(UInt8($0.value)) || $0 == "-" })
        }
        var base = accessory.kind.rawValue + (slug.isEmpty ? "" : "-" + slug)
        base = String(base.prefix(56))
        while base.hasSuffix("-") { base.removeLast() }
        var name = base
        var number = 2
        while taken.contains(name) {
            name = "\(base)-\(number)"
            number += 1
        }
        return name
    }
}
