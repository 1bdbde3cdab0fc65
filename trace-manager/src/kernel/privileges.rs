//! Whether this process may load the kernel trace provider's programs: as
//! root, or with CAP_SYS_ADMIN, or with CAP_BPF and CAP_PERFMON.

use crate::procfs;

const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

/// What this process lacks to load the programs, in words; `None` when it
/// may, or when its capabilities cannot be read (the kernel decides then).
pub fn missing() -> Option<String> {
    if nix::unistd::geteuid().is_root() {
        return None;
    }
    missing_from(procfs::effective_capabilities()?)
}

/// What a process that is not root lacks, given its effective capabilities.
fn missing_from(caps: u64) -> Option<String> {
    let has = |c: u32| caps & (1u64 << c) != 0;
    if has(CAP_SYS_ADMIN) || (has(CAP_BPF) && has(CAP_PERFMON)) {
        return None;
    }
    Some(
        match (has(CAP_BPF), has(CAP_PERFMON)) {
            (true, _) => "this process has CAP_BPF but lacks CAP_PERFMON",
            (_, true) => "this process has CAP_PERFMON but lacks CAP_BPF",
            _ => "this process is not root and has neither",
        }
        .to_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_privileges_are_named() {
        let cap = |c: u32| 1u64 << c;
        assert_eq!(missing_from(cap(CAP_SYS_ADMIN)), None);
        assert_eq!(missing_from(cap(CAP_PERFMON) | cap(CAP_BPF)), None);
        assert!(
            missing_from(cap(CAP_BPF))
                .unwrap()
                .contains("lacks CAP_PERFMON")
        );
        assert!(
            missing_from(cap(CAP_PERFMON))
                .unwrap()
                .contains("lacks CAP_BPF")
        );
        assert!(missing_from(0).unwrap().contains("neither"));
    }
}
