//! Whether the workers' user can reach the app's files.
//!
//! Checked before any worker starts (and again at every reload), so that a
//! user who cannot read the worker script is a clear error naming the
//! directory or file in the way, not workers that fail to boot with
//! "Permission denied" over and over.
//!
//! The check follows the kernel's rules for a process with the workers'
//! credentials (their uid, their group and supplementary groups): mode
//! bits, or the POSIX ACL where a file has one.

use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

use crate::WorkerUser;

/// What the workers must be able to do with a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Need {
    /// Read a file (and search every directory on the way to it).
    Read,
    /// Enter a directory (and every directory on the way to it).
    Search,
}

const READ: u16 = 4;
const SEARCH: u16 = 1;

/// Checks that `user` can do `need` with `path`, an absolute path without
/// symlinks. The error says which directory or file stops it, and why.
pub(crate) fn check(user: &WorkerUser, path: &Path, need: Need) -> Result<(), String> {
    let mut on_the_way: Vec<&Path> = path.ancestors().skip(1).collect();
    on_the_way.reverse();
    for dir in on_the_way {
        if !allows(user, dir, SEARCH) {
            return Err(denied(user, dir, "enter the directory", "x"));
        }
    }
    let (want, what, bit) = match need {
        Need::Read => (READ, "read", "r"),
        Need::Search => (SEARCH, "enter the directory", "x"),
    };
    if !allows(user, path, want) {
        return Err(denied(user, path, what, bit));
    }
    Ok(())
}

fn denied(user: &WorkerUser, path: &Path, what: &str, bit: &str) -> String {
    let how = std::fs::metadata(path).map_or_else(
        |e| format!(": {e}"),
        |m| {
            format!(
                " (owner {}:{}, mode {:04o})",
                user_name(m.uid()),
                group_name(m.gid()),
                m.mode() & 0o7777
            )
        },
    );
    format!(
        "{name} (uid {}, gid {}) cannot {what} {path}{how}; let {name} in (e.g. `chmod o+{bit} \
         {path}`, or through a group {name} is in), or move the app where it can reach it",
        user.uid,
        user.gid,
        name = user.name,
        path = path.display(),
    )
}

/// Whether `user` has the `want` permission bits on `path`. What cannot be
/// told (an unreadable ACL) counts as allowed: the worker will find out.
fn allows(user: &WorkerUser, path: &Path, want: u16) -> bool {
    let Ok(meta) = std::fs::metadata(path) else {
        // Cannot be looked at even by Hearth: the worker will say why.
        return true;
    };
    if user.uid == 0 {
        return true;
    }
    let mut buf = [0u8; 1024];
    match rustix::fs::getxattr(path, "system.posix_acl_access", &mut buf[..]) {
        Ok(len) => acl_allows(&buf[..len], user, meta.uid(), meta.gid(), want).unwrap_or(true),
        Err(rustix::io::Errno::NODATA | rustix::io::Errno::NOTSUP) => {
            mode_allows(meta.mode(), user, meta.uid(), meta.gid(), want)
        }
        Err(_) => true,
    }
}

fn in_group(user: &WorkerUser, gid: u32) -> bool {
    user.gid == gid || user.groups.contains(&gid)
}

fn mode_allows(mode: u32, user: &WorkerUser, owner: u32, group: u32, want: u16) -> bool {
    let bits = if user.uid == owner {
        mode >> 6
    } else if in_group(user, group) {
        mode >> 3
    } else {
        mode
    };
    (bits as u16) & want == want
}

const ACL_USER_OBJ: u16 = 0x01;
const ACL_USER: u16 = 0x02;
const ACL_GROUP_OBJ: u16 = 0x04;
const ACL_GROUP: u16 = 0x08;
const ACL_MASK: u16 = 0x10;
const ACL_OTHER: u16 = 0x20;

/// The kernel's `posix_acl_permission()` over the `system.posix_acl_access`
/// attribute (version 2: a 4-byte header, then 8-byte entries of tag,
/// permissions and id, little-endian). None if it cannot be read.
fn acl_allows(xattr: &[u8], user: &WorkerUser, owner: u32, group: u32, want: u16) -> Option<bool> {
    let body = xattr.get(4..)?;
    if xattr.get(..4)? != 2u32.to_le_bytes() || body.len() % 8 != 0 {
        return None;
    }
    let entries: Vec<(u16, u16, u32)> = body
        .chunks_exact(8)
        .map(|e| {
            (
                u16::from_le_bytes([e[0], e[1]]),
                u16::from_le_bytes([e[2], e[3]]),
                u32::from_le_bytes([e[4], e[5], e[6], e[7]]),
            )
        })
        .collect();
    let mask = entries
        .iter()
        .find(|(tag, _, _)| *tag == ACL_MASK)
        .map_or(7, |(_, perm, _)| *perm);
    let mut found = false;
    for &(tag, perm, id) in &entries {
        match tag {
            ACL_USER_OBJ if user.uid == owner => return Some(perm & want == want),
            ACL_USER if user.uid == id => return Some(perm & mask & want == want),
            ACL_GROUP_OBJ | ACL_GROUP => {
                let gid = if tag == ACL_GROUP_OBJ { group } else { id };
                if in_group(user, gid) {
                    found = true;
                    if perm & want == want {
                        return Some(perm & mask & want == want);
                    }
                }
            }
            ACL_OTHER => return Some(!found && perm & want == want),
            ACL_USER_OBJ | ACL_USER | ACL_MASK => {}
            _ => return None,
        }
    }
    None
}

/// A name from `/etc/passwd` or `/etc/group` (the third field is the id),
/// else the number.
fn name_in(file: &str, id: u32) -> String {
    std::fs::read_to_string(file)
        .ok()
        .and_then(|text| {
            text.lines().find_map(|line| {
                let fields: Vec<&str> = line.split(':').collect();
                (fields.len() > 2 && fields[2].parse() == Ok(id)).then(|| fields[0].to_owned())
            })
        })
        .unwrap_or_else(|| id.to_string())
}

fn user_name(uid: u32) -> String {
    name_in("/etc/passwd", uid)
}

fn group_name(gid: u32) -> String {
    name_in("/etc/group", gid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    fn user(uid: u32, gid: u32, groups: &[u32]) -> WorkerUser {
        WorkerUser {
            name: "app".into(),
            uid,
            gid,
            groups: groups.to_vec(),
            account: None,
        }
    }

    #[test]
    fn mode_bits_are_read_for_the_owner_the_groups_or_everyone_else() {
        let (owner, group) = (1000, 100);
        // rwx r-x ---
        let mode = 0o750;
        assert!(mode_allows(mode, &user(1000, 1, &[]), owner, group, READ));
        assert!(mode_allows(
            mode,
            &user(2000, 100, &[]),
            owner,
            group,
            SEARCH
        ));
        assert!(mode_allows(
            mode,
            &user(2000, 1, &[7, 100]),
            owner,
            group,
            READ
        ));
        assert!(!mode_allows(
            mode,
            &user(2000, 1, &[7]),
            owner,
            group,
            SEARCH
        ));
        // The owner's bits count for the owner, even when the group's would allow more.
        assert!(!mode_allows(
            0o070,
            &user(1000, 100, &[]),
            owner,
            group,
            READ
        ));
    }

    fn acl(entries: &[(u16, u16, u32)]) -> Vec<u8> {
        let mut out = 2u32.to_le_bytes().to_vec();
        for (tag, perm, id) in entries {
            out.extend_from_slice(&tag.to_le_bytes());
            out.extend_from_slice(&perm.to_le_bytes());
            out.extend_from_slice(&id.to_le_bytes());
        }
        out
    }

    #[test]
    fn an_acl_grants_and_masks_as_the_kernel_does() {
        // u::rwx, u:33:r-x, g::---, g:50:r--, m::r-x, o::---
        let xattr = acl(&[
            (ACL_USER_OBJ, 7, u32::MAX),
            (ACL_USER, 5, 33),
            (ACL_GROUP_OBJ, 0, u32::MAX),
            (ACL_GROUP, 4, 50),
            (ACL_MASK, 5, u32::MAX),
            (ACL_OTHER, 0, u32::MAX),
        ]);
        let (owner, group) = (0, 0);
        assert_eq!(
            acl_allows(&xattr, &user(33, 33, &[]), owner, group, SEARCH),
            Some(true)
        );
        assert_eq!(
            acl_allows(&xattr, &user(34, 34, &[50]), owner, group, READ),
            Some(true)
        );
        assert_eq!(
            acl_allows(&xattr, &user(34, 34, &[50]), owner, group, SEARCH),
            Some(false)
        );
        assert_eq!(
            acl_allows(&xattr, &user(35, 35, &[]), owner, group, READ),
            Some(false)
        );
        // The mask limits named users.
        let masked = acl(&[
            (ACL_USER_OBJ, 7, u32::MAX),
            (ACL_USER, 7, 33),
            (ACL_GROUP_OBJ, 0, u32::MAX),
            (ACL_MASK, 4, u32::MAX),
            (ACL_OTHER, 0, u32::MAX),
        ]);
        assert_eq!(
            acl_allows(&masked, &user(33, 33, &[]), owner, group, SEARCH),
            Some(false)
        );
        assert_eq!(
            acl_allows(&[1, 0, 0, 0], &user(33, 33, &[]), 0, 0, READ),
            None
        );
    }

    #[test]
    fn the_error_names_the_directory_in_the_way() {
        let dir = tempfile::tempdir().expect("tempdir");
        let base = dir.path().canonicalize().expect("canonical");
        std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let closed = base.join("closed");
        std::fs::create_dir(&closed).expect("mkdir");
        std::fs::write(closed.join("worker.php"), "<?php").expect("write");
        std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        let meta = std::fs::metadata(&closed).expect("stat");
        // Someone who is neither the owner nor in the group.
        let stranger = user(meta.uid() + 1, meta.gid() + 1, &[]);
        let why = check(&stranger, &closed.join("worker.php"), Need::Read).expect_err("denied");
        assert!(
            why.contains(&format!("cannot enter the directory {}", closed.display())),
            "{why}"
        );
        assert!(why.contains("mode 0700"), "{why}");
        // In the group, with the group let in: fine.
        std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o750)).expect("chmod");
        let member = user(meta.uid() + 1, meta.gid() + 1, &[meta.gid()]);
        check(&member, &closed.join("worker.php"), Need::Read).expect("allowed");
        check(&member, &closed, Need::Search).expect("allowed");
    }
}
