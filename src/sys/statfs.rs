//! Which file system holds a path (statfs f_type), and what backs it: memory, a disk, the
//! network, an overlay over other file systems, or a FUSE daemon.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// What the bytes of a file system live on, as far as its type tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backing {
    /// tmpfs, ramfs: the files are pages in memory; there is no disk below.
    Memory,
    /// A block-device file system (ext4, xfs, btrfs, ...).
    Disk,
    /// NFS, SMB/CIFS, 9p: reads cross to a server.
    Network,
    /// overlayfs (container roots): reads pass through to the upper or lower file system.
    Overlay,
    /// FUSE (virtiofs, sshfs, ...): a daemon decides.
    Fuse,
    /// A type iopath does not know.
    Unknown,
}

/// A file system type: the statfs magic, a name and what backs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsType {
    pub magic: u64,
    pub name: &'static str,
    pub backing: Backing,
}

/// Magic numbers from linux/magic.h (and zfs, which is out of tree).
const KNOWN: [(u64, &str, Backing); 18] = [
    (0x0102_1994, "tmpfs", Backing::Memory),
    (0x8584_58f6, "ramfs", Backing::Memory),
    (0x794c_7630, "overlayfs", Backing::Overlay),
    (0x6969, "nfs", Backing::Network),
    (0xff53_4d42, "cifs", Backing::Network),
    (0xfe53_4d42, "smb2", Backing::Network),
    (0x0102_1997, "9p", Backing::Network),
    (0x6573_5546, "fuse", Backing::Fuse),
    (0xef53, "ext2/ext3/ext4", Backing::Disk),
    (0x5846_5342, "xfs", Backing::Disk),
    (0x9123_683e, "btrfs", Backing::Disk),
    (0xf2f5_2010, "f2fs", Backing::Disk),
    (0x2fc1_2fc1, "zfs", Backing::Disk),
    (0xca45_1a4e, "bcachefs", Backing::Disk),
    (0x4d44, "vfat", Backing::Disk),
    (0x2011_bab0, "exfat", Backing::Disk),
    (0x3153_464a, "jfs", Backing::Disk),
    (0x5265_4973, "reiserfs", Backing::Disk),
];

/// The type of the file system with this statfs magic.
pub fn classify(magic: u64) -> FsType {
    KNOWN.iter().find(|k| k.0 == magic).map_or(
        FsType {
            magic,
            name: "unknown",
            backing: Backing::Unknown,
        },
        |&(magic, name, backing)| FsType { magic, name, backing },
    )
}

/// The statfs f_type of the file system holding `path` (the magic is 32 bits; the kernel's
/// signed word is read as such).
pub fn fs_magic(path: &Path) -> io::Result<u64> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))?;
    // SAFETY: an all-zero statfs is plain memory for the kernel to fill.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: c is a NUL-terminated path alive for the call; st is a valid out-pointer.
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st.f_type as u64 & 0xffff_ffff)
}

/// The type of the file system holding `path`.
pub fn fs_type(path: &Path) -> io::Result<FsType> {
    fs_magic(path).map(classify)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_magics_are_named() {
        assert_eq!(classify(0x0102_1994).name, "tmpfs");
        assert_eq!(classify(0x0102_1994).backing, Backing::Memory);
        assert_eq!(classify(0xef53).backing, Backing::Disk);
        assert_eq!(classify(0x794c_7630).backing, Backing::Overlay);
        assert_eq!(classify(0x6969).backing, Backing::Network);
        assert_eq!(classify(0x1234).backing, Backing::Unknown);
    }

    #[test]
    fn proc_is_procfs_and_missing_paths_fail() {
        assert_eq!(fs_magic(Path::new("/proc")).unwrap(), 0x9fa0);
        assert!(fs_magic(Path::new("/nonexistent/iopath")).is_err());
    }
}
