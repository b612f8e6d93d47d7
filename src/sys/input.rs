//! Reading a file the user named (a plan file, a key file) with a bound: a device
//! (`/dev/zero`, `/dev/urandom`), a folder or a socket is refused before anything is read, a
//! regular file over the bound is refused by its size, and anything else (a pipe, such as
//! `--psk-file <(…)`, or a /proc file that reports size 0) is read up to one byte past the
//! bound, so no input can make the program read until memory runs out.

use std::io::Read;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;

/// Why a bounded read failed; `Display` is the reason, the caller names the flag and path.
#[derive(Debug)]
pub enum InputError {
    /// It is not a file or a pipe (a folder, a character or block device, a socket).
    NotAFile(&'static str),
    /// It holds more than the bound.
    TooLarge {
        limit: u64,
        size: Option<u64>,
    },
    Io(std::io::Error),
}

impl std::fmt::Display for InputError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InputError::NotAFile(kind) => write!(f, "it is {kind}, not a file (give a regular file)"),
            InputError::TooLarge {
                limit,
                size: Some(size),
            } => {
                write!(f, "too large: {size} bytes (at most {limit} bytes accepted)")
            }
            InputError::TooLarge { limit, size: None } => {
                write!(f, "too large: more than {limit} bytes (at most {limit} bytes accepted)")
            }
            InputError::Io(e) => write!(f, "cannot read it: {e}"),
        }
    }
}

impl std::error::Error for InputError {}

/// The bytes of `path`, at most `limit` of them (see the module comment).
pub fn read_bounded(path: &Path, limit: u64) -> Result<Vec<u8>, InputError> {
    let meta = std::fs::metadata(path).map_err(InputError::Io)?;
    let kind = meta.file_type();
    let refused = if kind.is_dir() {
        Some("a folder")
    } else if kind.is_char_device() {
        Some("a character device")
    } else if kind.is_block_device() {
        Some("a block device")
    } else if kind.is_socket() {
        Some("a socket")
    } else {
        None
    };
    if let Some(what) = refused {
        return Err(InputError::NotAFile(what));
    }
    if kind.is_file() && meta.len() > limit {
        return Err(InputError::TooLarge {
            limit,
            size: Some(meta.len()),
        });
    }
    let file = std::fs::File::open(path).map_err(InputError::Io)?;
    let mut bytes = Vec::new();
    file.take(limit + 1).read_to_end(&mut bytes).map_err(InputError::Io)?;
    if bytes.len() as u64 > limit {
        return Err(InputError::TooLarge { limit, size: None });
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_and_large_files_are_refused_small_files_and_pipes_are_read() {
        for device in ["/dev/zero", "/dev/urandom", "/dev/null"] {
            let e = read_bounded(Path::new(device), 64).unwrap_err();
            assert!(e.to_string().contains("character device"), "{device}: {e}");
        }
        assert!(read_bounded(Path::new("/"), 64)
            .unwrap_err()
            .to_string()
            .contains("folder"));
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big");
        std::fs::write(&big, vec![b'x'; 65]).unwrap();
        let e = read_bounded(&big, 64).unwrap_err();
        assert_eq!(e.to_string(), "too large: 65 bytes (at most 64 bytes accepted)");
        std::fs::write(&big, vec![b'x'; 64]).unwrap();
        assert_eq!(read_bounded(&big, 64).unwrap().len(), 64);
        // A file whose size says 0 but that holds more (as /proc files do) is still bounded.
        let e = read_bounded(Path::new("/proc/self/maps"), 16).unwrap_err();
        assert!(e.to_string().starts_with("too large: more than 16 bytes"), "{e}");
    }
}
