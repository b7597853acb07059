//! `cargo xtask`: the project's automation, written in Rust so that it runs
//! wherever cargo does (matklad/cargo-xtask, rust-analyzer's `xtask/`).
//!
//! One module per task; `flags` parses the command line, `cmd` runs and echoes
//! commands, `report` times steps and counts tests. Every task runs from the
//! workspace root, whatever the caller's directory.
// A command-line tool for this repository: it prints, uses std freely and has
// no public API to document.
#![allow(missing_docs, clippy::print_stdout, clippy::print_stderr, clippy::std_instead_of_core)]

mod bench;
mod c_tests;
mod cmd;
mod consumers;
mod demo;
mod flags;
mod header;
mod install;
mod package_files;
mod python;
mod report;
mod rust_mpi;
mod soak;
mod staticlib;
mod test;
mod test_aarch64;

use std::{env, path::Path, process::ExitCode};

use flags::Task;

fn main() -> ExitCode {
    // `bench` parses its own flags (bench.rs).
    if env::args().nth(1).as_deref() == Some("bench") {
        return bench::main(env::args().skip(2));
    }
    let task = match flags::parse(env::args().skip(1)) {
        Ok(task) => task,
        Err(err) => {
            eprintln!("error: {err}\n\n{}", flags::HELP);
            return ExitCode::from(2);
        }
    };
    if let Err(err) = enter_project_root() {
        return exit_code(Err(err));
    }
    let result = match task {
        Task::Help => {
            println!("{}", flags::HELP);
            Ok(())
        }
        Task::Test { quick } => test::run(quick),
        Task::TestAarch64 { install, cross } => test_aarch64::run(install, cross),
        Task::Demo { ranks, rest } => demo::run(ranks, &rest),
        Task::Header { check } => header::run(check),
        Task::Install { prefix } => install::run(&prefix),
        Task::CTest { aarch64 } => c_tests::standalone(aarch64),
        Task::Soak { minutes, ranks } => soak::run(minutes, ranks),
    };
    exit_code(result)
}

/// The exit code of a task's result; prints its error unless already reported.
fn exit_code(result: cmd::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            if !err.0.is_empty() {
                eprintln!("error: {err}");
            }
            ExitCode::FAILURE
        }
    }
}

/// Makes the workspace root the current directory: every task runs from there.
fn enter_project_root() -> cmd::Result<()> {
    let root = project_root()?;
    env::set_current_dir(&root).map_err(|e| cmd::err!("cd {root:?}: {e}"))
}

/// The workspace root: the parent of this crate's manifest directory.
fn project_root() -> cmd::Result<std::path::PathBuf> {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir.parent().map(Path::to_path_buf).ok_or_else(|| cmd::err!("{manifest_dir:?} has no parent directory"))
}
