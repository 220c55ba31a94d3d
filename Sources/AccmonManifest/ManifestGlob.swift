import AccmonJSON
import AccmonProtocol

/// A shell-style wildcard pattern, as `fnmatch(3)` with no flags: `*`, `?`, `[...]` and `\` escapes.
///
/// - `*` matches any text, the empty text included; `?` matches one character.
/// - `[abc]`, `[a-z0-9]` match one character of the set; `[!...]` or `[^...]` one character not in it. A `]` right
///   after `[` (or `[!`) and a `-` first or last are members; `\` escapes inside brackets too.
/// - `\` makes the next character literal: `\*` matches a star.
/// - Everything else matches itself, case-sensitively. `/` and a leading `.` are not special.
///
/// Characters are Unicode scalars, so `?` matches `é` whatever the locale. Unlike `fnmatch`, a malformed pattern (an
/// unclosed `[`, a trailing `\`, an empty range such as `[z-a]`, a class such as `[:digit:]`) is refused when it is
/// created instead of being read in some other way, so that a manifest never silently means something else.
public struct GlobPattern: Sendable, Hashable, CustomStringConvertible {
    /// The pattern as written.
    public let source: String
    let tokens: [Token]

    enum Token: Sendable, Hashable {
        case literal(Unicode.Scalar)
        case anyCharacter
        case anyText
        case set(CharacterSet)
    }

    struct CharacterSet: Sendable, Hashable {
        var negated: Bool
        var ranges: [ClosedRange<UInt32>]

        func contains(_ scalar: Unicode.Scalar) -> Bool {
            ranges.contains { $0.contains(scalar.value) } != negated
        }
    }

    /// Compiles `source`.
    /// - Throws: ``GlobSyntaxError`` with the offset (in characters) of what is wrong.
    public init(_ source: String) throws(GlobSyntaxError) {
        self.source = source
        let scalars = Array(source.unicodeScalars)
        var tokens: [Token] = []
        var index = 0
        while index < scalars.count {
            let scalar = scalars[index]
            switch scalar {
            case "*":
                if tokens.last != .anyText { tokens.append(.anyText) }  // ** is *.
                index += 1
            case "?":
                tokens.append(.anyCharacter)
                index += 1
            case "\\":
                guard index + 1 < scalars.count else {
                    throw GlobSyntaxError(
                        offset: index, reason: "a trailing '\\' escapes nothing (write '\\\\' for a backslash)")
                }
                tokens.append(.literal(scalars[index + 1]))
                index += 2
            case "[":
                let (set, end) = try Self.parseSet(scalars, at: index)
                tokens.append(.set(set))
                index = end
            default:
                tokens.append(.literal(scalar))
                index += 1
            }
        }
        self.tokens = tokens
    }

    /// Parses `[...]` starting at `start`; returns the set and the index after its `]`.
    private static func parseSet(
        _ scalars: [Unicode.Scalar], at start: Int
    ) throws(GlobSyntaxError)
        -> (CharacterSet, Int)
    {
        var index = start + 1
        var set = CharacterSet(negated: false, ranges: [])
        if index < scalars.count, scalars[index] == "!" || scalars[index] == "^" {
            set.negated = true
            index += 1
        }
        let firstMember = index
        func unclosed() -> GlobSyntaxError {
            GlobSyntaxError(offset: start, reason: "'[' is not closed with ']' (write '\\[' for a bracket)")
        }
        /// Reads one member character (escaped or not); returns it and the index after it.
        func member(_ at: Int) throws(GlobSyntaxError) -> (Unicode.Scalar, Int) {
            guard at < scalars.count else { throw unclosed() }
            if scalars[at] == "\\" {
                guard at + 1 < scalars.count else { throw unclosed() }
                return (scalars[at + 1], at + 2)
            }
            if scalars[at] == "[", at + 1 < scalars.count, [":", ".", "="].contains(scalars[at + 1]) {
                throw GlobSyntaxError(
                    offset: at, reason: "classes such as [:digit:] are not supported (write the range, such as [0-9])")
            }
            return (scalars[at], at + 1)
        }
        while true {
            guard index < scalars.count else { throw unclosed() }
            if scalars[index] == "]" && index != firstMember {
                return (set, index + 1)
            }
            let memberStart = index
            let (low, afterLow) = try member(index)
            index = afterLow
            if index + 1 < scalars.count, scalars[index] == "-", scalars[index + 1] != "]" {
                let (high, afterHigh) = try member(index + 1)
                guard low.value <= high.value else {
                    throw GlobSyntaxError(
                        offset: memberStart, reason: "the range '\(low)-\(high)' is empty (its start is after its end)")
                }
                set.ranges.append(low.value...high.value)
                index = afterHigh
            } else {
                set.ranges.append(low.value...low.value)
            }
        }
    }

    /// Whether `text` matches the whole pattern.
    ///
    /// Linear backtracking on the last `*` only: O(pattern × text) at worst, never exponential.
    public func matches(_ text: String) -> Bool {
        let text = Array(text.unicodeScalars)
        var pattern = 0
        var position = 0
        var lastStar: Int?
        var resumeAt = 0
        while position < text.count {
            if pattern < tokens.count {
                switch tokens[pattern] {
                case .anyText:
                    lastStar = pattern
                    resumeAt = position
                    pattern += 1
                    continue
                case .anyCharacter:
                    pattern += 1
                    position += 1
                    continue
                case .literal(let scalar) where scalar == text[position]:
                    pattern += 1
                    position += 1
                    continue
                case .set(let set) where set.contains(text[position]):
                    pattern += 1
                    position += 1
                    continue
                default:
                    break
                }
            }
            guard let star = lastStar else { return false }
            pattern = star + 1
            resumeAt += 1
            position = resumeAt
        }
        while pattern < tokens.count, tokens[pattern] == .anyText { pattern += 1 }
        return pattern == tokens.count
    }

    /// Whether the pattern has no wildcard: it matches exactly one text, ``literalValue``.
    public var isLiteral: Bool {
        tokens.allSatisfy { if case .literal = $0 { true } else { false } }
    }

    /// The one text a wildcard-free pattern matches (escapes removed); `nil` for a pattern with wildcards.
    public var literalValue: String? {
        var text = String.UnicodeScalarView()
        for token in tokens {
            guard case .literal(let scalar) = token else { return nil }
            text.append(scalar)
        }
        return String(text)
    }

    /// Whether the pattern matches any text at all (it is `*`).
    public var matchesEverything: Bool { tokens == [.anyText] }

    /// A pattern that matches exactly `literal`: `*`, `?`, `[` and `\` are escaped.
    public static func escaping(_ literal: String) -> String {
        var escaped = String.UnicodeScalarView()
        for scalar in literal.unicodeScalars {
            if scalar == "*" || scalar == "?" || scalar == "[" || scalar == "\\" { escaped.append("\\") }
            escaped.append(scalar)
        }
        return String(escaped)
    }

    public var description: String { source }
}

/// A malformed wildcard pattern: what is wrong and at which character.
public struct GlobSyntaxError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The offset of the offending character in the pattern, counted in Unicode scalars from 0.
    public var offset: Int
    /// What is wrong.
    public var reason: String

    public init(offset: Int, reason: String) {
        self.offset = offset
        self.reason = reason
    }

    public var description: String { "character \(offset + 1): \(reason)" }
}
