import CAccmonShims
import Glibc

/// A child process started to run a command for the caller, tied to it: it gets a signal when the caller dies.
public enum TiedChild {
    /// How a child ended.
    public enum Exit: Sendable, Hashable {
        case exited(Int32)
        case signaled(Int32)

        /// The status a shell (and `flock(1)`) gives it: the exit code, or 128 + the signal.
        public var shellStatus: Int32 {
            switch self {
            case .exited(let code): code
            case .signaled(let signal): 128 + signal
            }
        }
    }

    /// Starts `executable` with `arguments` (the program name first) and `environment` (`NAME=value`). The child's
    /// signal dispositions and mask are the defaults, and it gets `deathSignal` when this process dies.
    /// - Parameter passing: a descriptor the child gets as its descriptor 3 (without close-on-exec).
    public static func spawn(
        _ executable: String, arguments: [String], environment: [String], deathSignal: Int32 = SIGKILL,
        passing: FileDescriptor? = nil
    ) throws(Errno) -> pid_t {
        func cStrings(_ strings: [String]) -> [UnsafeMutablePointer<CChar>?] { strings.map { strdup($0) } + [nil] }
        let argv = cStrings(arguments)
        let envp = cStrings(environment)
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        let pid = CAccmonShims_spawnTiedChild(executable, argv, envp, deathSignal, passing?.rawValue ?? -1)
        guard pid > 0 else { throw Errno(rawValue: errno) }
        return pid
    }

    /// Waits for `pid` to end (blocks: not on the cooperative pool).
    public static func wait(_ pid: pid_t) -> Exit {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            if errno != EINTR { return .exited(127) }
        }
        // WIFEXITED and friends are macros: decoded by hand, as <sys/wait.h> defines them.
        let signal = status & 0x7F
        return signal == 0 ? .exited((status >> 8) & 0xFF) : .signaled(signal)
    }

    /// The executable `name` names: itself when it holds a `/`, else the first executable file of that name in the
    /// directories of `path` (`$PATH`); `nil` when there is none.
    public static func resolve(_ name: String, path: String?) -> String? {
        if name.contains("/") { return name }
        for directory in (path ?? "/usr/local/bin:/usr/bin:/bin").split(separator: ":", omittingEmptySubsequences: false) {
            let candidate = (directory.isEmpty ? "." : String(directory)) + "/" + name
            var status = stat()
            if stat(candidate, &status) == 0, status.st_mode & S_IFMT == S_IFREG, access(candidate, X_OK) == 0 {
                return candidate
            }
        }
        return nil
    }
}
