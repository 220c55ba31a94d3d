import AccmonSys
import Glibc

/// Finds the processes that have a file open, from `/proc`: every `/proc/PID/fd/N` whose file is the same (for a
/// character device, the same device number, whichever node it was opened through; otherwise the same inode).
///
/// Reading another user's `/proc/PID/fd` takes `CAP_DAC_READ_SEARCH` (the directory is its owner's, mode 0500) and
/// `CAP_SYS_PTRACE` (following its links is a ptrace-mode check): without them such processes are skipped, as are
/// processes that end during the scan. The caller itself is never listed (its `O_PATH` descriptor is on the file).
enum ProcessScan {
    static func openers(of file: FileStatus) -> [NodeOpener] {
        openers(ofEach: [file])[0]
    }

    /// The openers of each of `files`, in one pass over `/proc` (a claim names the openers of all its nodes at
    /// once: one scan, not one per node).
    static func openers(ofEach files: [FileStatus]) -> [[NodeOpener]] {
        var found = [[NodeOpener]](repeating: [], count: files.count)
        guard !files.isEmpty, let proc = try? DirectoryDescriptor.open("/proc") else { return found }  // try?: none
        defer { proc.close() }
        let own = getpid()
        let pids = ((try? proc.names(limit: 1 << 22).names) ?? []).compactMap { Int32($0) }.filter { $0 != own }
        for pid in pids.sorted() {
            let opened = filesOpen(of: files, pid: pid)
            guard !opened.isEmpty, let uid = realUID(of: pid) else { continue }  // none, or ended meanwhile
            let opener = NodeOpener(pid: pid, uid: uid, command: command(of: pid))
            for index in opened { found[index].append(opener) }
        }
        return found
    }

    /// The indices of the `files` that process `pid` has open.
    private static func filesOpen(of files: [FileStatus], pid: Int32) -> Set<Int> {
        guard let descriptors = try? DirectoryDescriptor.open("/proc/\(pid)/fd") else { return [] }  // try?: skipped
        defer { descriptors.close() }
        guard let names = try? descriptors.names(limit: 1 << 20).names else { return [] }  // try?: skipped
        var opened: Set<Int> = []
        for name in names {
            guard let status = try? fileStatus(name, in: descriptors.descriptor, following: true) else { continue }
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

    /// The real uid from `/proc/PID/status` (`Uid:` real, effective, saved, file-system).
    private static func realUID(of pid: Int32) -> UInt32? {
        guard let bytes = try? AtomicFile.read("/proc/\(pid)/status", limit: 1 << 16) else { return nil }  // try?: gone
        let text = String(decoding: bytes, as: UTF8.self)
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("Uid:") }) else { return nil }
        return line.split(whereSeparator: { $0 == "\t" || $0 == " " }).dropFirst().first.flatMap { UInt32($0) }
    }

    private static func command(of pid: Int32) -> String {
        let bytes = (try? AtomicFile.read("/proc/\(pid)/comm", limit: 4096)) ?? nil  // try?: unknown command
        return String(decoding: bytes ?? [], as: UTF8.self).trimmingSuffix("\n")
    }
}

extension String {
    fileprivate func trimmingSuffix(_ suffix: String) -> String {
        hasSuffix(suffix) ? String(dropLast(suffix.count)) : self
    }
}
