/// A place in a text file: a 1-based line and a 1-based column.
///
/// Columns count Unicode scalars (characters, for the text of a manifest), not bytes; a tab counts as one. Lines end
/// at `\n` (a `\r` before it is ordinary whitespace).
public struct SourcePosition: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The line, from 1.
    public var line: Int
    /// The column, from 1.
    public var column: Int

    /// Creates a position.
    public init(line: Int, column: Int) {
        self.line = line
        self.column = column
    }

    /// The start of a file.
    public static let start = SourcePosition(line: 1, column: 1)

    public static func < (lhs: Self, rhs: Self) -> Bool {
        (lhs.line, lhs.column) < (rhs.line, rhs.column)
    }

    /// `line:column`.
    public var description: String { "\(line):\(column)" }
}

/// A JSON value with the position of every value and key in it, as read by ``PositionedJSON/parse(_:)``.
///
/// The syntax is JSON (RFC 8259) plus the two JSON5 conveniences that help people who edit files by hand:
/// comments (`// to the end of the line` and `/* block */`) and a trailing comma after the last element of an array
/// or the last member of an object. Other JSON5 extensions (single quotes, unquoted keys, hex numbers, `Infinity`)
/// are refused with a message that says what to write instead.
///
/// Objects keep their members in file order, duplicates included, so that a validator can report a duplicate key
/// with its position. Numbers keep their text.
public struct PositionedJSON: Sendable, Hashable {
    /// What a JSON value holds.
    public enum Value: Sendable, Hashable {
        case null
        case bool(Bool)
        /// A number, as written (for example `1`, `-0.5`, `1e3`).
        case number(String)
        case string(String)
        case array([PositionedJSON])
        case object([Member])
    }

    /// One `"key": value` member of an object.
    public struct Member: Sendable, Hashable {
        /// The key, unescaped.
        public var key: String
        /// Where the key's opening quote is.
        public var keyPosition: SourcePosition
        /// The value.
        public var value: PositionedJSON

        public init(key: String, keyPosition: SourcePosition, value: PositionedJSON) {
            self.key = key
            self.keyPosition = keyPosition
            self.value = value
        }
    }

    /// The value.
    public var value: Value
    /// Where the value starts (for a string: its opening quote).
    public var position: SourcePosition
    /// For a string: whether it was written without escapes, so that its `n`th character is at column
    /// `position.column + 1 + n` (see ``position(ofCharacter:)``).
    public var isVerbatim: Bool

    public init(_ value: Value, at position: SourcePosition, isVerbatim: Bool = true) {
        self.value = value
        self.position = position
        self.isVerbatim = isVerbatim
    }

    /// The position of the character at `offset` (counted in Unicode scalars) inside a string value; the position
    /// of the opening quote when the string has escapes or spans no columns for it.
    public func position(ofCharacter offset: Int) -> SourcePosition {
        guard isVerbatim, case .string = value else { return position }
        return SourcePosition(line: position.line, column: position.column + 1 + offset)
    }

    /// What a value of this type is called in messages: "a string", "an object", ...
    public var typeDescription: String {
        switch value {
        case .null: "null"
        case .bool: "a boolean"
        case .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }

    /// The deepest nesting of arrays and objects accepted; deeper input is refused (no stack overflow on hostile
    /// input). A manifest needs 4.
    public static let maximumDepth = 64

    /// Parses `bytes` (UTF-8, an optional byte-order mark) into one value.
    ///
    /// - Returns: the value, or the first syntax error with its position.
    public static func parse(_ bytes: some Collection<UInt8>) -> Result<PositionedJSON, JSONSyntaxError> {
        var parser = JSONPositionParser(Array(bytes))
        do {
            return .success(try parser.parseDocument())
        } catch {
            return .failure(error)
        }
    }
}

/// A syntax error in JSON text: where, and what was wrong.
public struct JSONSyntaxError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Where the problem is.
    public var position: SourcePosition
    /// What is wrong, for people.
    public var reason: String

    public init(position: SourcePosition, reason: String) {
        self.position = position
        self.reason = reason
    }

    /// `line:column: reason`.
    public var description: String { "\(position): \(reason)" }
}
