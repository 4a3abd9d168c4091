//! How many threads one generation gets. candle's matmuls split every token's work across rayon's
//! threads and wait for the slowest; on a machine whose cores other processes hold, a descheduled
//! thread stalls the rest (issue 15: 46 → 3.2 tokens/s beside two busy processes, far worse than the
//! share of the cores lost). So each generation runs in a pool sized to the cores free right now.

use std::sync::OnceLock;

/// Cores this process may run on (affinity and cgroup quota included).
pub fn allowed() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Cores no other process's runnable task holds at this moment: the kernel's count of runnable
/// tasks (`/proc/loadavg`, fourth field) less this process's own (the caller, and the model's
/// threads still spinning after the last step), taken from what the process may use. At least 1;
/// all of them where the count cannot be read.
pub fn free() -> usize {
    let all = allowed();
    let running = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().nth(3).and_then(|f| f.split('/').next()?.parse::<usize>().ok()));
    match running {
        Some(r) => all.saturating_sub(r.saturating_sub(own_running().max(1))).clamp(1, all),
        None => all,
    }
}

/// This process's threads in state R (running or runnable), the caller included.
fn own_running() -> usize {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return 1 };
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("stat")).ok())
        // `pid (comm) S …`: the state follows the last `)`, as comm may hold one.
        .filter(|stat| stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('R')))
        .count()
}

/// `f` on as many threads as cores are free now: called per step, so a batch that runs for a
/// minute follows the machine's load instead of the moment it started.
pub fn on_free<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    pool(free()).install(f)
}

/// A pool of `n` threads (1 ≤ n ≤ [`allowed`]), built once per size.
pub fn pool(n: usize) -> &'static rayon::ThreadPool {
    static POOLS: OnceLock<Vec<OnceLock<rayon::ThreadPool>>> = OnceLock::new();
    let pools = POOLS.get_or_init(|| (0..allowed()).map(|_| OnceLock::new()).collect());
    let n = n.clamp(1, pools.len());
    pools[n - 1].get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .thread_name(move |i| format!("smollm-{n}-{i}"))
            .build()
            .expect("starting the embedded model's threads")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_cores_stay_within_what_the_process_may_use() {
        let f = free();
        assert!((1..=allowed()).contains(&f), "{f} of {}", allowed());
        assert_eq!(pool(1).current_num_threads(), 1);
        assert_eq!(pool(allowed() + 5).current_num_threads(), allowed());
    }

    #[test]
    fn a_busy_machine_gives_fewer_threads() {
        // Spinning processes, one per core: every core is held by another process's runnable task.
        // Processes, not threads: `free` rightly counts this process's own threads as its own.
        let mut spinners: Vec<_> = (0..allowed())
            .map(|_| {
                std::process::Command::new("sh")
                    .args(["-c", "while :; do :; done"])
                    .spawn()
                    .expect("starting a spinning shell")
            })
            .collect();
        std::thread::sleep(std::time::Duration::from_millis(100));
        let busy = (0..20).map(|_| free()).min().unwrap();
        for s in &mut spinners {
            let _ = s.kill();
            let _ = s.wait();
        }
        assert_eq!(busy, 1, "all {} cores spun by other processes", allowed());
    }
}
