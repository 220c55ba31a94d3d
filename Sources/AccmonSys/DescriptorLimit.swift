import Glibc

/// The process's limit on open descriptors (`RLIMIT_NOFILE`).
public enum DescriptorLimit {
    /// Raises the soft limit towards `wanted`, never past the hard limit (systemd starts services with a soft limit
    /// of 1024 and a much higher hard one, for programs that need more to raise). Returns the soft limit now.
    @discardableResult
    public static func raiseSoftLimit(to wanted: Int) -> Int {
        var limit = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 0 }
        let target = min(rlim_t(max(wanted, 0)), limit.rlim_max)
        if target > limit.rlim_cur {
            var raised = limit
            raised.rlim_cur = target
            if setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        return limit.rlim_cur > rlim_t(Int.max) ? Int.max : Int(limit.rlim_cur)
    }
}

extension FileDescriptor {
    /// Opens `path` read-only, close-on-exec (for a spare descriptor: `/dev/null`).
    public static func openReadOnly(_ path: String) throws(Errno) -> FileDescriptor {
        FileDescriptor(rawValue: try valueOrErrno { Glibc.open(path, O_RDONLY | O_CLOEXEC) })
    }

    /// Sends `bytes` once without blocking or raising SIGPIPE; what the socket does not take is dropped. For a last
    /// word to a client about to be closed.
    public func sendOnce(_ bytes: [UInt8]) {
        _ = bytes.withUnsafeBytes { Glibc.send(rawValue, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
    }
}
