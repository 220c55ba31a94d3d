// libFuzzer target for the manifest: bytes → PositionedJSON → Manifest.parse → formatted, and the glob matcher.
// Built and run by scripts/fuzz.sh (`make fuzz`), against the AccmonJSON and AccmonManifest modules.
//
// The input is split at 0x1E (record separator) into up to four manifest files. Besides "does not crash", it checks,
// and traps on a violation:
// - JSON: a syntax error's position lies inside the file; the positions of a parsed tree increase strictly in
//   document order; whatever Foundation's JSONDecoder accepts, the parser accepts too (up to its nesting limit, and
//   except where it is stricter on purpose: see `deliberatelyStricter`) and reads as the same value;
// - problems: each is one line `file:line:column: reason` inside its file, in file order and then position order;
// - a valid manifest formats to text that parses back to the same manifest and formats the same again;
// - `isCovered(by:)` is sound: an accessory built to match an entry that another covers matches that other too; and
//   authentication agrees with the first matching entry;
// - the glob matcher agrees with glibc's fnmatch(3) on ASCII patterns it accepts.

@testable import AccmonJSON  // firstInvalidUTF8Offset
@testable import AccmonManifest  // GlobPattern.tokens
import AccmonProtocol
import FoundationEssentials
import Glibc

private let separator: UInt8 = 0x1E

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    let parts = input.split(separator: separator, maxSplits: 3, omittingEmptySubsequences: false).map(Array.init)
    for part in parts { checkJSON(part) }
    let files = parts.enumerated().map { ManifestFile(path: "f\($0.offset).json", contents: $0.element) }
    checkManifest(files)
    checkGlobs(input)
    return 0
}

// MARK: JSON

private func checkJSON(_ bytes: [UInt8]) {
    let end = endPosition(bytes)
    switch PositionedJSON.parse(bytes) {
    case .failure(let error):
        guard error.position.line >= 1, error.position.column >= 1, error.position <= end else {
            violated("syntax error at \(error.position), past the end \(end): \(error.reason)", bytes)
        }
        guard !error.reason.isEmpty, !error.reason.unicodeScalars.contains(where: isControl) else {
            violated("syntax error reason is empty or has a control character: \(error.reason.debugDescription)", bytes)
        }
        if let decoded = foundationValue(bytes), depth(decoded) <= PositionedJSON.maximumDepth,
            !deliberatelyStricter.contains(where: error.reason.contains), !hasRepeatedKey(bytes)
        {
            violated("JSONDecoder accepts what the parser refuses (\(error)): \(decoded)", bytes)
        }
    case .success(let value):
        var last: SourcePosition?
        func visit(_ position: SourcePosition) {
            if let last, !(last < position) { violated("positions do not increase: \(last) then \(position)", bytes) }
            if position > end { violated("position \(position) past the end \(end)", bytes) }
            last = position
        }
        func walk(_ node: PositionedJSON) {
            visit(node.position)
            switch node.value {
            case .array(let elements): elements.forEach(walk)
            case .object(let members):
                for member in members {
                    visit(member.keyPosition)
                    walk(member.value)
                }
            default: break
            }
        }
        walk(value)
        if let decoded = foundationValue(bytes), !same(value, decoded) {
            violated("the parser and JSONDecoder read different values: \(decoded)", bytes)
        }
    }
}

/// Refusals the decoder does not share: where the parser is stricter on purpose (RFC 8259 forbids these; the decoder
/// lets them through): leading zeros ("0403" unquoted), raw control characters in strings, unpaired surrogate
/// escapes; and errors inside a string the decoder never reads.
private let deliberatelyStricter = [
    "leading zeros", "control character", "surrogate", "invalid escape", "must be followed by 4 hex digits",
    "not closed before the end of the line",
]

/// Whether an object of `bytes` has a key twice (compared as written). JSONDecoder keeps a repeated key's first value
/// and skips the others without checking their numbers (`{"a":1,"a":46.}` and `{"a":1,"a":1-}` decode as `["a": 1]`,
/// `{"a":46.}` is refused), so its acceptance says nothing of a document with a repeated key. A tolerant scan: the
/// input may be one the parser refuses; anything between the structural characters and strings is one token.
private func hasRepeatedKey(_ bytes: [UInt8]) -> Bool {
    var objects: [(keys: Set<ArraySlice<UInt8>>, expectingKey: Bool)?] = []  // nil for an array
    var index = bytes.startIndex
    while index < bytes.endIndex {
        let byte = bytes[index]
        switch byte {
        case UInt8(ascii: "{"): objects.append((keys: [], expectingKey: true))
        case UInt8(ascii: "["): objects.append(nil)
        case UInt8(ascii: "}"), UInt8(ascii: "]"): _ = objects.popLast()
        case UInt8(ascii: ","):
            if let top = objects.last, var object = top {
                object.expectingKey = true
                objects[objects.count - 1] = object
            }
        case UInt8(ascii: "\""):
            var end = index + 1
            while end < bytes.endIndex, bytes[end] != UInt8(ascii: "\"") {
                end += bytes[end] == UInt8(ascii: "\\") ? 2 : 1
            }
            if let top = objects.last, var object = top, object.expectingKey {
                let key = bytes[(index + 1)..<min(end, bytes.endIndex)]
                if !object.keys.insert(key).inserted { return true }
                object.expectingKey = false
                objects[objects.count - 1] = object
            }
            index = end
        default: break
        }
        index += 1
    }
    return false
}

/// The position just past the last character.
private func endPosition(_ bytes: [UInt8]) -> SourcePosition {
    var position = SourcePosition.start
    let body = bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? bytes.dropFirst(3) : bytes[...]
    for byte in body {
        if byte == 0x0A {
            position = SourcePosition(line: position.line + 1, column: 1)
        } else if byte & 0xC0 != 0x80 {
            position.column += 1
        }
    }
    return position
}

/// Any JSON value, as Foundation decodes it.
private indirect enum AnyJSON: Decodable, CustomStringConvertible {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([AnyJSON])
    case object([String: AnyJSON])

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {  // try?: not a boolean, try the next type
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {  // try?: not a number
            self = .number(value)
        } else if let value = try? container.decode(String.self) {  // try?: not a string
            self = .string(value)
        } else if let value = try? container.decode([AnyJSON].self) {  // try?: not an array
            self = .array(value)
        } else {
            self = .object(try container.decode([String: AnyJSON].self))
        }
    }

    var description: String {
        switch self {
        case .null: "null"
        case .bool(let value): "\(value)"
        case .number(let value): "\(value)"
        case .string(let value): value.debugDescription
        case .array(let values): "[\(values.map(\.description).joined(separator: ","))]"
        case .object(let members):
            "{\(members.map { "\($0.key.debugDescription):\($0.value)" }.joined(separator: ","))}"
        }
    }
}

private let decoder = JSONDecoder()

/// What Foundation's JSONDecoder reads from UTF-8 input without a byte-order mark or NUL; `nil` when it refuses.
private func foundationValue(_ bytes: [UInt8]) -> AnyJSON? {
    // The decoder stops at a NUL byte as if the text ended there: such input is not compared.
    guard !bytes.starts(with: [0xEF, 0xBB, 0xBF]), !bytes.contains(0), firstInvalidUTF8Offset(bytes) == nil,
        bytes.count < 2048
    else {
        return nil
    }
    return try? decoder.decode(AnyJSON.self, from: Data(bytes))  // try?: refused input is not compared
}

private func depth(_ value: AnyJSON) -> Int {
    switch value {
    case .array(let values): 1 + (values.map(depth).max() ?? 0)
    case .object(let members): 1 + (members.values.map(depth).max() ?? 0)
    default: 0
    }
}

/// Whether the two readings agree; objects with duplicate keys are not compared (Foundation keeps one).
private func same(_ ours: PositionedJSON, _ theirs: AnyJSON) -> Bool {
    switch (ours.value, theirs) {
    case (.null, .null): return true
    case (.bool(let a), .bool(let b)): return a == b
    case (.number(let text), .number(let b)):
        guard let a = Double(text) else { return false }
        return a == b || (a.isNaN && b.isNaN)
    case (.string(let a), .string(let b)): return a == b
    case (.array(let a), .array(let b)): return a.count == b.count && zip(a, b).allSatisfy { same($0, $1) }
    case (.object(let members), .object(let b)):
        let keys = members.map(\.key)
        if Set(keys).count != keys.count { return true }
        return keys.count == b.count
            && members.allSatisfy { member in b[member.key].map { same(member.value, $0) } ?? false }
    default: return false
    }
}

// MARK: Manifests

private func checkManifest(_ files: [ManifestFile]) {
    let all = files.flatMap { $0.contents + [separator] }
    switch Manifest.parse(files: files) {
    case .failure(let problems):
        guard !problems.isEmpty else { violated("failure without problems", all) }
        var previous: (file: Int, position: SourcePosition)?
        for problem in problems {
            guard let index = files.firstIndex(where: { $0.path == problem.file }) else {
                violated("problem in an unknown file: \(problem)", all)
            }
            guard problem.line >= 1, problem.column >= 1, problem.position <= endPosition(files[index].contents) else {
                violated("problem outside its file: \(problem)", all)
            }
            guard !problem.reason.isEmpty, !problem.reason.unicodeScalars.contains(where: isControl),
                problem.description == "\(problem.file):\(problem.line):\(problem.column): \(problem.reason)"
            else {
                violated(
                    "problem is not one line file:line:column: reason: \(problem.description.debugDescription)", all)
            }
            if let previous, (previous.file, previous.position) > (index, problem.position) {
                violated("problems out of order at \(problem)", all)
            }
            previous = (index, problem.position)
        }
    case .success(let manifest):
        let text = manifest.formatted(header: ["fuzz"])
        guard
            case .success(let again) = Manifest.parse(files: [
                ManifestFile(path: "again.json", contents: Array(text.utf8))
            ])
        else {
            violated("the formatted manifest does not parse:\n\(text)", all)
        }
        guard again.formatted(header: ["fuzz"]) == text else { violated("formatting is not stable:\n\(text)", all) }
        guard again.entries.map(\.name) == manifest.entries.map(\.name),
            again.entries.map(\.match) == manifest.entries.map(\.match),
            again.entries.map(\.protocols) == manifest.entries.map(\.protocols),
            again.entries.map(\.access) == manifest.entries.map(\.access),
            again.entries.map(\.comment) == manifest.entries.map(\.comment), again.admins == manifest.admins
        else {
            violated("the formatted manifest reads differently:\n\(text)", all)
        }
        checkCoverageAndAuthentication(manifest, all)
    }
}

private func checkCoverageAndAuthentication(_ manifest: Manifest, _ input: [UInt8]) {
    let entries = manifest.entries.prefix(16)
    for entry in entries {
        let (accessory, hash) = sample(entry.match)
        let first = manifest.firstMatch(for: accessory, descriptorsSHA256: hash)
        let result = manifest.authenticate(accessory, descriptorsSHA256: hash)
        switch (result, first) {
        case (.allowed(let name, let protocols, let access), let first?):
            guard name == first.name, protocols == first.protocols, access == first.effectiveAccess else {
                violated("authentication disagrees with the first match '\(first.name)': \(result)", input)
            }
        case (.rejected(let reason), nil):
            guard reason.contains("closest is '") else {
                violated("a rejection without the closest entry: \(reason)", input)
            }
        default:
            violated("authentication \(result) disagrees with the first match \(first?.name ?? "none")", input)
        }
        guard entry.match.matches(accessory, descriptorsSHA256: hash) else { continue }
        for other in entries where entry.match.isCovered(by: other.match) {
            guard other.match.matches(accessory, descriptorsSHA256: hash) else {
                violated("'\(entry.name)' is covered by '\(other.name)', which does not match \(accessory)", input)
            }
        }
    }
}

/// An accessory (and descriptor hash) built to match `match`: each pattern instantiated with a text it matches.
private func sample(_ match: ManifestMatch) -> (Accessory, String) {
    var accessory = Accessory(kind: match.kind ?? (match.address != nil ? .bluetoothHID : .usb))
    accessory.vendorID = match.id?.vendor ?? "0000"
    accessory.productID = match.id?.product ?? "0000"
    accessory.serialNumber = match.address ?? match.serial.map(instance) ?? ""
    accessory.manufacturer = match.manufacturer.map(instance) ?? ""
    accessory.name = match.product.map(instance) ?? ""
    accessory.portPath = match.port.map(instance) ?? ""
    return (accessory, match.descriptorsSHA256 ?? "")
}

/// A text the pattern matches (when it can find one): `*` empty, `?` and sets their first fitting character.
private func instance(_ pattern: GlobPattern) -> String {
    var text = String.UnicodeScalarView()
    for token in pattern.tokens {
        switch token {
        case .literal(let scalar): text.append(scalar)
        case .anyCharacter: text.append("x")
        case .anyText: break
        case .set(let set):
            let candidates = set.ranges.map(\.lowerBound) + [0x78, 0x30, 0x2D, 0x41]
            if let value = candidates.first(where: { Unicode.Scalar($0).map(set.contains) ?? false }),
                let scalar = Unicode.Scalar(value)
            {
                text.append(scalar)
            }
        }
    }
    return String(text)
}

// MARK: Globs

private func checkGlobs(_ input: [UInt8]) {
    let lines = input.split(separator: 0x0A, omittingEmptySubsequences: false).prefix(5)
    guard let first = lines.first, first.count <= 24, first.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else { return }
    let source = String(decoding: first, as: UTF8.self)
    guard let pattern = try? GlobPattern(source) else { return }  // try?: malformed patterns are not compared
    for line in lines.dropFirst() where line.count <= 24 && line.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) {
        let text = String(decoding: line, as: UTF8.self)
        let expected = fnmatch(source, text, 0) == 0
        guard pattern.matches(text) == expected else {
            violated("glob \"\(source)\" on \"\(text)\": \(!expected), fnmatch says \(expected)", input)
        }
        guard let literal = try? GlobPattern(GlobPattern.escaping(text)), literal.literalValue == text,
            literal.matches(text)
        else {
            violated("escaping \"\(text)\" does not give a literal pattern", input)
        }
    }
}

private func violated(_ message: String, _ input: [UInt8]) -> Never {
    let text = String(decoding: input.prefix(400), as: UTF8.self)
    // -O drops preconditionFailure's message: write it first.
    let report = Array("invariant violated: \(message)\ninput: \(text.debugDescription)\n".utf8)
    _ = report.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
    preconditionFailure("invariant violated")
}
