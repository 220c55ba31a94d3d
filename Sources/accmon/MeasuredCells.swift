/// Rows of cells, `columns` cells each, kept in one buffer of bytes and measured as they are added: each cell's
/// width and each column's widest. A fleet's table has hundreds of thousands of cells: no string is kept per cell,
/// and parts of a table can be made on threads of their own, then written with the widest of all the parts.
struct MeasuredCells: Sendable {
    let columns: Int
    private var bytes: [UInt8] = []
    /// Where each cell ends in `bytes`, and the columns it takes.
    private var ends: [Int] = []
    private var cellWidths: [Int] = []
    /// The widest cell of each column.
    private(set) var widths: [Int]
    private var column = 0

    /// No cells yet; room for `cells` cells of about `bytesPerCell` bytes.
    init(columns: Int, cells: Int = 0, bytesPerCell: Int = 12) {
        self.columns = columns
        widths = Array(repeating: 0, count: columns)
        ends.reserveCapacity(cells)
        cellWidths.reserveCapacity(cells)
        bytes.reserveCapacity(cells * bytesPerCell)
    }

    init(_ cells: [String], columns: Int) {
        self.init(columns: columns, cells: cells.count)
        for cell in cells { append(cell) }
    }

    /// Adds the next cell.
    mutating func append(_ cell: String) {
        bytes.append(contentsOf: cell.utf8)
        close(width: CellBytes(cell).ascii ? cell.utf8.count : cell.count)
    }

    /// Adds the next cell as ``quotedIfNeeded(_:)`` writes `text`; text that needs only the quotes (spaces, not
    /// quotes, backslashes or control characters: a usual product name) is copied between them directly.
    mutating func appendQuotedIfNeeded(_ text: String) {
        let scan = CellBytes(text)
        guard !scan.plain else {
            bytes.append(contentsOf: text.utf8)
            close(width: scan.ascii ? text.utf8.count : text.count)
            return
        }
        guard scan.onlySpaces else {
            append(quotedIfNeeded(text))
            return
        }
        bytes.append(UInt8(ascii: "\""))
        bytes.append(contentsOf: text.utf8)
        bytes.append(UInt8(ascii: "\""))
        close(width: (scan.ascii ? text.utf8.count : text.count) + 2)
    }

    private mutating func close(width: Int) {
        ends.append(bytes.count)
        cellWidths.append(width)
        widths[column] = max(widths[column], width)
        column = column + 1 == columns ? 0 : column + 1
    }

    /// The widest of each column here and in `others`.
    func widest(with others: [Int]) -> [Int] { zip(widths, others).map { max($0, $1) } }

    /// The rows, each cell padded to its column's width in `widths` and two spaces (the last cell of a row: a
    /// newline).
    func rows(_ widths: [Int]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(rowsSize(widths))
        rows(widths, into: &out)
        return out
    }

    /// The size of ``rows(_:)``.
    func rowsSize(_ widths: [Int]) -> Int {
        (widths.reduce(0, +) + 2 * (columns - 1) + 1) * (ends.count / max(columns, 1))
    }

    /// Appends ``rows(_:)`` to `out`.
    func rows(_ widths: [Int], into out: inout [UInt8]) {
        bytes.withUnsafeBufferPointer { bytes in
            var start = 0
            var column = 0
            for index in ends.indices {
                let end = ends[index]
                out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<end]))
                start = end
                if column == columns - 1 {
                    out.append(UInt8(ascii: "\n"))
                    column = 0
                } else {
                    out.append(
                        contentsOf: repeatElement(UInt8(ascii: " "), count: widths[column] - cellWidths[index] + 2))
                    column += 1
                }
            }
        }
    }
}

/// What a cell's bytes hold that the table must know, eight bytes at a time: non-ASCII bytes (its width is then
/// counted in characters), and what makes ``quotedIfNeeded(_:)`` quote it.
private struct CellBytes {
    private var nonASCII = false
    private var space = false
    /// Control characters (below U+0020, and U+007F) and quotes: escaped inside the quotes.
    private var escaped = false
    private var backslash = false

    init(_ text: String) {
        var text = text
        text.withUTF8 { bytes in
            var index = 0
            while index + 8 <= bytes.count {
                note(word: UnsafeRawPointer(bytes.baseAddress! + index).loadUnaligned(as: UInt64.self))
                index += 8
            }
            while index < bytes.count {
                note(word: UInt64(bytes[index]) | 0x4141_4141_4141_4100)  // the other bytes: 'A'
                index += 1
            }
        }
    }

    var ascii: Bool { !nonASCII }
    /// Written as it is.
    var plain: Bool { !space && !escaped }
    /// Written between quotes, as it is.
    var onlySpaces: Bool { !escaped && !backslash }

    private static let ones: UInt64 = 0x0101_0101_0101_0101
    private static let highs: UInt64 = 0x8080_8080_8080_8080

    /// Whether a byte of `word` is below `limit` (at most 128).
    private static func hasByte(below limit: UInt64, _ word: UInt64) -> Bool {
        (word &- ones &* limit) & ~word & highs != 0
    }

    private static func hasByte(_ value: UInt64, _ word: UInt64) -> Bool {
        hasByte(below: 1, word ^ (ones &* value))
    }

    private mutating func note(word: UInt64) {
        nonASCII = nonASCII || word & Self.highs != 0
        space = space || Self.hasByte(0x20, word)
        escaped = escaped || Self.hasByte(below: 0x20, word) || Self.hasByte(0x7F, word) || Self.hasByte(0x22, word)
        backslash = backslash || Self.hasByte(0x5C, word)
    }
}
