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
        close(width: cell.utf8.allSatisfy { $0 < 0x80 } ? cell.utf8.count : cell.count)
    }

    /// Adds the next cell as ``quotedIfNeeded(_:)`` writes `text`; text that needs only the quotes (spaces, not
    /// quotes, backslashes or control characters: a usual product name) is copied between them directly.
    mutating func appendQuotedIfNeeded(_ text: String) {
        var plain = true
        var onlySpaces = true
        var ascii = true
        for byte in text.utf8 {
            if byte <= 0x20 || byte == UInt8(ascii: "\"") || byte == 0x7F {
                plain = false
                if byte != UInt8(ascii: " ") { onlySpaces = false }
            } else if byte == UInt8(ascii: "\\") {
                onlySpaces = false
            } else if byte >= 0x80 {
                ascii = false
            }
        }
        if plain || !onlySpaces {
            append(plain ? text : quotedIfNeeded(text))
            return
        }
        bytes.append(UInt8(ascii: "\""))
        bytes.append(contentsOf: text.utf8)
        bytes.append(UInt8(ascii: "\""))
        close(width: ascii ? text.utf8.count + 2 : text.count + 2)
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
