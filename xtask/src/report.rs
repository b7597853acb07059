//! Steps with headings, timings and a summary table; test counts read from
//! the output of cargo test and of the C tests.

use std::{
    fmt, ops,
    time::{Duration, Instant},
};

use crate::cmd::Result;

/// How a step that ran without error ended.
#[derive(Debug)]
pub(crate) enum Done {
    /// It did its work; the text (may be empty) goes into the summary table.
    Ran(String),
    /// There was nothing to do; the text says why.
    Skipped(String),
}

#[derive(Debug)]
enum Outcome {
    Passed(String),
    Failed(String),
    Skipped(String),
}

#[derive(Debug)]
struct Step {
    name: String,
    outcome: Outcome,
    elapsed: Duration,
}

/// The steps of one task, in the order they ran.
#[derive(Debug)]
pub(crate) struct Steps {
    planned: usize,
    steps: Vec<Step>,
    /// Steps that were planned but never ran (after a failure).
    not_run: Vec<String>,
}

impl Steps {
    pub(crate) fn new(planned: usize) -> Steps {
        Steps { planned, steps: Vec::new(), not_run: Vec::new() }
    }

    fn heading(&self, name: &str) {
        println!("\n==> [{}/{}] {name}", self.steps.len() + 1, self.planned);
    }

    /// Runs `f` as the next step: prints a heading, times it, records the
    /// outcome. Returns false when it failed.
    pub(crate) fn run(&mut self, name: &str, f: impl FnOnce() -> Result<Done>) -> bool {
        self.heading(name);
        let start = Instant::now();
        let result = f();
        let elapsed = start.elapsed();
        let (outcome, ok) = match result {
            Ok(Done::Ran(note)) => {
                println!("<== {name}: ok ({}){}", Secs(elapsed), with_sep(&note));
                (Outcome::Passed(note), true)
            }
            Ok(Done::Skipped(why)) => {
                println!("<== {name}: skipped: {why}");
                (Outcome::Skipped(why), true)
            }
            Err(err) => {
                eprintln!("<== {name}: FAILED ({}): {err}", Secs(elapsed));
                (Outcome::Failed(err.to_string()), false)
            }
        };
        self.steps.push(Step { name: name.to_owned(), outcome, elapsed });
        ok
    }

    /// Lists steps that will not run because an earlier one failed.
    pub(crate) fn abandon(&mut self, names: &[&str]) {
        self.not_run.extend(names.iter().map(|n| (*n).to_owned()));
    }

    pub(crate) fn passed(&self) -> usize {
        self.steps.iter().filter(|s| matches!(s.outcome, Outcome::Passed(_))).count()
    }

    pub(crate) fn failed(&self) -> usize {
        self.steps.iter().filter(|s| matches!(s.outcome, Outcome::Failed(_))).count()
    }

    /// Prints the table of steps: name, result, duration, note.
    pub(crate) fn print_table(&self, title: &str) {
        let width = self.steps.iter().map(|s| s.name.len()).chain(self.not_run.iter().map(String::len)).max();
        let width = width.unwrap_or(0).max("step".len());
        let total: Duration = self.steps.iter().map(|s| s.elapsed).sum();
        println!("\n{title}\n");
        println!("  {:<width$}  {:<7}  {:>8}  note", "step", "result", "time");
        for step in &self.steps {
            let (result, note) = match &step.outcome {
                Outcome::Passed(note) => ("pass", note.as_str()),
                Outcome::Failed(err) => ("FAIL", first_line(err)),
                Outcome::Skipped(why) => ("skipped", why.as_str()),
            };
            let row = format!("  {:<width$}  {result:<7}  {:>8}  {note}", step.name, Secs(step.elapsed).to_string());
            println!("{}", row.trim_end());
        }
        for name in &self.not_run {
            println!("  {name:<width$}  {:<7}  {:>8}  an earlier step failed", "not run", "-");
        }
        println!("  {:<width$}  {:<7}  {:>8}", "total", "", Secs(total).to_string());
    }
}

fn with_sep(note: &str) -> String {
    if note.is_empty() { String::new() } else { format!(": {note}") }
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

/// A duration as `12.3s` or `4m05s`.
pub(crate) struct Secs(pub(crate) Duration);

impl fmt::Display for Secs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = self.0.as_secs_f64();
        if secs < 60.0 {
            write!(f, "{secs:.1}s")
        } else {
            let whole = self.0.as_secs();
            write!(f, "{}m{:02}s", whole / 60, whole % 60)
        }
    }
}

/// Test counts, summed over the `test result:` lines of cargo test and the
/// `N passed, N failed` lines of the C tests.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Counts {
    pub(crate) passed: u64,
    pub(crate) failed: u64,
}

impl ops::AddAssign for Counts {
    fn add_assign(&mut self, rhs: Counts) {
        self.passed += rhs.passed;
        self.failed += rhs.failed;
    }
}

impl fmt::Display for Counts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} passed, {} failed", self.passed, self.failed)
    }
}

impl Counts {
    /// Sums every count line in `output`: libtest's
    /// `test result: ok. 12 passed; 0 failed; 1 ignored; …` and the C tests'
    /// plain `12 passed, 0 failed`. Returns the sum and how many lines matched.
    pub(crate) fn sum(output: &str) -> (Counts, usize) {
        let mut total = Counts::default();
        let mut lines = 0;
        for counts in output.lines().filter_map(Counts::parse_line) {
            total += counts;
            lines += 1;
        }
        (total, lines)
    }

    fn parse_line(line: &str) -> Option<Counts> {
        let line = line.trim();
        let fields = match line.strip_prefix("test result: ") {
            // "ok. 12 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.01s"
            Some(rest) => rest.split_once(". ")?.1.split("; ").take(2).collect::<Vec<_>>(),
            // "12 passed, 0 failed" and nothing else on the line
            None => line.split(", ").collect(),
        };
        let [passed, failed] = fields.as_slice() else { return None };
        let count = |field: &str, word: &str| field.strip_suffix(word)?.strip_suffix(' ')?.parse::<u64>().ok();
        Some(Counts { passed: count(passed, "passed")?, failed: count(failed, "failed")? })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_libtest_and_c_lines() {
        let out = "\
running 3 tests
test a ... ok
test result: ok. 3 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s

test result: FAILED. 10 passed; 2 failed; 1 ignored; 0 measured; 0 filtered out; finished in 1.50s
4 passed, 1 failed
test counts: 4 passed, 1 failed and more
";
        assert_eq!(Counts::sum(out), (Counts { passed: 17, failed: 3 }, 3));
        assert_eq!(Counts::sum("nothing here\n"), (Counts::default(), 0));
    }

    #[test]
    fn formats_durations() {
        assert_eq!(Secs(Duration::from_millis(1234)).to_string(), "1.2s");
        assert_eq!(Secs(Duration::from_secs(245)).to_string(), "4m05s");
    }
}
