import Glibc

/// Lookups in the system's account databases (NSS: files, or a directory service such as LDAP or sssd).
///
/// - Important: a lookup can wait seconds on a directory service: never call these on a thread that serves
///   clients.
public enum Accounts {
    /// The uid of user `name`, or `nil` when there is none.
    public static func userID(_ name: String) -> uid_t? {
        lookUp { buffer, size in
            var entry = passwd()
            var result: UnsafeMutablePointer<passwd>?
            let status = getpwnam_r(name, &entry, buffer, size, &result)
            return (status, result == nil ? nil : entry.pw_uid)
        }
    }

    /// The gid of group `name`, or `nil` when there is none.
    public static func groupID(_ name: String) -> gid_t? {
        lookUp { buffer, size in
            var entry = group()
            var result: UnsafeMutablePointer<group>?
            let status = getgrnam_r(name, &entry, buffer, size, &result)
            return (status, result == nil ? nil : entry.gr_gid)
        }
    }

    /// The name of user `uid`, or `nil` when there is none.
    public static func userName(_ uid: uid_t) -> String? {
        lookUp { buffer, size in
            var entry = passwd()
            var result: UnsafeMutablePointer<passwd>?
            let status = getpwuid_r(uid, &entry, buffer, size, &result)
            return (status, result == nil ? nil : String(cString: entry.pw_name))
        }
    }

    /// Runs a `get*_r` lookup with a buffer that grows while the call says it is too small (`ERANGE`: a group with
    /// many members), up to 1 MiB.
    private static func lookUp<Value>(
        _ call: (UnsafeMutablePointer<CChar>, Int) -> (status: Int32, value: Value?)
    ) -> Value? {
        var size = 4096
        while true {
            var buffer = [CChar](repeating: 0, count: size)
            let (status, value) = buffer.withUnsafeMutableBufferPointer { call($0.baseAddress!, size) }
            if status == ERANGE && size < 1 << 20 {
                size *= 4
                continue
            }
            return status == 0 ? value : nil
        }
    }
}
