import AccmonJSON
import AccmonManifest
import AccmonProtocol
import Glibc
import Testing

@Suite("Glob patterns (fnmatch-style *, ?, [...])")
struct GlobPatternTests {
    struct Case: CustomTestStringConvertible, Sendable {
        var pattern: String
        var text: String
        var matches: Bool
        var testDescription: String { "\"\(pattern)\" \(matches ? "~" : "!~") \"\(text)\"" }
    }

    static let cases: [Case] = [
        // Literals: exact, case-sensitive, whole text.
        Case(pattern: "A50285BI", text: "A50285BI", matches: true),
        Case(pattern: "A50285BI", text: "a50285bi", matches: false),
        Case(pattern: "A50285BI", text: "A50285BIX", matches: false),
        Case(pattern: "A50285BI", text: "XA50285BI", matches: false),
        Case(pattern: "A50285BI", text: "", matches: false),
        // *: any text, the empty text included, anywhere.
        Case(pattern: "*", text: "", matches: true),
        Case(pattern: "*", text: "anything at all", matches: true),
        Case(pattern: "A5*", text: "A5", matches: true),
        Case(pattern: "A5*", text: "A50285BI", matches: true),
        Case(pattern: "A5*", text: "B50285BI", matches: false),
        Case(pattern: "*BI", text: "A50285BI", matches: true),
        Case(pattern: "*BI", text: "A50285BIX", matches: false),
        Case(pattern: "A*B*C", text: "AxxBxxC", matches: true),
        Case(pattern: "A*B*C", text: "ABC", matches: true),
        Case(pattern: "A*B*C", text: "ACB", matches: false),
        Case(pattern: "*a*a*a*a*b", text: String(repeating: "a", count: 200), matches: false),  // no blow-up
        Case(pattern: "**", text: "x", matches: true),
        Case(pattern: "*/*", text: "usb/1-1", matches: true),  // '/' is not special
        Case(pattern: "*", text: ".hidden", matches: true),  // nor is a leading '.'
        // ?: exactly one character (a Unicode scalar, not a byte).
        Case(pattern: "?", text: "", matches: false),
        Case(pattern: "?", text: "é", matches: true),
        Case(pattern: "??", text: "é", matches: false),
        Case(pattern: "1-?", text: "1-3", matches: true),
        Case(pattern: "1-?", text: "1-10", matches: false),
        Case(pattern: "Caf?", text: "Café", matches: true),
        // [...]: sets, ranges, negation, literal ] and -.
        Case(pattern: "[abc]", text: "b", matches: true),
        Case(pattern: "[abc]", text: "d", matches: false),
        Case(pattern: "[a-c]x", text: "bx", matches: true),
        Case(pattern: "[0-9][0-9]", text: "42", matches: true),
        Case(pattern: "[0-9][0-9]", text: "4a", matches: false),
        Case(pattern: "[!0-9]", text: "a", matches: true),
        Case(pattern: "[!0-9]", text: "5", matches: false),
        Case(pattern: "[^0-9]", text: "5", matches: false),
        Case(pattern: "[]]", text: "]", matches: true),
        Case(pattern: "[!]]", text: "]", matches: false),
        Case(pattern: "[!]]", text: "x", matches: true),
        Case(pattern: "[a-]", text: "-", matches: true),
        Case(pattern: "[-a]", text: "-", matches: true),
        Case(pattern: "[*?]", text: "*", matches: true),
        Case(pattern: "[*?]", text: "x", matches: false),
        Case(pattern: "[é-ë]", text: "ê", matches: true),
        // \: escapes, also inside brackets.
        Case(pattern: "\\*", text: "*", matches: true),
        Case(pattern: "\\*", text: "x", matches: false),
        Case(pattern: "a\\?", text: "a?", matches: true),
        Case(pattern: "a\\?", text: "ab", matches: false),
        Case(pattern: "\\[x]", text: "[x]", matches: true),
        Case(pattern: "[\\]]", text: "]", matches: true),
        Case(pattern: "\\\\", text: "\\", matches: true),
    ]

    @Test(arguments: cases)
    func matchesLikeFnmatch(_ testCase: Case) throws {
        let pattern = try GlobPattern(testCase.pattern)
        #expect(pattern.matches(testCase.text) == testCase.matches)
    }

    static let malformed: [(pattern: String, offset: Int, reason: String)] = [
        ("[ab", 0, "'[' is not closed with ']' (write '\\[' for a bracket)"),
        ("A5[", 2, "'[' is not closed with ']' (write '\\[' for a bracket)"),
        ("[]", 0, "'[' is not closed with ']' (write '\\[' for a bracket)"),
        ("[!]", 0, "'[' is not closed with ']' (write '\\[' for a bracket)"),
        ("x[a\\", 1, "'[' is not closed with ']' (write '\\[' for a bracket)"),
        ("abc\\", 3, "a trailing '\\' escapes nothing (write '\\\\' for a backslash)"),
        ("[z-a]", 1, "the range 'z-a' is empty (its start is after its end)"),
        ("x[[:digit:]]", 2, "classes such as [:digit:] are not supported (write the range, such as [0-9])"),
    ]

    @Test(arguments: malformed)
    func malformedPatternsAreRefusedWithTheirOffset(_ pattern: String, _ offset: Int, _ reason: String) {
        #expect(throws: GlobSyntaxError(offset: offset, reason: reason)) { try GlobPattern(pattern) }
    }

    @Test func literalPatternsKnowTheirText() throws {
        #expect(try GlobPattern("A5\\*B").literalValue == "A5*B")
        #expect(try GlobPattern("A5*B").literalValue == nil)
        #expect(try GlobPattern("1-1.2").isLiteral)
        #expect(try GlobPattern("*").matchesEverything)
        #expect(try !GlobPattern("*x").matchesEverything)
        for text in ["plain", "st*r", "qu?st", "[br]", "back\\slash", "", "é*"] {
            let escaped = GlobPattern.escaping(text)
            let pattern = try GlobPattern(escaped)
            #expect(pattern.literalValue == text, "\(escaped)")
            #expect(pattern.matches(text), "\(escaped)")
        }
    }

    /// Differential test: on ASCII patterns that compile, the matcher agrees with glibc's `fnmatch(3)` (flags 0),
    /// over seeded random patterns and texts.
    @Test func agreesWithGlibcFnmatchOnRandomASCIIPatterns() throws {
        var random = SplitMix64(seed: 0x6D61_6E69_6665_7374)
        let alphabet = Array("ab-]![^*?\\.".unicodeScalars)
        let textAlphabet = Array("ab-]![^*?\\.c".unicodeScalars)
        var compared = 0
        for _ in 0..<20_000 {
            let pattern = String(
                String.UnicodeScalarView(
                    (0..<random.next(below: 8)).map { _ in alphabet[random.next(below: alphabet.count)] }))
            guard let glob = try? GlobPattern(pattern) else { continue }  // try?: malformed ones are tested above
            for _ in 0..<8 {
                let text = String(
                    String.UnicodeScalarView(
                        (0..<random.next(below: 7)).map { _ in textAlphabet[random.next(below: textAlphabet.count)] }))
                let expected = fnmatch(pattern, text, 0) == 0
                #expect(glob.matches(text) == expected, "pattern \"\(pattern)\" text \"\(text)\"")
                compared += 1
            }
        }
        #expect(compared > 50_000)
    }
}

/// A small seeded generator (SplitMix64), so that random tests are reproducible.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    mutating func next(below bound: Int) -> Int { Int(next() % UInt64(bound)) }
}
