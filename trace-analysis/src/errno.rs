//! Linux error numbers by name, as a system call's negative return value
//! gives them (the generic numbering of x86-64 and arm64).

/// Names of errno 1 to 133 (`""` where the number is not used).
const NAMES: [&str; 133] = [
    "EPERM",
    "ENOENT",
    "ESRCH",
    "EINTR",
    "EIO",
    "ENXIO",
    "E2BIG",
    "ENOEXEC",
    "EBADF",
    "ECHILD",
    "EAGAIN",
    "ENOMEM",
    "EACCES",
    "EFAULT",
    "ENOTBLK",
    "EBUSY",
    "EEXIST",
    "EXDEV",
    "ENODEV",
    "ENOTDIR",
    "EISDIR",
    "EINVAL",
    "ENFILE",
    "EMFILE",
    "ENOTTY",
    "ETXTBSY",
    "EFBIG",
    "ENOSPC",
    "ESPIPE",
    "EROFS",
    "EMLINK",
    "EPIPE",
    "EDOM",
    "ERANGE",
    "EDEADLK",
    "ENAMETOOLONG",
    "ENOLCK",
    "ENOSYS",
    "ENOTEMPTY",
    "ELOOP",
    "",
    "ENOMSG",
    "EIDRM",
    "ECHRNG",
    "EL2NSYNC",
    "EL3HLT",
    "EL3RST",
    "ELNRNG",
    "EUNATCH",
    "ENOCSI",
    "EL2HLT",
    "EBADE",
    "EBADR",
    "EXFULL",
    "ENOANO",
    "EBADRQC",
    "EBADSLT",
    "",
    "EBFONT",
    "ENOSTR",
    "ENODATA",
    "ETIME",
    "ENOSR",
    "ENONET",
    "ENOPKG",
    "EREMOTE",
    "ENOLINK",
    "EADV",
    "ESRMNT",
    "ECOMM",
    "EPROTO",
    "EMULTIHOP",
    "EDOTDOT",
    "EBADMSG",
    "EOVERFLOW",
    "ENOTUNIQ",
    "EBADFD",
    "EREMCHG",
    "ELIBACC",
    "ELIBBAD",
    "ELIBSCN",
    "ELIBMAX",
    "ELIBEXEC",
    "EILSEQ",
    "ERESTART",
    "ESTRPIPE",
    "EUSERS",
    "ENOTSOCK",
    "EDESTADDRREQ",
    "EMSGSIZE",
    "EPROTOTYPE",
    "ENOPROTOOPT",
    "EPROTONOSUPPORT",
    "ESOCKTNOSUPPORT",
    "EOPNOTSUPP",
    "EPFNOSUPPORT",
    "EAFNOSUPPORT",
    "EADDRINUSE",
    "EADDRNOTAVAIL",
    "ENETDOWN",
    "ENETUNREACH",
    "ENETRESET",
    "ECONNABORTED",
    "ECONNRESET",
    "ENOBUFS",
    "EISCONN",
    "ENOTCONN",
    "ESHUTDOWN",
    "ETOOMANYREFS",
    "ETIMEDOUT",
    "ECONNREFUSED",
    "EHOSTDOWN",
    "EHOSTUNREACH",
    "EALREADY",
    "EINPROGRESS",
    "ESTALE",
    "EUCLEAN",
    "ENOTNAM",
    "ENAVAIL",
    "EISNAM",
    "EREMOTEIO",
    "EDQUOT",
    "ENOMEDIUM",
    "EMEDIUMTYPE",
    "ECANCELED",
    "ENOKEY",
    "EKEYEXPIRED",
    "EKEYREVOKED",
    "EKEYREJECTED",
    "EOWNERDEAD",
    "ENOTRECOVERABLE",
    "ERFKILL",
    "EHWPOISON",
];

/// Error numbers the kernel uses inside a system call that can show at its
/// return (a call interrupted by a signal, to be restarted).
const KERNEL: [(i64, &str); 7] = [
    (512, "ERESTARTSYS"),
    (513, "ERESTARTNOINTR"),
    (514, "ERESTARTNOHAND"),
    (515, "ENOIOCTLCMD"),
    (516, "ERESTART_RESTARTBLOCK"),
    (517, "EPROBE_DEFER"),
    (524, "ENOTSUPP"),
];

/// The name of error number `errno` (positive), if it has one.
pub fn name(errno: i64) -> Option<&'static str> {
    if (1..=133).contains(&errno) {
        let n = NAMES[(errno - 1) as usize];
        return (!n.is_empty()).then_some(n);
    }
    KERNEL.iter().find(|(e, _)| *e == errno).map(|(_, n)| *n)
}

/// `ENOENT` for 2, or the number itself when it has no name.
pub fn label(errno: i64) -> String {
    name(errno).map_or_else(|| errno.to_string(), str::to_owned)
}

/// The largest error number a system call returns: a return value in
/// `-MAX_ERRNO..=-1` is an error, anything else a result (the addresses
/// `mmap` returns can be negative).
pub const MAX_ERRNO: i64 = 4095;

/// The error number a system call's return value `ret` carries, if it is an
/// error.
pub fn from_return(ret: i64) -> Option<i64> {
    (-MAX_ERRNO..=-1).contains(&ret).then_some(-ret)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_their_numbers() {
        assert_eq!(name(1), Some("EPERM"));
        assert_eq!(name(2), Some("ENOENT"));
        assert_eq!(name(11), Some("EAGAIN"));
        assert_eq!(name(22), Some("EINVAL"));
        assert_eq!(name(38), Some("ENOSYS"));
        assert_eq!(name(41), None);
        assert_eq!(name(110), Some("ETIMEDOUT"));
        assert_eq!(name(133), Some("EHWPOISON"));
        assert_eq!(name(512), Some("ERESTARTSYS"));
        assert_eq!(label(4095), "4095");
        assert_eq!(label(0), "0");
        assert_eq!(from_return(-2), Some(2));
        assert_eq!(from_return(-4095), Some(4095));
        assert_eq!(from_return(-4096), None);
        assert_eq!(from_return(0), None);
        assert_eq!(from_return(3), None);
    }
}
