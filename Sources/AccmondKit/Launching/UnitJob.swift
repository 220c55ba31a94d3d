/// What accmond asks systemd to do with a unit.
enum UnitAction: String, Sendable, Hashable {
    case start, stop
}

/// One job for the unit job thread (``UnitJobRunner``): a `StartUnit` or `StopUnit` of one unit, with the checks to
/// make before starting.
struct UnitJob: Sendable, Hashable {
    /// The ``LaunchPlanner`` slot the job serves.
    var slot: String
    var action: UnitAction
    var unit: String
    /// A relaunch: start only when the loaded unit runs as this uid (its `User=`), without `DynamicUser=`.
    var runsAs: UInt32? = nil
    /// A kept unit's new connection: when this unit (started for an earlier connection of the same accessory) is
    /// still active or activating, start nothing.
    var unlessActive: String? = nil
}

/// What came of a ``UnitJob``.
enum UnitJobOutcome: Sendable, Hashable {
    /// systemd's job ended with the result `done`.
    case done
    /// ``UnitJob/unlessActive`` names a unit that is active: nothing was started.
    case alreadyActive(String)
    /// The call or the job failed, for the reason given (systemd's words: the job result, the unit's `Result` and
    /// `ExecMainStatus`, or the D-Bus error). Worth retrying.
    case failed(String)
    /// Not started because a check before the call failed (the unit does not run as the user, is not installed) or
    /// the system bus is not there. Not retried.
    case refused(String)
}

/// A job and what came of it, posted by the job thread to the broker loop.
struct UnitJobResult: Sendable, Hashable {
    var job: UnitJob
    var outcome: UnitJobOutcome
}
