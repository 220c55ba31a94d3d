import AccmonSys
import Glibc

/// Finds the processes that have a file open, from `/proc`: every `/proc/PID/fd/N` whose file is the same (for a
/// character device, the same device number, whichever node it was opened through; otherwise the same inode).
///
/// It never asks a file system about a descriptor it does not have to: each descriptor's mount is read first from
/// `/proc/PID/fdinfo/N` (`mnt_id`, which is no look at the file), and only a descriptor on a mount of one of the
/// files' own file systems (for device nodes, `/dev`'s devtmpfs, mounted wherever, in any mount namespace) is looked
/// at, with `statx` (`AT_STATX_DONT_SYNC | AT_NO_AUTOMOUNT`). So a descriptor on a stalled NFS mount or on a user's FUSE mount
/// (which would answer `stat` when it likes, and as whatever device it likes) neither blocks the scan nor fakes an
/// opener. A node of the same device on another file system (a container's own `/dev`, made with `mknod`) is
/// therefore not seen. The scan stops at its time limit and says it is incomplete.
///
/// Reading another user's `/proc/PID/fd` takes `CAP_DAC_READ_SEARCH` (the directory is its owner's, mode 0500), and
/// its `fdinfo` and mount table `CAP_SYS_PTRACE` (ptrace-mode checks): without them such processes are skipped, as
/// are processes that end during the scan. The caller itself is never listed.
public enum ProcessScan {
    /// What a scan found: for each file, its openers; `complete` when every process was looked at.
    public struct Result: Sendable, Hashable, Codable {
        public var openers: [[NodeOpener]]
        public var complete: Bool

        public init(openers: [[NodeOpener]], complete: Bool) {
            self.openers = openers
            self.complete = complete
        }
    }

    /// How long a scan may take before it stops.
    public static let defaultTimeLimit: Duration = .seconds(2)

    /// The openers of each of `files`, in one pass over `/proc` (a claim names the openers of all its nodes at
    /// once: one scan, not one per node).
    ///
    /// - Parameter excluding: processes not to list besides this one (the scanner's client, whose own descriptor of
    ///   the node is how it named the node).
    public static func openers(
        ofEach files: [FileStatus], excluding: Set<Int32> = [], timeLimit: Duration = defaultTimeLimit
    ) -> Result {
        var found = [[NodeOpener]](repeating: [], count: files.count)
        guard !files.isEmpty, let proc = try? DirectoryDescriptor.open("/proc") else {  // try?: no /proc, none found
            return Result(openers: found, complete: files.isEmpty)
        }
        defer { proc.close() }
        let clock = ContinuousClock()
        let deadline = clock.now + timeLimit
        let own = getpid()
        let pids = ((try? proc.names(limit: 1 << 22).names) ?? []).compactMap { Int32($0) }.filter {
            $0 != own && !excluding.contains($0)
        }
        let fileSystems = Set(files.map(\.fileSystem))
        // The mounts of the files' file systems in every mount namespace there is (this one, and each process's, the
        // excluded ones' too): a mount id is the kernel's, one for all namespaces, and a descriptor passed from one
        // namespace to another (SCM_RIGHTS: accmond's Open, into a sandbox) names the mount it was opened through,
        // which the receiver's namespace may not have. Looking only at the receiver's own mounts missed such an
        // opener, and a broken claim left its descriptor uncut.
        var mounts = MountTables()
        var wanted = mounts.mounts(of: fileSystems, seenBy: own)
        for pid in pids + excluding.sorted() {
            guard clock.now < deadline else { return Result(openers: found, complete: false) }
            wanted.formUnion(mounts.mounts(of: fileSystems, seenBy: pid))
        }
        guard !wanted.isEmpty else { return Result(openers: found, complete: true) }
        for pid in pids.sorted() {
            guard clock.now < deadline else { return Result(openers: found, complete: false) }
            let opened = filesOpen(of: files, pid: pid, onMounts: wanted)
            guard !opened.isEmpty, let uid = realUID(of: pid) else { continue }  // none, or ended meanwhile
            let opener = NodeOpener(pid: pid, uid: uid, command: command(of: pid))
            for index in opened { found[index].append(opener) }
        }
        return Result(openers: found, complete: true)
    }

    /// The indices of the `files` that process `pid` has open, looking only at its descriptors on `mounts`.
    private static func filesOpen(of files: [FileStatus], pid: Int32, onMounts mounts: Set<Int>) -> Set<Int> {
        guard let descriptors = try? DirectoryDescriptor.open("/proc/\(pid)/fd") else { return [] }  // try?: skipped
        defer { descriptors.close() }
        guard let names = try? descriptors.names(limit: 1 << 20).names else { return [] }  // try?: skipped
        var opened: Set<Int> = []
        for name in names {
            guard let mount = mountID(pid: pid, descriptor: name), mounts.contains(mount),
                let status = try? identityWithoutSync(name, in: descriptors.descriptor)  // try?: closed meanwhile
            else { continue }
            for (index, file) in files.enumerated() where !opened.contains(index) {
                if file.kind == .characterDevice {
                    if status.kind == .characterDevice && status.deviceNumber == file.deviceNumber { opened.insert(index) }
                } else if status.isSameFile(as: file) {
                    opened.insert(index)
                }
            }
            if opened.count == files.count { break }
        }
        return opened
    }

    /// The `mnt_id:` of `/proc/PID/fdinfo/N`.
    private static func mountID(pid: Int32, descriptor: String) -> Int? {
        guard let bytes = try? AtomicFile.read("/proc/\(pid)/fdinfo/\(descriptor)", limit: 1 << 16) ?? nil else {
            return nil  // try?: closed meanwhile, or not ours to read
        }
        return field("mnt_id:", in: bytes).flatMap { Int($0) }
    }

    /// The first word after `name` at the start of a line of `bytes`.
    static func field(_ name: String, in bytes: [UInt8]) -> Substring? {
        let text = String(decoding: bytes, as: UTF8.self)
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix(name) }) else { return nil }
        return line.dropFirst(name.count).split(whereSeparator: { $0 == "\t" || $0 == " " }).first
    }

    /// The real uid from `/proc/PID/status` (`Uid:` real, effective, saved, file-system).
    private static func realUID(of pid: Int32) -> UInt32? {
        guard let bytes = try? AtomicFile.read("/proc/\(pid)/status", limit: 1 << 16) ?? nil else { return nil }  // try?: gone
        return field("Uid:", in: bytes).flatMap { UInt32($0) }
    }

    private static func command(of pid: Int32) -> String {
        let bytes = (try? AtomicFile.read("/proc/\(pid)/comm", limit: 4096)) ?? nil  // try?: unknown command
        var text = String(decoding: bytes ?? [], as: UTF8.self)
        if text.hasSuffix("\n") { text.removeLast() }
        return text
    }
}

/// The mount tables of the processes a scan meets, read once per mount namespace (`/proc/PID/ns/mnt` names it):
/// each mount's id and the device number of its file system (`/proc/PID/mountinfo`, fields 1 and 3).
struct MountTables {
    private var byNamespace: [String: [Int: UInt64]] = [:]

    /// The ids of the mounts, as `pid` sees them, whose file system is one of `fileSystems`.
    mutating func mounts(of fileSystems: Set<UInt64>, seenBy pid: Int32) -> Set<Int> {
        var link = [CChar](repeating: 0, count: 64)
        let count = readlink("/proc/\(pid)/ns/mnt", &link, link.count - 1)
        guard count > 0 else { return [] }  // ended, or not ours to look at
        let namespace = String(decoding: link[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        if byNamespace[namespace] == nil {
            let bytes = (try? AtomicFile.read("/proc/\(pid)/mountinfo", limit: 16 << 20)) ?? nil  // try?: none seen
            byNamespace[namespace] = Self.parse(bytes ?? [])
        }
        return Set((byNamespace[namespace] ?? [:]).filter { fileSystems.contains($0.value) }.keys)
    }

    /// `36 35 98:0 /mnt1 /mnt2 rw - ext3 /dev/root rw`: mount id 36, file system 98:0.
    static func parse(_ bytes: [UInt8]) -> [Int: UInt64] {
        var table: [Int: UInt64] = [:]
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") {
            let fields = line.split(separator: " ", maxSplits: 3)
            guard fields.count >= 3, let id = Int(fields[0]) else { continue }
            let numbers = fields[2].split(separator: ":")
            guard numbers.count == 2, let major = UInt64(numbers[0]), let minor = UInt64(numbers[1]) else { continue }
            table[id] = deviceNumber(major: major, minor: minor)
        }
        return table
    }

    /// glibc's `makedev`.
    static func deviceNumber(major: UInt64, minor: UInt64) -> UInt64 {
        ((major & 0xFFFF_F000) << 32) | ((major & 0xFFF) << 8) | ((minor & 0xFFFF_FF00) << 12) | (minor & 0xFF)
    }
}
