//! Processes of the simulator killed (SIGKILL) at any point: what they held
//! of the registry, its lock included, goes with them, and the next process
//! that uses the simulator leaves no file of theirs behind.
#![allow(missing_docs, clippy::std_instead_of_core, clippy::alloc_instead_of_core)]

use std::io::{BufRead, BufReader, Read};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use kpccl_ascend::AclRuntime;
use kpccl_ascend::codes::*;
use kpccl_ascend::sim::HostSim;
use kpccl_testkit::acl::ipc::{Exported, code};
use kpccl_testkit::{ScratchDir, entries};

mod support;
use support::{child_command, own_registry};

/// Set in the child: the stage it runs to before it waits to be killed.
const STAGE_ENV: &str = "KPCCL_SIM_KILL_STAGE";

/// How long a child may take to reach its stage, or to finish.
const BOUND: Duration = Duration::from_secs(30);

/// A child running this binary's test `name` at `stage`, with the registry
/// in `sim`, and the lines it prints.
struct Stage {
    child: std::process::Child,
    lines: mpsc::Receiver<String>,
}

impl Stage {
    fn start(name: &str, stage: &str, sim: &Path) -> Self {
        let mut child = child_command(name, STAGE_ENV, sim, "2000")
            .env(STAGE_ENV, stage)
            .stdout(Stdio::piped())
            .spawn()
            .expect("run the child");
        let out = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        Self { child, lines }
    }

    /// What follows `prefix` in the first line the child prints with it.
    fn said(&mut self, prefix: &str) -> String {
        let deadline = Instant::now() + BOUND;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    // (With one test thread, libtest's "test <name> ... " may start the line.)
                    if let Some((_, rest)) = line.split_once(prefix) {
                        return rest.trim().to_owned();
                    }
                }
                Err(_) => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    panic!("the child did not say {prefix:?} in {BOUND:?}");
                }
            }
        }
    }

    fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    fn finish(mut self) {
        let status = kpccl_testkit::wait_or_kill(&mut self.child, BOUND).expect("the child did not finish");
        assert!(status.success(), "the child failed: {status}");
    }
}

/// Says `what` on stdout, where the parent reads it, then waits to be killed.
fn say_and_wait(what: &str) -> ! {
    println!("{what}");
    std::thread::sleep(BOUND * 2);
    panic!("not killed");
}

/// Whether `pid` is gone or a zombie (the simulator counts both as dead).
fn dead(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_or(true, |s| s.rsplit_once(") ").is_some_and(|(_, rest)| rest.starts_with(['Z', 'X'])))
}

/// Waits (bounded) until `pid` is dead.
fn wait_dead(pid: i32) {
    let deadline = Instant::now() + BOUND;
    while !dead(pid) {
        assert!(Instant::now() < deadline, "process {pid} still runs after {BOUND:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The stages of the kill test: what the child does before it is killed.
fn stage(stage: &str) {
    let rt = HostSim::strict();
    match stage {
        // The next process's sweep.
        "sweep" => kpccl_ascend::sim::sweep().unwrap(),
        // Killed between an allocation and its export.
        "allocated" => {
            rt.set_device(0).unwrap();
            rt.malloc(1 << 20, ACL_MEM_MALLOC_NORMAL_ONLY).unwrap();
            say_and_wait("ready");
        }
        // Killed holding a whitelisted export (never closed, never freed).
        "exported" => {
            let exp = Exported::new(&rt, 0, 1, ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT);
            exp.whitelist(1);
            say_and_wait("ready");
        }
        // The exporter killed while an importer maps its key: the importer
        // then dies without closing it.
        "exporter-killed" => {
            let exp = Exported::new(&rt, 0, 1, ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION);
            let holder = exp.spawn_holder(1);
            say_and_wait(&format!("holder {}", holder.pid));
        }
        // An importer killed between its import and its close: the exporter
        // (strict, which refuses to close a key still imported) then closes
        // and frees as if it had closed.
        "importer-killed" => {
            let exp = Exported::new(&rt, 0, 1, ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION);
            let mut holder = exp.spawn_holder(1);
            holder.kill();
            assert_eq!(code(rt.ipc_mem_close(&exp.key)), 0, "the dead importer's import still counts");
            exp.free();
        }
        other => panic!("unknown stage {other}"),
    }
}

/// A process killed at any point of its use of the simulator leaves nothing
/// behind once the next process has used it (here, swept).
#[test]
fn a_killed_process_leaves_no_registry_file_behind() {
    const NAME: &str = "a_killed_process_leaves_no_registry_file_behind";
    if let Ok(s) = std::env::var(STAGE_ENV) {
        return stage(&s);
    }
    for case in ["allocated", "exported", "exporter-killed", "importer-killed"] {
        let scratch = ScratchDir::new("sim-kills", case);
        let sim = scratch.path().join("sim");
        let mut child = Stage::start(NAME, case, &sim);
        match case {
            "importer-killed" => child.finish(),
            "exporter-killed" => {
                let holder = child.said("holder ").parse().unwrap();
                child.kill();
                // The holder, its parent gone, exits without closing.
                wait_dead(holder);
            }
            _ => {
                child.said("ready");
                child.kill();
            }
        }
        Stage::start(NAME, "sweep", &sim).finish();
        assert!(!sim.exists(), "{case}: simulator state left in {}: {:?}", sim.display(), entries(&sim));
    }
}

/// Whether the registry lock in `sim` can be taken now (and gives it back).
fn lock_is_free(sim: &Path) -> bool {
    let file = std::fs::File::open(sim.join("registry.lock")).unwrap();
    // SAFETY: flock on a descriptor this test owns; no memory is passed.
    let free = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
    // SAFETY: as above.
    unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_UN) };
    free
}

/// The child's side of the fork test: one thread whitelists a pid, and its
/// registry rewrite blocks (on a FIFO) while it holds the registry lock;
/// meanwhile the main thread forks. The parent kills this process as soon as
/// it has forked.
fn fork_while_whitelisting() {
    let rt = HostSim::faithful();
    let sim = own_registry();
    let exp = Exported::new(&rt, 0, 1, ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT);
    let key = exp.key;
    // The rewrite's `registry.tmp`: opening it for writing waits for a reader.
    let fifo = std::ffi::CString::new(sim.join("registry.tmp").into_os_string().into_encoded_bytes()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0, "mkfifo");
    std::thread::spawn(move || {
        rt.set_device(0).unwrap();
        rt.ipc_mem_set_import_pid(&key, &[1]).unwrap();
    });
    let deadline = Instant::now() + BOUND;
    while lock_is_free(&sim) {
        assert!(Instant::now() < deadline, "the whitelisting thread never took the lock");
        std::thread::sleep(Duration::from_millis(5));
    }
    // Lets the rewrite finish after a while (if the fork waits for it).
    let tmp = sim.join("registry.tmp");
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(2));
        let mut rewrite = Vec::new();
        std::fs::File::open(tmp).unwrap().read_to_end(&mut rewrite).unwrap();
    });
    // SAFETY: the child only sleeps and exits (async-signal-safe calls).
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: a plain sleep in the forked child.
        unsafe { libc::sleep(30) };
        // SAFETY: ends the child without running the parent's handlers.
        unsafe { libc::_exit(0) };
    }
    assert!(pid > 0, "fork");
    say_and_wait(&format!("forked {pid}"));
}

/// A process killed while one of its threads holds the registry lock, after
/// another thread forked, takes the lock with it: the fork waits until no
/// thread is inside the registry. Before, the fork went ahead (the thread
/// holding the lock did not hold the process state the fork handlers wait
/// for), the child shared the lock's open file, and the lock stayed held for
/// as long as the child lived: every simulator call of the user failed.
#[test]
fn a_process_killed_after_forking_during_a_registry_rewrite_leaves_the_lock_free() {
    const NAME: &str = "a_process_killed_after_forking_during_a_registry_rewrite_leaves_the_lock_free";
    if std::env::var_os(STAGE_ENV).is_some() {
        return fork_while_whitelisting();
    }
    let scratch = ScratchDir::new("sim-kills", "fork");
    let sim = scratch.path().join("sim");
    let mut child = Stage::start(NAME, "fork", &sim);
    let forked: i32 = child.said("forked ").parse().unwrap();
    child.kill();
    let free = lock_is_free(&sim);
    // SAFETY: signals the grandchild this test made (it only sleeps).
    unsafe { libc::kill(forked, libc::SIGKILL) };
    wait_dead(forked);
    assert!(free, "the registry lock stayed held by process {forked}, forked while it was held");
}
