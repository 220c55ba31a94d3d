import Glibc

extension SignalDescriptor {
    /// The first of `signals` that is pending (sent while blocked, not yet taken) for the process or the calling
    /// thread; `nil` when none is (`sigpending(2)`). Taking nothing, it lets a program that blocks its stop signals
    /// look for one between steps that do not read a signalfd.
    public static func firstPending(among signals: [Int32]) -> Int32? {
        var pending = sigset_t()
        sigemptyset(&pending)
        guard sigpending(&pending) == 0 else { return nil }
        return signals.first { sigismember(&pending, $0) == 1 }
    }
}
