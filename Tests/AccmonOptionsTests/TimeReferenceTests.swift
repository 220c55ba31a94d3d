import AccmonOptions
import Testing

/// `--since` values: durations back from now, ISO 8601 times with a zone (instants), without one (local), and the
/// errors, each saying where and why.
@Suite struct TimeReferenceTests {
    @Test(arguments: [
        ("30s", 30.0), ("5m", 300), ("1h", 3_600), ("2d", 172_800), ("1w", 604_800), ("1h30m", 5_400),
        ("0s", 0), ("1.5h", 5_400), ("90s", 90),
    ])
    func durations(text: String, seconds: Double) throws {
        #expect(try TimeReference.parse(text, option: "--since") == .ago(seconds: seconds))
    }

    @Test(arguments: [
        ("1970-01-01T00:00:00Z", 0.0),
        ("2026-12-02T10:00:00Z", 1_796_205_600),
        ("2026-12-02T11:00:00+01:00", 1_796_205_600),
        ("2026-12-02T05:30:00-0430", 1_796_205_600),
        ("2026-12-02T12:00+02", 1_796_205_600),
        ("2026-12-02 10:00:00.250z", 1_796_205_600.25),
        ("2000-02-29T00:00:00Z", 951_782_400),
        ("2024-03-01T00:00:00Z", 1_709_251_200),
        ("1969-12-31T23:59:59Z", -1),
        ("2026-12-02T10:00:00,5Z", 1_796_205_600.5),
    ])
    func instants(text: String, seconds: Double) throws {
        #expect(try TimeReference.parse(text, option: "--since") == .instant(seconds))
    }

    @Test func timesWithoutAZoneAreLocal() throws {
        #expect(
            try TimeReference.parse("2026-12-02", option: "--since")
                == .local(TimeReference.LocalTime(year: 2026, month: 12, day: 2)))
        #expect(
            try TimeReference.parse("2026-12-02T10:05", option: "--since")
                == .local(TimeReference.LocalTime(year: 2026, month: 12, day: 2, hour: 10, minute: 5)))
        #expect(
            try TimeReference.parse("2026-12-02 23:59:59.5", option: "--since")
                == .local(
                    TimeReference.LocalTime(year: 2026, month: 12, day: 2, hour: 23, minute: 59, second: 59.5)))
    }

    static let neither =
        "is neither a duration (such as 30s, 5m, 1h, 2d) nor an ISO 8601 time (such as 2026-12-02T10:00:00Z, "
        + "2026-12-02T11:00:00+01:00, 2026-12-02)"

    @Test(arguments: [
        ("", "--since: '' \(neither)"),
        ("5", "--since: '5' \(neither)"),
        ("5x", "--since: '5x' \(neither)"),
        ("h", "--since: 'h' \(neither)"),
        ("-5m", "--since: '-5m' \(neither)"),
        ("yesterday", "--since: 'yesterday' \(neither)"),
        ("2026-13-01", "--since: '2026-13-01': month 13 is not from 1 to 12"),
        ("2026-02-29", "--since: '2026-02-29': day 29 is not from 1 to 28"),
        ("2026-04-31", "--since: '2026-04-31': day 31 is not from 1 to 30"),
        ("2026-12-00", "--since: '2026-12-00': day 0 is not from 1 to 31"),
        ("2026-12-02T24:00:00Z", "--since: '2026-12-02T24:00:00Z': hour 24 is not from 0 to 23"),
        ("2026-12-02T10:60Z", "--since: '2026-12-02T10:60Z': minute 60 is not from 0 to 59"),
        ("2026-12-02T10:00:61Z", "--since: '2026-12-02T10:00:61Z': second 61 is not from 0 to 59"),
        ("2026-12-02T10", "--since: '2026-12-02T10': ':' expected after the hour"),
        ("2026-12-02X10:00", "--since: '2026-12-02X10:00': 'T' and a time of day expected after the date"),
        ("2026-12-02T10:00:00+25:00", "--since: '2026-12-02T10:00:00+25:00': zone hour 25 is not from 0 to 23"),
        (
            "2026-12-02T10:00:00 UTC",
            "--since: '2026-12-02T10:00:00 UTC': 'Z' or an offset such as +01:00 expected after the time of day"
        ),
        ("2026-12-02T10:00:00Zulu", "--since: '2026-12-02T10:00:00Zulu': unexpected text after the zone"),
        ("2026-12-02T10:00:00.Z", "--since: '2026-12-02T10:00:00.Z': digits expected after the second's decimal point"),
        ("2026-1a-02", "--since: '2026-1a-02': the month is not 2 digits"),
    ])
    func errorsSayWhereAndWhy(text: String, message: String) {
        #expect(throws: UsageError(message)) { try TimeReference.parse(text, option: "--since") }
    }
}
