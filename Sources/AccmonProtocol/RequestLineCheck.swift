import FoundationEssentials

/// What the JSONDecoder path checks of a request line before JSONDecoder reads it, for what JSONDecoder alone would
/// let through:
/// - **strict JSON** (RFC 8259): JSONDecoder also takes, in members it does not read, forms such as `[1,]`, `01`,
///   `1.` or `"\q"`;
/// - **no key twice in an object**, at any depth, keys compared after unescaping (`"a"` and `"\u0061"` are the same
///   key): JSONDecoder keeps the first, so the daemon and a program that keeps the last would read two requests;
/// - **integers written as integers** where the protocol takes one: JSONDecoder reads `1.0`, `1e2` and `1e-999999`
///   (as 0) as integers, yet refuses 2⁶³−1 written with an exponent. The scan notes the numbers with a fraction or an
///   exponent in the request object and in the objects and arrays directly in it, which is where the integer
///   fields are (``nonIntegerNumbers``).
///
/// It runs only on the lines ``RequestLineReader`` leaves to the JSONDecoder path (that reader refuses such lines
/// itself), so the requests clients usually send pay nothing for it. The scan keeps its nesting on the heap, not the
/// stack: a line may nest tens of thousands of levels.
struct RequestLineCheck {
    /// The first key found a second time in one object: its path (as in error messages, `filter.kind`) and the key.
    var duplicateKey: (path: String, key: String)?
    /// The paths (`id`, `versions.[1]`, `accessory.connectionID`) of the numbers at depth 1 and 2 written with a
    /// fraction or an exponent, as components: a key may hold a dot or a bracket (`"versions.[x"`), so a path written
    /// out as text would be ambiguous.
    var nonIntegerNumbers: Set<[Component]> = []

    /// Scans `line` (a byte-order mark first is skipped, as JSONDecoder does); `nil` when it is not strict JSON.
    static func scan(_ line: UnsafeBufferPointer<UInt8>) -> RequestLineCheck? {
        var scanner = Scanner(bytes: line)
        return scanner.scan()
    }

    /// A path as error messages write it: keys and `[index]` joined by dots.
    static func path(_ components: [Component]) -> String {
        components.map { component in
            switch component {
            case .key(let key): key
            case .index(let index): "[\(index)]"
            }
        }.joined(separator: ".")
    }

    enum Component: Hashable {
        case key(String)
        case index(Int)
    }
}

private struct Scanner {
    /// An object or array the position is in.
    enum Frame {
        case object(keys: Set<String>)
        case array(count: Int)
    }

    /// What comes next: a value, an object's key, or what follows a value.
    enum Expectation {
        case value, key, separator
    }

    let bytes: UnsafeBufferPointer<UInt8>
    var position = 0
    var frames: [Frame] = []
    /// The path to the value being read.
    var path: [RequestLineCheck.Component] = []
    var found = RequestLineCheck()

    init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    mutating func scan() -> RequestLineCheck? {
        if bytes.count >= 3, bytes[0] == 0xEF, bytes[1] == 0xBB, bytes[2] == 0xBF { position = 3 }
        var next = Expectation.value
        while true {
            skipWhitespace()
            switch next {
            case .value:
                guard let following = value() else { return nil }
                next = following
            case .key:
                guard let key = JSONTokenScanner.string(in: bytes, at: &position, escapes: .json) else { return nil }
                guard case .object(var keys) = frames.removeLast() else { return nil }
                if !keys.insert(key).inserted, found.duplicateKey == nil {
                    found.duplicateKey = (RequestLineCheck.path(path + [.key(key)]), key)
                }
                frames.append(.object(keys: keys))
                skipWhitespace()
                guard skip(UInt8(ascii: ":")) else { return nil }
                path.append(.key(key))
                next = .value
            case .separator:
                guard let frame = frames.last else { return position == bytes.count ? found : nil }
                path.removeLast()
                switch frame {
                case .object:
                    if skip(UInt8(ascii: ",")) {
                        next = .key
                    } else if skip(UInt8(ascii: "}")) {
                        frames.removeLast()
                    } else {
                        return nil
                    }
                case .array(let count):
                    if skip(UInt8(ascii: ",")) {
                        frames[frames.count - 1] = .array(count: count + 1)
                        path.append(.index(count + 1))
                        next = .value
                    } else if skip(UInt8(ascii: "]")) {
                        frames.removeLast()
                    } else {
                        return nil
                    }
                }
            }
        }
    }

    /// Reads a scalar, or opens an object or an array; returns what comes next, `nil` on a syntax error.
    private mutating func value() -> Expectation? {
        guard position < bytes.count else { return nil }
        switch bytes[position] {
        case UInt8(ascii: "{"):
            position += 1
            skipWhitespace()
            if skip(UInt8(ascii: "}")) { return .separator }
            frames.append(.object(keys: []))
            return .key
        case UInt8(ascii: "["):
            position += 1
            skipWhitespace()
            if skip(UInt8(ascii: "]")) { return .separator }
            frames.append(.array(count: 0))
            path.append(.index(0))
            return .value
        case UInt8(ascii: "\""):
            return JSONTokenScanner.string(in: bytes, at: &position, escapes: .json) == nil ? nil : .separator
        case UInt8(ascii: "t"): return literal("true") ? .separator : nil
        case UInt8(ascii: "f"): return literal("false") ? .separator : nil
        case UInt8(ascii: "n"): return literal("null") ? .separator : nil
        default:
            guard let isInteger = number() else { return nil }
            if !isInteger, (1...2).contains(path.count) {
                found.nonIntegerNumbers.insert(path)
            }
            return .separator
        }
    }

    /// A number as JSON writes one: `-`, an integer part without a leading zero, a fraction, an exponent. Returns
    /// whether it is written as an integer (neither a fraction nor an exponent); `nil` when it is not a number.
    private mutating func number() -> Bool? {
        _ = skip(UInt8(ascii: "-"))
        guard skip(UInt8(ascii: "0")) || skipDigits() else { return nil }
        var isInteger = true
        if skip(UInt8(ascii: ".")) {
            guard skipDigits() else { return nil }
            isInteger = false
        }
        if skip(UInt8(ascii: "e")) || skip(UInt8(ascii: "E")) {
            if !skip(UInt8(ascii: "+")) { _ = skip(UInt8(ascii: "-")) }
            guard skipDigits() else { return nil }
            isInteger = false
        }
        return isInteger
    }

    private mutating func skipDigits() -> Bool {
        let start = position
        while position < bytes.count, bytes[position] &- UInt8(ascii: "0") < 10 { position += 1 }
        return position > start
    }

    private mutating func skipWhitespace() {
        while position < bytes.count {
            switch bytes[position] {
            case 0x20, 0x09, 0x0A, 0x0D: position += 1
            default: return
            }
        }
    }

    private mutating func skip(_ byte: UInt8) -> Bool {
        guard position < bytes.count, bytes[position] == byte else { return false }
        position += 1
        return true
    }

    private mutating func literal(_ word: StaticString) -> Bool {
        let count = word.utf8CodeUnitCount
        guard bytes.count - position >= count else { return false }
        for offset in 0..<count where bytes[position + offset] != word.utf8Start[offset] { return false }
        position += count
        return true
    }
}

extension RequestLineCheck {
    static let integerExpected = "expected an integer, written without a fraction or an exponent"

    /// The path of a number the request reads as an integer that is written with a fraction or an exponent.
    func nonIntegerNumber(readBy request: ClientRequest) -> String? {
        guard !nonIntegerNumbers.isEmpty else { return nil }
        let found: [Component]?
        switch request {
        case .acknowledge: found = member("seq")
        case .simulateDisconnect, .release: found = member("connectionID")
        case .history: found = member("before") ?? member("limit")
        case .hello: found = firstElement(of: "versions")
        case .simulateConnect:
            found = Accessory.Field.allCases.lazy.filter { $0.shape == .number }
                .map { [Component.key("accessory"), .key($0.rawValue)] }.first { nonIntegerNumbers.contains($0) }
        case .claim: found = firstElement(of: "connections") ?? member("count")
        case .subscribe, .unsubscribe, .suspend, .resume, .list, .status, .reloadManifest, .claims: found = nil
        }
        return found.map(Self.path)
    }

    /// The path of the request object's member `key`, when it is a number written otherwise.
    private func member(_ key: String) -> [Component]? {
        nonIntegerNumbers.contains([.key(key)]) ? [.key(key)] : nil
    }

    /// The first element of the request object's array `key` that is a number written otherwise.
    private func firstElement(of key: String) -> [Component]? {
        let indices = nonIntegerNumbers.compactMap { path -> Int? in
            guard path.count == 2, path[0] == .key(key), case .index(let index) = path[1] else { return nil }
            return index
        }
        return indices.min().map { [.key(key), .index($0)] }
    }
}

extension ProtocolCodec {
    /// The failure for a line with a key twice in an object, or an `id` that is a number not written as an integer;
    /// `nil` when the check found neither.
    func refusal(by check: RequestLineCheck, _ data: Data) -> ClientDecodingFailure? {
        let idIsBad = check.nonIntegerNumbers.contains([.key("id")])
        if let (path, key) = check.duplicateKey {
            // The id is worth echoing when it is sound: neither the key sent twice nor a number written otherwise.
            // try?: an envelope that does not decode has no id to echo.
            let id = path == "id" || idIsBad ? nil : (try? decoder.decode(Envelope.self, from: data))?.id
            // An empty key in the request object has an empty path: the line is the object then.
            return ClientDecodingFailure(
                id: id,
                error: ProtocolError(.invalidField, "message: \(path.isEmpty ? "line" : path): duplicate key '\(key)'"))
        }
        guard idIsBad else { return nil }
        return ClientDecodingFailure(
            id: nil,
            error: ProtocolError(
                .invalidField, "message: id: expected a string or an integer, written without a fraction or an exponent"
            ))
    }
}
