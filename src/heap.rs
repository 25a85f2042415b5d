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

/// Has glibc's allocator hand freed memory back as it goes: blocks of 128 KiB and more get
/// their own mapping, unmapped when freed, and a heap's free top is returned past 128 KiB.
/// glibc's defaults move the mapping threshold up to 32 MiB once a large block is freed (a
/// tokenizer's file, a phase's tables), after which every large temporary is carved from the
/// heap and its pages stay resident. For a process whose peak resident size is a figure it
/// reports beside another client's (bench-serving).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub(crate) fn return_promptly() {
    const THRESHOLD: libc::c_int = 128 * 1024;
    // SAFETY: mallopt only sets the allocator's tunables.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, THRESHOLD);
        libc::mallopt(libc::M_TRIM_THRESHOLD, THRESHOLD);
    }
}

/// Has the allocator hand freed memory back as it goes (nothing to set here).
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub(crate) fn return_promptly() {}
