//! In-process micro-benchmarks: the window layout computation, and a peer
//! fence between two threads over a heap sync area (the same `kpccl_core`
//! fence code that runs on a mapped window).
#![allow(missing_docs, clippy::std_instead_of_core, clippy::alloc_instead_of_core)]

use std::hint::black_box;
use std::sync::Arc;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use kpccl_core::WaitPolicy;
use kpccl_core::fence::{peer_fence, window_fence};
use kpccl_core::layout::{Layout, LayoutMode, LayoutParams};
use kpccl_testkit::ThreadEnv;
use kpccl_testkit::heap::HeapArea;

fn layout(c: &mut Criterion) {
    let mut g = c.benchmark_group("layout/new");
    for n in [8u32, 64, 1024] {
        let params = LayoutParams { nranks: n, mode: LayoutMode::Contiguous, align: 64, page: 4096 };
        g.bench_with_input(BenchmarkId::from_parameter(n), &params, |b, p| {
            b.iter(|| Layout::new(black_box(*p), |r| black_box(4096 + u64::from(r))).expect("valid layout"));
        });
    }
    g.finish();
}

/// A partner thread that runs as many fences as it is told, then reports back.
struct Partner {
    go: mpsc::Sender<u64>,
    done: mpsc::Receiver<()>,
    handle: Option<thread::JoinHandle<()>>,
}

impl Partner {
    fn start(area: &Arc<HeapArea>, policy: WaitPolicy, op: fn(&HeapArea, u32, &WaitPolicy)) -> Partner {
        let (go, rx) = mpsc::channel::<u64>();
        let (tx, done) = mpsc::channel();
        let area = Arc::clone(area);
        let handle = thread::spawn(move || {
            while let Ok(iters) = rx.recv() {
                for _ in 0..iters {
                    op(&area, 1, &policy);
                }
                if tx.send(()).is_err() {
                    return;
                }
            }
        });
        Partner { go, done, handle: Some(handle) }
    }

    /// Runs `iters` fences on this thread (rank 0) against the partner.
    fn time(&self, area: &HeapArea, policy: &WaitPolicy, iters: u64, op: fn(&HeapArea, u32, &WaitPolicy)) -> Duration {
        self.go.send(iters).expect("partner alive");
        let t = Instant::now();
        for _ in 0..iters {
            op(area, 0, policy);
        }
        let d = t.elapsed();
        self.done.recv().expect("partner alive");
        d
    }
}

impl Drop for Partner {
    fn drop(&mut self) {
        let (go, _) = mpsc::channel();
        drop(std::mem::replace(&mut self.go, go));
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn peer(area: &HeapArea, me: u32, policy: &WaitPolicy) {
    peer_fence(area, &ThreadEnv, me, 1 - me, policy).expect("peer fence");
}

fn window(area: &HeapArea, me: u32, policy: &WaitPolicy) {
    window_fence(area, &ThreadEnv, me, policy).expect("window fence");
}

fn threads(c: &mut Criterion) {
    let mut g = c.benchmark_group("fence/2-threads");
    for (name, op) in [("peer_fence", peer as fn(&HeapArea, u32, &WaitPolicy)), ("window_fence", window)] {
        let area = Arc::new(HeapArea::new(2));
        let policy = WaitPolicy::DEFAULT;
        let partner = Partner::start(&area, policy, op);
        g.bench_function(name, |b| b.iter_custom(|iters| partner.time(&area, &policy, iters, op)));
    }
    g.finish();
}

criterion_group!(benches, layout, threads);
criterion_main!(benches);
