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
    /// The widths of the cells not in the last column, added up (for the size of the rows).
    private var widthsBeforeLastColumn = 0
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
        append(cell, width: Self.width(of: cell))
    }

    /// Adds the next cell, whose width is known (``width(of:)``): a cell repeated on many rows, or one known to be
    /// ASCII (its width is its count of bytes).
    mutating func append(_ cell: String, width: Int) {
        bytes.append(contentsOf: cell.utf8)
        close(width: width)
    }

    /// The columns `cell` takes: its characters (grapheme clusters), counted by its bytes when it is ASCII.
    static func width(of cell: String) -> Int {
        CellBytes(cell).ascii ? cell.utf8.count : cell.count
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
        if column != columns - 1 { widthsBeforeLastColumn += width }
        widths[column] = max(widths[column], width)
        column = column + 1 == columns ? 0 : column + 1
    }

    /// The widest of each column here and in `others`.
    func widest(with others: [Int]) -> [Int] { zip(widths, others).map { max($0, $1) } }

    /// The rows, each cell padded to its column's width in `widths` and two spaces (the last cell of a row: a
    /// newline).
    func rows(_ widths: [Int]) -> [UInt8] {
        let size = rowsSize(widths)
        return [UInt8](unsafeUninitializedCapacity: size) { buffer, count in
            count = writeRows(widths, to: buffer.baseAddress!)
        }
    }

    /// The size of ``rows(_:)`` in bytes.
    func rowsSize(_ widths: [Int]) -> Int {
        let rows = ends.count / columns
        let padded = widths.dropLast().reduce(0) { $0 + $1 + 2 }
        return bytes.count + rows * (padded + 1) - widthsBeforeLastColumn
    }

    /// Writes ``rows(_:)`` at `start`, which has room for ``rowsSize(_:)`` bytes; returns how many it wrote.
    func writeRows(_ widths: [Int], to start: UnsafeMutablePointer<UInt8>) -> Int {
        var at = start
        bytes.withUnsafeBufferPointer { bytes in
            var cellStart = 0
            var column = 0
            for index in ends.indices {
                let end = ends[index]
                if end > cellStart {
                    at.update(from: bytes.baseAddress! + cellStart, count: end - cellStart)
                    at += end - cellStart
                }
                cellStart = end
                if column == columns - 1 {
                    at.pointee = UInt8(ascii: "\n")
                    at += 1
                    column = 0
                } else {
                    let padding = widths[column] - cellWidths[index] + 2
                    at.update(repeating: UInt8(ascii: " "), count: padding)
                    at += padding
                    column += 1
                }
            }
        }
        return at - start
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
