//! Fixed-layout events written by the eBPF kernel provider (filled in by the kernel provider work).
