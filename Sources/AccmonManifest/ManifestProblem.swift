import AccmonJSON

/// A problem in a manifest, with its place: printed as `file:line:column: reason`.
public struct ManifestProblem: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of problem this is; stable, for programs and tests.
    public struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The file could not be read (the caller reports it; the position is 1:1).
        public static let unreadable = Code(rawValue: "unreadable")
        /// Not valid JSON (with comments and trailing commas).
        public static let syntax = Code(rawValue: "syntax")
        /// A key the format does not have.
        public static let unknownKey = Code(rawValue: "unknown-key")
        /// A required key is missing.
        public static let missingKey = Code(rawValue: "missing-key")
        /// A key appears twice in one object.
        public static let duplicateKey = Code(rawValue: "duplicate-key")
        /// A value of the wrong JSON type.
        public static let wrongType = Code(rawValue: "wrong-type")
        /// A value of the right type that is not valid (a bad id, glob, name, hash...).
        public static let invalidValue = Code(rawValue: "invalid-value")
        /// A list or object that must not be empty is.
        public static let empty = Code(rawValue: "empty")
        /// A `version` this code does not read.
        public static let unsupportedVersion = Code(rawValue: "unsupported-version")
        /// Two entries have the same name (in one file or across files).
        public static let duplicateName = Code(rawValue: "duplicate-name")
        /// An entry that can never match because an earlier one matches everything it matches.
        public static let unreachableEntry = Code(rawValue: "unreachable-entry")
        /// Parts of one match that contradict each other (an address with kind usb).
        public static let conflict = Code(rawValue: "conflict")
    }

    /// The kind of problem.
    public var code: Code
    /// The file's path.
    public var file: String
    /// The line, from 1.
    public var line: Int
    /// The column, from 1 (in characters).
    public var column: Int
    /// What is wrong, and when it helps, what to write instead; never contains a control character.
    public var reason: String

    public init(_ code: Code, file: String, position: SourcePosition, reason: String) {
        self.code = code
        self.file = file
        self.line = position.line
        self.column = position.column
        self.reason = escapingControlCharacters(reason)  // One problem, one line, whatever the input.
    }

    /// A file that could not be read: reported at 1:1, so that every problem has the same shape.
    public static func unreadable(file: String, reason: String) -> ManifestProblem {
        ManifestProblem(.unreadable, file: file, position: .start, reason: "cannot read the file: \(reason)")
    }

    /// The position.
    public var position: SourcePosition { SourcePosition(line: line, column: column) }

    /// `file:line:column: reason`.
    public var description: String { "\(file):\(line):\(column): \(reason)" }
}

/// Every problem ``Manifest/parse(files:)`` found: a collection of ``ManifestProblem``, in file order and then
/// position order. Its description is one `file:line:column: reason` line per problem.
public struct ManifestProblems: Error, Sendable, Hashable, RandomAccessCollection, CustomStringConvertible {
    /// The problems.
    public var problems: [ManifestProblem]

    public init(_ problems: [ManifestProblem]) { self.problems = problems }

    public var startIndex: Int { problems.startIndex }
    public var endIndex: Int { problems.endIndex }
    public subscript(position: Int) -> ManifestProblem { problems[position] }

    /// One `file:line:column: reason` line per problem, each ending with a newline.
    public var description: String { problems.map { "\($0)\n" }.joined() }
}
