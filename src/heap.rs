//! Handing freed heap back to the operating system between phases.
//!
//! glibc's allocator keeps freed pages mapped, so a phase that builds large temporary tables (a
//! tokenizer's JSON, its load tables, the prompt workers' buffers) leaves the process's resident
//! size at its peak for the rest of the run. A long-running load generator is judged by that
//! size: [`trim`] returns what is free after such a phase. Elsewhere (musl, other systems) it
//! does nothing.

/// Returns the allocator's free pages to the operating system.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub(crate) fn trim() {
    // SAFETY: malloc_trim takes no pointers; it only releases free memory of glibc's arenas.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Returns the allocator's free pages to the operating system (nothing to do here).
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub(crate) fn trim() {}
