//! The engine with toy jobs: no stage, no config, only the Job interface.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

use super::*;
use crate::warehouse::{Partition, TableDef};

/// The toy study's tables: the engine is handed its tables, it knows none of its own.
const PAIRS: TableDef = TableDef { name: "pairs", partition_cols: &["service"] };
const SCORES: TableDef = TableDef { name: "scores", partition_cols: &["service", "model"] };
const TABLES: &[TableDef] = &[PAIRS, SCORES];

#[derive(Serialize, Deserialize)]
struct Row {
    v: u64,
}

/// Writes `value` (or the sum of its inputs' rows plus `value`); counts its runs. `param` is a
/// setting that need not change the row.
#[derive(Serialize)]
struct Toy {
    param: u64,
    value: u64,
    #[serde(skip)]
    inputs: Vec<Partition>,
    #[serde(skip)]
    runs: Arc<AtomicUsize>,
    #[serde(skip)]
    fail: bool,
    #[serde(skip)]
    panic: bool,
}

impl Job for Toy {
    fn run(&self, cx: &Ctx) -> Result<Output> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        if self.panic {
            panic!("toy panic");
        }
        if self.fail {
            bail!("toy failure");
        }
        let mut v = self.value;
        for p in &self.inputs {
            v += cx.read::<Row>(p)?.iter().map(|r| r.v).sum::<u64>();
        }
        cx.publish(&[Row { v }], None)
    }
}

struct Study {
    runs: Vec<Arc<AtomicUsize>>,
}

/// a (pairs/service=a) → b (scores/service=a/model=m), c (scores/…/model=n, fails if asked).
fn pipeline(dir: &std::path::Path, a_value: u64, b_param: u64, c_fails: bool) -> (Pipeline, Study) {
    let runs: Vec<Arc<AtomicUsize>> = (0..3).map(|_| Arc::new(AtomicUsize::new(0))).collect();
    let mut g = Graph { nodes: Vec::new(), tables: TABLES };
    let pa = Partition::new(PAIRS, &["a"]);
    // a's output depends on its value only through the row, not its parameters.
    let a = g.add(Node::new(
        "dedupe",
        pa.clone(),
        Toy { param: a_value, value: a_value % 2, inputs: vec![], runs: runs[0].clone(), fail: false, panic: false },
    ));
    g.add(
        Node::new(
            "score",
            Partition::new(SCORES, &["a", "m"]),
            Toy {
                param: b_param,
                value: b_param,
                inputs: vec![pa.clone()],
                runs: runs[1].clone(),
                fail: false,
                panic: false,
            },
        )
        .deps(vec![a])
        .model("m"),
    );
    g.add(
        Node::new(
            "score",
            Partition::new(SCORES, &["a", "n"]),
            Toy { param: 0, value: 0, inputs: vec![pa], runs: runs[2].clone(), fail: c_fails, panic: false },
        )
        .deps(vec![a])
        .model("n"),
    );
    (Pipeline::new(g, &dir.join("wh"), 2, &dir.join("toy.toml")).unwrap(), Study { runs })
}

fn counts(s: &Study) -> Vec<usize> {
    s.runs.iter().map(|r| r.load(Ordering::SeqCst)).collect()
}

fn reasons(p: &Pipeline) -> Vec<(Action, String)> {
    p.plan().unwrap().items.into_iter().map(|i| (i.action, i.reason)).collect()
}

#[test]
fn runs_once_then_reuses_and_plan_agrees() {
    let dir = tempfile::tempdir().unwrap();
    let ui = Ui::new(true);
    let (p, s) = pipeline(dir.path(), 1, 10, false);
    assert_eq!(reasons(&p)[1], (Action::Run, "new model `m`".into()));
    let info = p.run(&[], &ui).unwrap();
    assert_eq!((info.ran, info.reused), (3, 0));
    assert_eq!(counts(&s), vec![1, 1, 1]);
    let rows: Vec<Row> = p.warehouse().read(&Partition::new(SCORES, &["a", "m"])).unwrap();
    assert_eq!(rows[0].v, 11);

    let (p, s) = pipeline(dir.path(), 1, 10, false);
    assert!(reasons(&p).iter().all(|(a, _)| *a == Action::Reuse));
    let info = p.run(&[], &ui).unwrap();
    assert_eq!((info.ran, info.reused), (0, 3));
    assert_eq!(counts(&s), vec![0, 0, 0]);
}

#[test]
fn a_changed_parameter_reruns_that_node_and_an_unchanged_output_stops_the_ripple() {
    let dir = tempfile::tempdir().unwrap();
    let ui = Ui::new(true);
    pipeline(dir.path(), 1, 10, false).0.run(&[], &ui).unwrap();
    // a's parameter changes but its row (1 % 2 == 3 % 2) does not: downstream "may run", then is reused.
    let (p, s) = pipeline(dir.path(), 3, 10, false);
    let r = reasons(&p);
    assert_eq!(r[0], (Action::Run, "changed parameter".into()));
    assert_eq!(r[1].0, Action::MaybeRun);
    assert!(r[1].1.contains("pairs/service=a"), "{}", r[1].1);
    p.run(&[], &ui).unwrap();
    assert_eq!(counts(&s), vec![1, 0, 0]);
    // b's own parameter: only b.
    let (p, s) = pipeline(dir.path(), 3, 20, false);
    assert_eq!(reasons(&p)[1], (Action::Run, "changed parameter".into()));
    p.run(&[], &ui).unwrap();
    assert_eq!(counts(&s), vec![0, 1, 0]);
    // a's output really changes: both scores re-run, for a changed input.
    let (p, s) = pipeline(dir.path(), 4, 20, false);
    p.run(&[], &ui).unwrap();
    assert_eq!(counts(&s), vec![1, 1, 1]);
}

#[test]
fn a_failure_keeps_finished_partitions_and_the_next_run_does_only_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let ui = Ui::new(true);
    let (p, _) = pipeline(dir.path(), 1, 10, true);
    let e = p.run(&[], &ui).unwrap_err().to_string();
    assert!(e.contains("1 partition(s) did not finish") && e.contains("model=n"), "{e}");
    let (p, s) = pipeline(dir.path(), 1, 10, false);
    let info = p.run(&[], &ui).unwrap();
    assert_eq!((info.ran, info.reused), (1, 2));
    assert_eq!(counts(&s), vec![0, 0, 1]);
}

#[test]
fn only_runs_the_named_stage_and_rejects_unknown_ones() {
    let dir = tempfile::tempdir().unwrap();
    let ui = Ui::new(true);
    let (p, _) = pipeline(dir.path(), 1, 10, false);
    let e = p.run(&["nope".into()], &ui).unwrap_err().to_string();
    assert!(e.contains("no such stage") && e.contains("dedupe, score"), "{e}");
    let e = p.run(&["score".into()], &ui).unwrap_err().to_string();
    assert!(e.contains("excluded by --only"), "{e}");
}

#[test]
fn a_node_may_not_depend_on_a_later_one() {
    let dir = tempfile::tempdir().unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let toy = || Toy { param: 0, value: 0, inputs: vec![], runs: runs.clone(), fail: false, panic: false };
    let nodes = vec![
        Node::new("dedupe", Partition::new(PAIRS, &["a"]), toy()).deps(vec![1]),
        Node::new("dedupe", Partition::new(PAIRS, &["b"]), toy()),
    ];
    let e = Pipeline::new(Graph { nodes, tables: TABLES }, dir.path(), 1, dir.path()).err().unwrap().to_string();
    assert!(e.contains("declared after it"), "{e}");
}

/// Issue 30: a partition is current only if its file is what was published: a truncated or
/// rewritten file (same size) re-runs its partition, naming why; an untouched one is not even read.
#[test]
fn a_partition_whose_file_changed_on_disk_runs_again() {
    let dir = tempfile::tempdir().unwrap();
    let ui = Ui::new(true);
    pipeline(dir.path(), 1, 10, false).0.run(&[], &ui).unwrap();
    let (p, _) = pipeline(dir.path(), 1, 10, false);
    let wh = p.warehouse();
    let file = wh.file(&Partition::new(SCORES, &["a", "m"]));
    let bytes = std::fs::read(&file).unwrap();
    // Same size, other content.
    let mut flipped = bytes.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0xff;
    std::fs::write(&file, &flipped).unwrap();
    assert_eq!(reasons(&p)[1], (Action::Run, "output on disk is not what was published (content changed)".into()));
    // Shorter.
    std::fs::write(&file, &bytes[..bytes.len() - 1]).unwrap();
    assert_eq!(reasons(&p)[1], (Action::Run, "output on disk is not what was published (size changed)".into()));
    // The published bytes again (a newer mtime): hashed, found equal, current.
    std::fs::write(&file, &bytes).unwrap();
    assert_eq!(reasons(&p)[1], (Action::Reuse, "up to date".into()));
    std::fs::remove_file(&file).unwrap();
    assert_eq!(reasons(&p)[1], (Action::Run, "output missing from the warehouse".into()));
    let (p, s) = pipeline(dir.path(), 1, 10, false);
    p.run(&[], &ui).unwrap();
    assert_eq!(counts(&s), vec![0, 1, 0]);
}

/// Issue 30: a job that panics fails its own partition; the others finish and their state is kept.
#[test]
fn a_panicking_job_fails_only_its_partition() {
    let dir = tempfile::tempdir().unwrap();
    let ui = Ui::new(true);
    let runs: Vec<Arc<AtomicUsize>> = (0..3).map(|_| Arc::new(AtomicUsize::new(0))).collect();
    let toy = |i: usize, panic: bool| Toy {
        param: i as u64,
        value: 1,
        inputs: vec![],
        runs: runs[i].clone(),
        fail: false,
        panic,
    };
    let mut g = Graph { nodes: Vec::new(), tables: TABLES };
    g.add(Node::new("dedupe", Partition::new(PAIRS, &["a"]), toy(0, false)));
    g.add(Node::new("dedupe", Partition::new(PAIRS, &["b"]), toy(1, true)));
    g.add(Node::new("dedupe", Partition::new(PAIRS, &["c"]), toy(2, false)));
    let p = Pipeline::new(g, &dir.path().join("wh"), 1, &dir.path().join("toy.toml")).unwrap();
    let e = p.run(&[], &ui).unwrap_err().to_string();
    assert!(e.contains("service=b") && e.contains("panic") && e.contains("toy panic"), "{e}");
    let st = State::load(&p.warehouse()).unwrap();
    assert!(st.partitions.contains_key("pairs/service=a") && st.partitions.contains_key("pairs/service=c"), "{st:?}");
    assert!(!st.partitions.contains_key("pairs/service=b"));
}

/// A job over `items` that can only do the ones `can` allows this time: it keeps what its last
/// publish under the same key did ([`Ctx::kept`]) and owes the rest.
#[derive(Serialize)]
struct Owing {
    items: Vec<u64>,
    #[serde(skip)]
    can: Arc<std::sync::Mutex<Vec<u64>>>,
    #[serde(skip)]
    asked: Arc<std::sync::Mutex<Vec<u64>>>,
}

impl Job for Owing {
    fn run(&self, cx: &Ctx) -> Result<Output> {
        let kept: Vec<Row> = cx.kept()?;
        let mut rows: Vec<Row> = kept.into_iter().filter(|r| r.v < 1000).collect();
        let can = self.can.lock().unwrap().clone();
        let todo: Vec<u64> = self.items.iter().copied().filter(|i| !rows.iter().any(|r| r.v == *i)).collect();
        for i in todo {
            self.asked.lock().unwrap().push(i);
            // A failure is a row too (v + 1000), and is owed.
            rows.push(Row { v: if can.contains(&i) { i } else { i + 1000 } });
        }
        rows.sort_by_key(|r| r.v % 1000);
        let failed = rows.iter().filter(|r| r.v >= 1000).count() as u64;
        Ok(cx.publish(&rows, None)?.owing(Owed { count: failed, what: "failed items to do again".into() }))
    }
}

/// Issue 44: a partition published with failures runs again under the same key, says why, sees
/// the rows it kept and does only what it owed; once complete it is current.
#[test]
fn a_partition_that_owes_work_runs_again_for_exactly_that() {
    let dir = tempfile::tempdir().unwrap();
    let ui = Ui::new(true);
    let can = Arc::new(std::sync::Mutex::new(vec![1, 3]));
    let asked = Arc::new(std::sync::Mutex::new(Vec::new()));
    let build = || {
        let mut g = Graph { nodes: Vec::new(), tables: TABLES };
        let job = Owing { items: vec![1, 2, 3], can: can.clone(), asked: asked.clone() };
        let a = g.add(Node::new("generate", Partition::new(PAIRS, &["a"]), job));
        let toy = Toy {
            param: 0,
            value: 0,
            inputs: vec![Partition::new(PAIRS, &["a"])],
            runs: Arc::new(AtomicUsize::new(0)),
            fail: false,
            panic: false,
        };
        g.add(Node::new("score", Partition::new(SCORES, &["a", "m"]), toy).deps(vec![a]));
        Pipeline::new(g, &dir.path().join("wh"), 1, &dir.path().join("toy.toml")).unwrap()
    };
    let p = build();
    p.run(&[], &ui).unwrap();
    assert_eq!(*asked.lock().unwrap(), [1, 2, 3]);
    let st = State::load(&p.warehouse()).unwrap();
    assert_eq!(st.partitions["pairs/service=a"].owed, Some(Owed { count: 1, what: "failed items to do again".into() }));
    let r = reasons(&build());
    assert_eq!(r[0], (Action::Run, "1 failed items to do again".into()));
    assert_eq!(r[1].0, Action::MaybeRun);
    // Still failing: asked again, and only it.
    asked.lock().unwrap().clear();
    build().run(&[], &ui).unwrap();
    assert_eq!(*asked.lock().unwrap(), [2]);
    // It succeeds: the partition is complete, downstream sees the new rows, then nothing runs.
    can.lock().unwrap().push(2);
    asked.lock().unwrap().clear();
    let info = build().run(&[], &ui).unwrap();
    assert_eq!((asked.lock().unwrap().clone(), info.ran), (vec![2], 2));
    let rows: Vec<Row> = p.warehouse().read(&Partition::new(SCORES, &["a", "m"])).unwrap();
    assert_eq!(rows[0].v, 6);
    assert!(State::load(&p.warehouse()).unwrap().partitions["pairs/service=a"].owed.is_none());
    assert!(reasons(&build()).iter().all(|(a, _)| *a == Action::Reuse));
    asked.lock().unwrap().clear();
    assert_eq!(build().run(&[], &ui).unwrap().ran, 0);
    assert!(asked.lock().unwrap().is_empty());
}
