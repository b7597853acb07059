//! `src/bin/bare.rs` as a hosted program: the same `run` the bare-metal
//! entry point calls, which CI only builds for `aarch64-unknown-none`.

use core::time::Duration;
use std::process::{Command, Stdio};
use std::time::Instant;

#[test]
fn the_bare_metal_program_runs_its_rank_on_the_host() {
    let mut child =
        through_runner(env!("CARGO_BIN_EXE_bare")).stdout(Stdio::piped()).spawn().expect("start the bare program");
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the bare program") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the bare program did not finish within 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = std::io::read_to_string(child.stdout.take().expect("its stdout")).expect("read its stdout");
    assert!(status.success(), "the bare program failed ({status}): {out}");
    assert!(out.contains("100 rounds verified"), "unexpected output: {out}");
}

/// `program` through cargo's target runner when the tests run under one
/// (qemu-user cannot exec another guest binary by itself).
fn through_runner(program: &str) -> Command {
    let runner = if cfg!(target_arch = "aarch64") {
        std::env::var("CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER").unwrap_or_default()
    } else {
        String::new()
    };
    let mut words: Vec<&str> = runner.split_whitespace().collect();
    words.push(program);
    let mut cmd = Command::new(words[0]);
    cmd.args(&words[1..]);
    cmd
}
