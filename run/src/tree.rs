//! Killing a rank with every process it started. A rank run through a
//! wrapper (`sh -c ./prog`, `env`, `numactl`, a script) is a tree of
//! processes: killing its root alone would leave the program running,
//! adopted by init, while the launcher reported it killed.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::Path;

use rustix::process::{Pid, Signal, kill_process};

/// How many times the tree is searched for processes forked while it was
/// being stopped (each pass stops the children of the stopped ones).
const PASSES: usize = 32;

/// Stops the processes `roots` and everything below them, then kills them
/// all with `SIGKILL`. The trees are frozen before anything dies: a process
/// that forks meanwhile is stopped with its child in a later pass, so none
/// escapes by being orphaned. Processes already gone are skipped; only the
/// roots are the caller's children, to reap. One look at `/proc` per pass
/// serves every root (a look per root made a job of 1 024 ranks take
/// seconds to end).
pub(crate) fn kill_trees(roots: &[u32]) {
    let roots: Vec<Pid> = roots.iter().filter_map(|&r| i32::try_from(r).ok().and_then(Pid::from_raw)).collect();
    for &root in &roots {
        // An error means it is gone already: its descendants are still looked for.
        let _ = kill_process(root, Signal::STOP);
    }
    let mut frozen: HashSet<Pid> = roots.iter().copied().collect();
    for _ in 0..PASSES {
        let children = children_by_parent();
        let fresh: Vec<Pid> =
            roots.iter().flat_map(|&root| below(&children, root)).filter(|p| !frozen.contains(p)).collect();
        if fresh.is_empty() {
            break;
        }
        for &p in &fresh {
            let _ = kill_process(p, Signal::STOP);
        }
        frozen.extend(fresh);
    }
    for p in frozen {
        let _ = kill_process(p, Signal::KILL);
    }
}

/// Sends `signal` to the processes `roots` and everything below them (a
/// rank run through a wrapper hears it as a program run alone would).
pub(crate) fn signal_trees(roots: &[u32], signal: Signal) {
    let children = children_by_parent();
    for root in roots.iter().filter_map(|&r| i32::try_from(r).ok().and_then(Pid::from_raw)) {
        let _ = kill_process(root, signal);
        for p in below(&children, root) {
            // An error means it is gone already.
            let _ = kill_process(p, signal);
        }
    }
}

/// Every process below `root`, in the map of children by parent.
fn below(children: &HashMap<i32, Vec<i32>>, root: Pid) -> Vec<Pid> {
    let mut found = Vec::new();
    let mut next = vec![root.as_raw_nonzero().get()];
    while let Some(parent) = next.pop() {
        for &child in children.get(&parent).into_iter().flatten() {
            found.extend(Pid::from_raw(child));
            next.push(child);
        }
    }
    found
}

/// The processes of the system by parent, from `/proc/<pid>/stat` (those
/// that end while it is read are left out).
fn children_by_parent() -> HashMap<i32, Vec<i32>> {
    #[cfg(test)]
    tests::LOOKS.with(|n| n.set(n.get() + 1));
    let mut map: HashMap<i32, Vec<i32>> = HashMap::new();
    let Ok(dir) = fs::read_dir("/proc") else { return map };
    for entry in dir.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        if let Some(parent) = read_lossy(&entry.path().join("stat")).as_deref().and_then(parent_of) {
            map.entry(parent).or_default().push(pid);
        }
    }
    map
}

/// A `/proc` file as text; a command name need not be UTF-8.
fn read_lossy(path: &Path) -> Option<String> {
    fs::read(path).ok().map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// The parent pid in the text of `/proc/<pid>/stat`.
fn parent_of(stat: &str) -> Option<i32> {
    after_name(stat, 1)?.parse().ok()
}

/// Field `n` (0: the state) after the command name in the text of
/// `/proc/<pid>/stat`; the name is in parentheses and may hold any byte.
fn after_name(stat: &str, n: usize) -> Option<&str> {
    stat[stat.rfind(')')? + 1..].split_whitespace().nth(n)
}

/// What each process of `pids` and the processes below it are doing, from
/// `/proc`, for a report on ranks about to be killed: an emulator or
/// wrapper that never started the program (a forked child still showing its
/// parent's command line) tells apart from a program stuck in its code. For
/// example `pid 812 qemu-aarch64 [qemu-aarch64 -L aarch64-linux-gnu prog] (S
/// in futex_wait_queue, 3 threads)`.
pub(crate) fn describe(pids: &[u32]) -> Vec<String> {
    let children = children_by_parent();
    pids.iter()
        .map(|&pid| {
            let Some(root) = i32::try_from(pid).ok().and_then(Pid::from_raw) else { return format!("pid {pid}") };
            let mut tree = vec![root];
            tree.extend(below(&children, root));
            let shown: Vec<String> = tree.iter().map(|p| one(p.as_raw_nonzero().get())).collect();
            shown.join(" > ")
        })
        .collect()
}

/// Words of a command line shown, at most.
const SHOWN_WORDS: usize = 6;

/// One process: its pid, name, command line, state, wait channel and threads.
fn one(pid: i32) -> String {
    let read = |file: &str| read_lossy(Path::new(&format!("/proc/{pid}/{file}")));
    let Some(stat) = read("stat") else { return format!("pid {pid} (gone)") };
    let name = stat.find('(').zip(stat.rfind(')')).map_or("?", |(a, b)| &stat[a + 1..b.max(a + 1)]);
    let state = after_name(&stat, 0).unwrap_or("?");
    // Reading a command line takes the process's memory-map lock, which a
    // process in uninterruptible sleep (a fault on a hung file system) may
    // hold: its command line is not read, so that the kill is not held up.
    let command = if state == "D" {
        String::new()
    } else {
        fs::read(format!("/proc/{pid}/cmdline")).map(|c| command_line(&c)).unwrap_or_default()
    };
    // "0": running, or the kernel hides where it sleeps.
    let wchan = read("wchan").filter(|w| !w.is_empty() && w != "0").map(|w| format!(" in {w}")).unwrap_or_default();
    let threads = after_name(&stat, 17).unwrap_or("?");
    format!("pid {pid} {name}{command} ({state}{wchan}, {threads} threads)")
}

/// ` [words]`: the first words of a `/proc/<pid>/cmdline`, paths (words
/// that start with `/` or `.`) cut to their last component (empty for a
/// kernel thread or a zombie).
fn command_line(raw: &[u8]) -> String {
    let words: Vec<_> = raw.split(|&b| b == 0).filter(|w| !w.is_empty()).collect();
    if words.is_empty() {
        return String::new();
    }
    let last_component = |w: &'_ [u8]| -> Vec<u8> {
        if !w.starts_with(b"/") && !w.starts_with(b".") {
            return w.to_vec();
        }
        w.split(|&b| b == b'/').rfind(|c| !c.is_empty()).unwrap_or(w).to_vec()
    };
    let shown: Vec<_> =
        words.iter().take(SHOWN_WORDS).map(|w| String::from_utf8_lossy(&last_component(w)).into_owned()).collect();
    let more = if words.len() > SHOWN_WORDS { " …" } else { "" };
    format!(" [{}{more}]", shown.join(" "))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    thread_local! {
        /// Looks at the whole of `/proc` this thread made.
        pub(crate) static LOOKS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    #[test]
    fn the_parent_is_read_past_a_name_with_spaces_and_parentheses() {
        let cases = [("42 (a (b) c) S 7 42 42 0 -1", Some(7)), ("42 (sh) R 1 42", Some(1)), ("garbage", None)];
        for (stat, parent) in cases {
            assert_eq!(parent_of(stat), parent, "{stat}");
        }
    }

    #[test]
    fn a_process_is_described_by_its_name_state_and_threads() {
        let me = std::process::id();
        let text = describe(&[me]).remove(0);
        // The main thread mostly sleeps waiting for this test's, but runs
        // when another test ends (qemu-user makes up its own
        // /proc/self/stat: state and threads "0").
        assert!(text.starts_with(&format!("pid {me} ")), "{text}");
        let state = text.split(" (").nth(1).and_then(|t| t.split([' ', ',']).next());
        assert!(matches!(state, Some("S" | "R" | "0")), "{text}");
        assert!(text.ends_with(" threads)"), "{text}");
        assert_eq!(one(i32::MAX), format!("pid {} (gone)", i32::MAX));
    }

    #[test]
    fn a_command_line_is_shown_by_its_first_words() {
        assert_eq!(
            command_line(b"/usr/bin/qemu-aarch64\0-L\0/usr/aarch64-linux-gnu\0./prog\0"),
            " [qemu-aarch64 -L aarch64-linux-gnu prog]"
        );
        assert_eq!(command_line(b"a\0b\0c\0d\0e\0f\0g\0"), " [a b c d e f …]");
        assert_eq!(command_line(b""), "");
        assert_eq!(command_line(b"./run/\0dir=/a/b\0/\0"), " [run dir=/a/b /]");
        assert_eq!(command_line(b"z\xffz\0"), " [z\u{fffd}z]");
    }

    #[test]
    fn below_walks_the_whole_tree_and_nothing_else() {
        let children = HashMap::from([(1, vec![2, 3]), (2, vec![4]), (4, vec![5]), (9, vec![10])]);
        let mut got: Vec<i32> =
            below(&children, Pid::from_raw(2).unwrap()).iter().map(|p| p.as_raw_nonzero().get()).collect();
        got.sort_unstable();
        assert_eq!(got, [4, 5]);
    }
}
