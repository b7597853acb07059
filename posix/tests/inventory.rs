//! `kpccl-run --list`'s inventory finds a live window however its directory
//! is spelled: with a trailing slash (as a shell's completion writes it),
//! or through a link to it (the memory maps show the resolved path).
#![allow(missing_docs, clippy::std_instead_of_core)]

use std::path::PathBuf;

use kpccl_posix::inventory::{State, list};
use kpccl_posix::{Comm, Config};
use kpccl_testkit::{ScratchDir, Solo};

#[test]
fn a_live_window_is_listed_whatever_the_spelling_of_its_directory() {
    let dir = ScratchDir::new("inventory", "spelling");
    let config = Config { shm_dir: dir.path().to_owned(), ..Config::default() };
    let comm = Comm::builder(Solo, 0, 1).config(config).build().expect("communicator");
    let win = comm.window(4096).alloc().expect("window");
    let link = PathBuf::from(format!("{}-link", dir.path().display()));
    std::os::unix::fs::symlink(dir.path(), &link).expect("a link to the directory");
    let slash = PathBuf::from(format!("{}/", dir.path().display()));
    let spellings = [dir.path().to_owned(), slash, link.clone()];
    let found: Vec<(PathBuf, usize)> = spellings
        .iter()
        .map(|d| {
            let live = list(d).expect("the directory lists").iter().filter(|s| s.state == State::Live).count();
            (d.clone(), live)
        })
        .collect();
    let _ = std::fs::remove_file(&link);
    win.free().expect("free");
    for (d, live) in found {
        assert_eq!(live, 1, "live windows listed in {}", d.display());
    }
}
