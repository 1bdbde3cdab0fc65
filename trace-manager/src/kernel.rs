//! The kernel trace provider (loader and ring-buffer drain).
