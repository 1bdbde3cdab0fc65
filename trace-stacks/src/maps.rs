//! `/proc/PID/maps`: the executable mappings of a process.

use crate::error::Error;

/// One executable line of `/proc/PID/maps`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MapsEntry {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// Offset in the mapped file of `start` (page offset for anonymous mappings).
    pub offset: u64,
    /// Major number of the mapped file's device.
    pub dev_major: u32,
    /// Minor number of the mapped file's device.
    pub dev_minor: u32,
    /// Inode of the mapped file; 0 for anonymous and pseudo mappings.
    pub inode: u64,
    /// The path or pseudo name (`[vdso]`, `[anon:name]`), as the kernel shows it (a file
    /// deleted since it was mapped ends in ` (deleted)`); empty for anonymous memory.
    pub path: String,
}

/// What a mapping maps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A file (including memory files and deleted files).
    File,
    /// The vDSO.
    Vdso,
    /// Anonymous memory, or another pseudo mapping (`[vsyscall]`, `[anon:name]`).
    Other,
}

impl MapsEntry {
    /// What this mapping maps.
    pub(crate) fn kind(&self) -> Kind {
        if self.inode != 0 && self.path.starts_with('/') {
            Kind::File
        } else if self.path == "[vdso]" {
            Kind::Vdso
        } else {
            Kind::Other
        }
    }

    /// The path without the ` (deleted)` the kernel appends to a file deleted since it was mapped.
    pub(crate) fn live_path(&self) -> Option<&str> {
        (!self.path.ends_with(" (deleted)")).then_some(self.path.as_str())
    }
}

/// Parses one line of `/proc/PID/maps`; `None` for a line that is not executable or not
/// understood.
pub(crate) fn parse_line(line: &str) -> Option<MapsEntry> {
    // 7f3c1c028000-7f3c1c1bd000 r-xp 00028000 08:01 1317  /usr/lib/x86_64-linux-gnu/libc.so.6
    let (range, rest) = line.split_once(' ')?;
    let (perms, rest) = rest.split_once(' ')?;
    let (offset, rest) = rest.split_once(' ')?;
    let (dev, rest) = rest.split_once(' ')?;
    let (inode, path) = rest.split_once(' ').unwrap_or((rest, ""));
    if perms.as_bytes().get(2) != Some(&b'x') {
        return None;
    }
    let (start, end) = range.split_once('-')?;
    let (major, minor) = dev.split_once(':')?;
    let entry = MapsEntry {
        start: u64::from_str_radix(start, 16).ok()?,
        end: u64::from_str_radix(end, 16).ok()?,
        offset: u64::from_str_radix(offset, 16).ok()?,
        dev_major: u32::from_str_radix(major, 16).ok()?,
        dev_minor: u32::from_str_radix(minor, 16).ok()?,
        inode: inode.parse().ok()?,
        path: path.trim_start().to_owned(),
    };
    (entry.start < entry.end).then_some(entry)
}

/// The executable mappings of process `pid`, sorted by address.
pub(crate) fn read(pid: u32) -> Result<Vec<MapsEntry>, Error> {
    let path = format!("/proc/{pid}/maps");
    let bytes = std::fs::read(&path).map_err(|e| Error::io(path, e))?;
    let text = String::from_utf8_lossy(&bytes);
    let mut entries: Vec<MapsEntry> = text.lines().filter_map(parse_line).collect();
    entries.sort_unstable_by_key(|e| e.start);
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_file_anonymous_and_pseudo_lines() {
        let libc = parse_line(
            "7f3c1c028000-7f3c1c1bd000 r-xp 00028000 08:01 1317                       /usr/lib/x86_64-linux-gnu/libc.so.6",
        )
        .unwrap();
        assert_eq!(
            libc,
            MapsEntry {
                start: 0x7f3c1c028000,
                end: 0x7f3c1c1bd000,
                offset: 0x28000,
                dev_major: 8,
                dev_minor: 1,
                inode: 1317,
                path: "/usr/lib/x86_64-linux-gnu/libc.so.6".into(),
            }
        );
        assert_eq!(libc.kind(), Kind::File);

        let anon = parse_line("7f3c1c000000-7f3c1c021000 rwxp 00000000 00:00 0 ").unwrap();
        assert_eq!((anon.kind(), anon.path.as_str()), (Kind::Other, ""));
        let anon = parse_line("7f3c1c000000-7f3c1c021000 rwxp 00000000 00:00 0").unwrap();
        assert_eq!((anon.kind(), anon.path.as_str()), (Kind::Other, ""));

        let vdso =
            parse_line("7ffd5b5f1000-7ffd5b5f3000 r-xp 00000000 00:00 0      [vdso]").unwrap();
        assert_eq!(vdso.kind(), Kind::Vdso);

        let deleted =
            parse_line("400000-401000 r-xp 00001000 fd:02 77 /tmp/a b (deleted)").unwrap();
        assert_eq!(deleted.path, "/tmp/a b (deleted)");
        assert_eq!(deleted.live_path(), None);
        assert_eq!((deleted.dev_major, deleted.dev_minor), (0xfd, 2));
    }

    #[test]
    fn skips_data_and_garbage() {
        assert_eq!(
            parse_line("7f3c1c1bd000-7f3c1c215000 r--p 001bd000 08:01 1317 /usr/lib/libc.so.6"),
            None
        );
        for garbage in [
            "",
            "x",
            "1-2 r-xp",
            "zz-1 r-xp 0 0:0 0",
            "2-1 r-xp 0 0:0 0 /a",
        ] {
            assert_eq!(parse_line(garbage), None, "{garbage:?}");
        }
    }

    #[test]
    fn reads_this_process() {
        let entries = read(std::process::id()).unwrap();
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        assert!(
            entries
                .iter()
                .any(|e| e.path == exe.to_string_lossy() && e.kind() == Kind::File),
            "{entries:#?}"
        );
        assert!(entries.windows(2).all(|w| w[0].start < w[1].start));
    }
}
