//! Input files: only a regular file is read, and a text file only up to a size. A FIFO
//! would block `open(2)` until some writer came (and a blocked `open` does not see
//! Ctrl-C), a device such as `/dev/zero` never ends, and a directory is no file. So the
//! type is checked before the file is opened, the file is opened without blocking
//! (`O_NONBLOCK`, which a regular file ignores) and checked again on the open descriptor,
//! which is what is read (a path swapped for a FIFO in between is caught there). A symlink
//! is followed to what it names.

use std::fs::{File, Metadata};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

use crate::error::{Error, Result};

/// The largest text input (a scenario, a profile, a chain's node file): none comes near
/// it, and a wrong file must not fill memory.
pub const MAX_TEXT_BYTES: u64 = 16 << 20;

fn refused(path: &Path, why: String) -> Error {
    Error::Io { path: path.display().to_string(), source: std::io::Error::new(std::io::ErrorKind::InvalidInput, why) }
}

/// What a file that is not a regular file is, in words.
fn kind(meta: &Metadata) -> Option<&'static str> {
    let t = meta.file_type();
    if t.is_file() {
        None
    } else if t.is_dir() {
        Some("a directory")
    } else if t.is_fifo() {
        Some("a FIFO")
    } else if t.is_socket() {
        Some("a socket")
    } else if t.is_char_device() || t.is_block_device() {
        Some("a device")
    } else {
        Some("not a regular file")
    }
}

fn check(path: &Path, meta: &Metadata) -> Result<()> {
    match kind(meta) {
        None => Ok(()),
        Some(k) => Err(refused(path, format!("it is {k}, expected a regular file"))),
    }
}

/// Why `path` cannot be read as a file, in words ("not found: PATH", "it is a FIFO,
/// expected a regular file"), or None when it is a regular file (a symlink is followed).
pub fn why_not_regular(path: &Path) -> Option<String> {
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some(format!("not found: {}", path.display())),
        Err(e) => Some(format!("{}: {e}", path.display())),
        Ok(meta) => kind(&meta).map(|k| format!("{}: it is {k}, expected a regular file", path.display())),
    }
}

/// Open `path` for reading if it is a regular file (following a symlink); an error naming
/// the file and what it is otherwise, without ever blocking.
pub fn open_regular(path: &Path) -> Result<File> {
    let io = |e: std::io::Error| Error::Io { path: path.display().to_string(), source: e };
    check(path, &std::fs::metadata(path).map_err(io)?)?;
    let file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path).map_err(io)?;
    check(path, &file.metadata().map_err(io)?)?;
    Ok(file)
}

/// The UTF-8 text of the regular file `path`, at most [`MAX_TEXT_BYTES`] long.
pub fn read_text(path: &Path) -> Result<String> {
    let io = |e: std::io::Error| Error::Io { path: path.display().to_string(), source: e };
    let file = open_regular(path)?;
    let size = file.metadata().map_err(io)?.len();
    if size > MAX_TEXT_BYTES {
        return Err(refused(path, format!("{size} bytes, expected at most {MAX_TEXT_BYTES} (16 MiB)")));
    }
    let mut bytes = Vec::with_capacity(size as usize);
    file.take(MAX_TEXT_BYTES + 1).read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() as u64 > MAX_TEXT_BYTES {
        return Err(refused(path, format!("more than {MAX_TEXT_BYTES} bytes (16 MiB)")));
    }
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        refused(path, format!("not UTF-8 at byte {at}; expected UTF-8 text"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(r: Result<impl std::fmt::Debug>) -> String {
        r.unwrap_err().to_string()
    }

    #[test]
    fn a_regular_file_is_read_and_anything_else_is_refused_without_blocking() {
        let dir = std::env::temp_dir().join(format!("pktsim-input-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("a.toml");
        std::fs::write(&file, "x = 1\n").unwrap();
        assert_eq!(read_text(&file).unwrap(), "x = 1\n");
        // A symlink is followed.
        let link = dir.join("link.toml");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert_eq!(read_text(&link).unwrap(), "x = 1\n");
        // A FIFO with no writer: refused at once (opening it would block for good).
        let fifo = dir.join("fifo");
        let _ = std::fs::remove_file(&fifo);
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(message(read_text(&fifo)).contains("it is a FIFO, expected a regular file"));
        assert!(message(open_regular(&fifo)).contains("a FIFO"));
        assert!(message(read_text(&dir)).contains("it is a directory"));
        assert!(message(read_text(Path::new("/dev/zero"))).contains("it is a device"));
        std::fs::write(&file, [b'a', 0xff, b'b']).unwrap();
        assert!(message(read_text(&file)).contains("not UTF-8 at byte 1"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
