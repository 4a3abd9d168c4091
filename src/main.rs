fn main() {
    limit_malloc_arenas();
    std::process::exit(doc2ci::cli::main());
}

/// glibc gives threads that allocate at once arenas of their own (up to 8 per core); with the tokio,
/// rayon and candle threads of a run that fragmentation cost ≈ 200 MB of peak memory at the Doc2CI
/// scale (968 → 773 MiB for 53,808 configurations, same wall time; bench/quality.sh section 3).
/// An explicit `MALLOC_ARENA_MAX` in the environment still wins.
fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: mallopt is called once, before any other thread exists.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 2);
        }
    }
}
