/// A point in time given on a command line, as `--since` takes it: a duration back from now (`30s`, `5m`, `1h`, `2d`,
/// or several, `1h30m`), or an ISO 8601 date and time (`2026-12-02T10:00:00Z`, `2026-12-02T11:00:00+01:00`,
/// `2026-12-02 10:00`, `2026-12-02`).
///
/// Pure: a time without a zone is returned as a ``LocalTime`` for the caller to place in the local time zone.
public enum TimeReference: Sendable, Equatable {
    /// This many seconds before now.
    case ago(seconds: Double)
    /// An instant, in seconds since the epoch (a time with `Z` or an offset).
    case instant(Double)
    /// A date and time without a zone: local time (a date alone is its midnight).
    case local(LocalTime)

    /// A calendar date and time of day, without a zone.
    public struct LocalTime: Sendable, Equatable {
        public var year: Int
        public var month: Int
        public var day: Int
        public var hour: Int
        public var minute: Int
        /// Seconds, with their fraction.
        public var second: Double

        public init(year: Int, month: Int, day: Int, hour: Int = 0, minute: Int = 0, second: Double = 0) {
            self.year = year
            self.month = month
            self.day = day
            self.hour = hour
            self.minute = minute
            self.second = second
        }

        /// Seconds since the epoch of this date and time read as UTC, less `offsetSeconds` east of UTC.
        public func secondsSinceEpoch(offsetSeconds: Int = 0) -> Double {
            // Days from 1970-01-01 to the date, in the proleptic Gregorian calendar (H. Hinnant's days_from_civil).
            let y = month <= 2 ? year - 1 : year
            let era = (y >= 0 ? y : y - 399) / 400
            let yearOfEra = y - era * 400
            let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
            let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
            let days = era * 146_097 + dayOfEra - 719_468
            return Double(days * 86_400 + hour * 3_600 + minute * 60 - offsetSeconds) + second
        }
    }

    /// Reads `text`, the value of `option`.
    ///
    /// - Throws: a ``UsageError`` saying which part is wrong, as `--since: '2026-13-01': month 13 is not from 1 to
    ///   12`.
    public static func parse(_ text: String, option: String) throws(UsageError) -> TimeReference {
        let scalars = Array(text.unicodeScalars)
        if let first = scalars.first, first.properties.numericType != nil, scalars.count >= 10, scalars[4] == "-" {
            return try parseTime(scalars, text: text, option: option)
        }
        if let seconds = duration(scalars) { return .ago(seconds: seconds) }
        throw UsageError(
            "\(option): '\(text)' is neither a duration (such as 30s, 5m, 1h, 2d) nor an ISO 8601 time (such as "
                + "2026-12-02T10:00:00Z, 2026-12-02T11:00:00+01:00, 2026-12-02)")
    }

    /// `30s`, `5m`, `1h`, `2d`, `1w`, or several in a row (`1h30m`); `nil` when `scalars` is not one.
    private static func duration(_ scalars: [Unicode.Scalar]) -> Double? {
        var total = 0.0
        var index = 0
        guard !scalars.isEmpty else { return nil }
        while index < scalars.count {
            var digits = ""
            while index < scalars.count, ("0"..."9").contains(scalars[index]) || scalars[index] == "." {
                digits.unicodeScalars.append(scalars[index])
                index += 1
            }
            guard let value = Double(digits), index < scalars.count else { return nil }
            let unit: Double
            switch scalars[index] {
            case "s": unit = 1
            case "m": unit = 60
            case "h": unit = 3_600
            case "d": unit = 86_400
            case "w": unit = 604_800
            default: return nil
            }
            index += 1
            total += value * unit
        }
        return total
    }

    private static func parseTime(
        _ s: [Unicode.Scalar], text: String, option: String
    ) throws(UsageError)
        -> TimeReference
    {
        var index = 0
        func fail(_ reason: String) -> UsageError { UsageError("\(option): '\(text)': \(reason)") }
        func number(_ width: Int, _ name: String) throws(UsageError) -> Int {
            guard index + width <= s.count else { throw fail("the \(name) is cut short") }
            var value = 0
            for scalar in s[index..<index + width] {
                guard ("0"..."9").contains(scalar) else { throw fail("the \(name) is not \(width) digits") }
                value = value * 10 + Int(scalar.value - 48)
            }
            index += width
            return value
        }
        func expect(_ scalar: Unicode.Scalar, after name: String) throws(UsageError) {
            guard index < s.count, s[index] == scalar else { throw fail("'\(scalar)' expected after the \(name)") }
            index += 1
        }
        func check(_ value: Int, _ name: String, _ range: ClosedRange<Int>) throws(UsageError) {
            guard range.contains(value) else {
                throw fail("\(name) \(value) is not from \(range.lowerBound) to \(range.upperBound)")
            }
        }
        var time = LocalTime(year: try number(4, "year"), month: 1, day: 1)
        try expect("-", after: "year")
        time.month = try number(2, "month")
        try expect("-", after: "month")
        time.day = try number(2, "day")
        try check(time.month, "month", 1...12)
        let leap = time.year % 4 == 0 && (time.year % 100 != 0 || time.year % 400 == 0)
        let days = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][time.month - 1]
        try check(time.day, "day", 1...days)
        guard index < s.count else { return .local(time) }
        guard s[index] == "T" || s[index] == "t" || s[index] == " " else {
            throw fail("'T' and a time of day expected after the date")
        }
        index += 1
        time.hour = try number(2, "hour")
        try check(time.hour, "hour", 0...23)
        try expect(":", after: "hour")
        time.minute = try number(2, "minute")
        try check(time.minute, "minute", 0...59)
        if index < s.count, s[index] == ":" {
            index += 1
            var seconds = Double(try number(2, "second"))
            try check(Int(seconds), "second", 0...59)
            if index < s.count, s[index] == "." || s[index] == "," {
                index += 1
                var scale = 0.1
                let start = index
                while index < s.count, ("0"..."9").contains(s[index]) {
                    seconds += Double(s[index].value - 48) * scale
                    scale /= 10
                    index += 1
                }
                guard index > start else { throw fail("digits expected after the second's decimal point") }
            }
            time.second = seconds
        }
        guard index < s.count else { return .local(time) }
        let offset: Int
        switch s[index] {
        case "Z", "z":
            index += 1
            offset = 0
        case "+", "-":
            let sign = s[index] == "-" ? -1 : 1
            index += 1
            let hours = try number(2, "zone's hours")
            try check(hours, "zone hour", 0...23)
            var minutes = 0
            if index < s.count {
                if s[index] == ":" { index += 1 }
                minutes = try number(2, "zone's minutes")
                try check(minutes, "zone minute", 0...59)
            }
            offset = sign * (hours * 3_600 + minutes * 60)
        default:
            throw fail("'Z' or an offset such as +01:00 expected after the time of day")
        }
        guard index == s.count else { throw fail("unexpected text after the zone") }
        return .instant(time.secondsSinceEpoch(offsetSeconds: offset))
    }
}
