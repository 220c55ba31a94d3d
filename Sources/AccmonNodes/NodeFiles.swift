import AccmonSys
import Glibc

/// A node opened for an operation: the `O_PATH` descriptor every change goes through, its status when opened, and
/// its device as the policy's check saw it.
struct OpenedNode {
    var descriptor: PathDescriptor
    var status: FileStatus
    var device: NodeDevice?

    func close() { descriptor.close() }
}

extension NodeKeeper {
    /// Opens the node at `path` as the policy allows, or throws saying why not, having changed nothing: `path` must
    /// be a plain absolute path below the policy's directory (``NodePath``: no `.`, `..` or empty component, only the
    /// bytes udev uses in names), reached with no symbolic link on the way and none as the node itself (`openat2`,
    /// `O_PATH | O_NOFOLLOW`); the descriptor's `fstat` must show a type the policy takes; for real devices, the
    /// check must accept its device number (`checkingDevice`; a release of a node recorded when held does not ask
    /// udev again).
    func open(_ path: String, _ context: String, checkingDevice: Bool = true) throws(NodeError) -> OpenedNode {
        let relative: String
        do throws(NodePath.Refusal) {
            relative = try NodePath(path, below: policy.directory).relative
        } catch {
            throw NodeError(.refused, context, path, "\(error.reason): not touched")
        }
        let descriptor: PathDescriptor
        do throws(Errno) {
            descriptor = try PathDescriptor.open(relative, beneath: root, sameMount: isDevicePolicy)
        } catch {
            switch error.rawValue {
            case ENOENT, ENOTDIR: throw NodeError(.missing, context, path, "no such node")
            case ELOOP:
                throw NodeError(.refused, context, path, "a symbolic link on the way or as the node: not followed")
            case EXDEV:
                throw NodeError(
                    .refused, context, path, "leaves \(policy.directory) or crosses a mount point: not touched")
            default: throw NodeError(.failed, context, path, "openat2: \(error)")
            }
        }
        do throws(NodeError) {
            let status: FileStatus
            do throws(Errno) {
                status = try descriptor.status()
            } catch {
                throw NodeError(.failed, context, path, "fstat: \(error)")
            }
            switch (status.kind, isDevicePolicy) {
            case (.characterDevice, _), (.regular, false): break
            default:
                let wanted = isDevicePolicy ? "a character device" : "a character device or a regular file"
                throw NodeError(.refused, context, path, "not \(wanted) (\(status.kind)): not touched")
            }
            var device: NodeDevice?
            if checkingDevice, case .devices(_, let directory) = policy {
                do throws(NodeError) {
                    device = try directory.device(ofCharacterDevice: status.deviceNumber)
                } catch {
                    throw NodeError(
                        error.code, context, path,
                        "device \(status.deviceMajor):\(status.deviceMinor): \(error.reason): not touched")
                }
            }
            return OpenedNode(descriptor: descriptor, status: status, device: device)
        } catch {
            descriptor.close()
            throw error
        }
    }

    var isDevicePolicy: Bool {
        if case .devices = policy { return true }
        return false
    }

    /// The node's state: its `fstat` and its `system.posix_acl_access` attribute.
    func state(of node: OpenedNode, _ context: String, _ path: String) throws(NodeError) -> NodeState {
        let bytes: [UInt8]?
        do throws(Errno) {
            bytes = try node.descriptor.extendedAttribute(PosixACLAttribute.name)
        } catch  where error.rawValue == EOPNOTSUPP {
            bytes = nil  // a file system without POSIX ACLs: the mode bits are the whole state
        } catch {
            throw NodeError(.failed, context, path, "getxattr \(PosixACLAttribute.name): \(error)")
        }
        var acl: ExtendedACL?
        if let bytes {
            do throws(PosixACLAttribute.FormatError) {
                acl = try PosixACLAttribute.decode(bytes).acl
            } catch {
                throw NodeError(.failed, context, path, "\(error)")
            }
        }
        let status = node.status
        return NodeState(owner: status.owner, group: status.group, mode: UInt16(status.permissions), acl: acl)
    }

    /// Sets the node to `target` through its descriptor, then reads it back: owner and group first (which clears
    /// set-id bits), then the ACL (or its removal: no ACL is left where `target` has none), then the mode (which
    /// also sets the ACL's owner, mask and other entries to the same bits).
    ///
    /// - Throws: ``NodeError`` naming the call that failed, or the state found when it did not take.
    func apply(_ target: NodeState, to node: inout OpenedNode, _ context: String, _ path: String) throws(NodeError) {
        let descriptor = node.descriptor
        func fail(_ call: String, _ error: Errno) -> NodeError {
            let code: NodeError.Code = error.rawValue == EPERM || error.rawValue == EACCES ? .notPermitted : .failed
            return NodeError(code, context, path, "\(call): \(error)")
        }
        do throws(Errno) {
            try descriptor.changeOwner(to: target.owner, group: target.group)
        } catch {
            throw fail("chown to \(target.owner):\(target.group)", error)
        }
        do throws(Errno) {
            if let acl = target.acl {
                try descriptor.setExtendedAttribute(
                    PosixACLAttribute.name, to: PosixACLAttribute.encode(mode: target.mode, acl))
            } else {
                try descriptor.removeExtendedAttribute(PosixACLAttribute.name)
            }
        } catch  where target.acl == nil && error.rawValue == EOPNOTSUPP {
            // No POSIX ACLs on this file system: none to remove.
        } catch  where error.rawValue == EOPNOTSUPP {
            throw NodeError(.noACLs, context, path, "set the ACL \(target): the file system has no POSIX ACLs")
        } catch {
            throw fail(target.acl == nil ? "remove the ACL" : "set the ACL \(target)", error)
        }
        do throws(Errno) {
            try descriptor.changeMode(to: mode_t(target.mode))
        } catch {
            throw fail("chmod \(target.octalMode)", error)
        }
        do throws(Errno) {
            node.status = try descriptor.status()
        } catch {
            throw NodeError(.failed, context, path, "fstat: \(error)")
        }
        let found = try state(of: node, context, path)
        guard found == target else {
            throw NodeError(.failed, context, path, "set to \(target), but found \(found)")
        }
    }

    /// Writes `value` to the sysfs attribute `attribute` of the device at `syspath` (a path below `/sys/`).
    func writeAttribute(_ value: String, _ attribute: String, of syspath: String) throws(Errno) {
        let components = syspath.split(separator: "/", omittingEmptySubsequences: false)
        guard syspath.hasPrefix("/sys/"), !components.dropFirst().contains(where: { $0.isEmpty || $0 == ".." }) else {
            throw Errno(rawValue: EINVAL)
        }
        try attributeWriter("\(syspath)/\(attribute)", value)
    }
}
