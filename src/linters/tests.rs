//! The real tools, as `doc2ci setup` installed them (scripts/test.sh runs it before the tests):
//! confinement, hostile texts, and one bad text costing only its own verdict.

use std::time::{Duration, Instant};

use doc2ci_lint::Verdict;

use super::*;

fn tool(name: &str) -> &'static Tool {
    TOOLS.iter().find(|t| t.name == name).unwrap()
}

/// Held by the test that bounds the tools' wall time and by the test that keeps both cores busy
/// with tool processes: side by side on a 2-core machine, the bound measured the other test
/// (actionlint took 63 s beside it, 36 s alone).
static TIMED: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn limits() -> Limits {
    Limits { per_text: Duration::from_secs(20) }
}

fn findings(v: &Verdict) -> &[doc2ci_lint::Finding] {
    match v {
        Verdict::Findings(f) => f,
        Verdict::Unreadable(why) => panic!("not judged: {why}"),
    }
}

#[test]
fn every_tool_runs_on_this_machine() {
    for t in TOOLS {
        let v = probe(t).unwrap_or_else(|e| panic!("{}: {e}", t.name));
        assert!(!v.is_empty(), "{}", t.name);
    }
    assert!(crate::sandbox::offline_available(), "the lint tools run in a network namespace of their own");
}

#[test]
fn gitlab_rules_are_evaluated_confined() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("MARKER");
    let m = marker.display();
    let texts = [
        format!("build:\n  script: [echo]\n  rules:\n    - if: $CI == \"1\" || process.getBuiltinModule(\"fs\").writeFileSync(\"{m}\", \"x\")\n"),
        format!("build:\n  script: [echo]\n  rules:\n    - if: $CI == \"1\" || process.binding(\"spawn_sync\") || require(\"child_process\").execSync(\"touch {m}\")\n"),
        "include:\n  - remote: 'https://example.com/ci.yml'\nbuild:\n  script: [echo]\n".to_string(),
    ];
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let v = (tool("gitlab-ci-local").lint)(&refs, limits()).unwrap();
    assert!(!marker.exists(), "model text escaped gitlab-ci-local's confinement");
    for (t, v) in texts.iter().zip(&v) {
        assert!(!findings(v).is_empty(), "{t:?} passed: {v:?}");
    }
    // The remote include is not fetched: there is no network in the sandbox.
    assert_eq!(findings(&v[2])[0].rule, "include-unavailable", "{:?}", v[2]);
}

#[test]
fn gitlab_findings_name_the_problem() {
    let texts = [
        "build:\n  script: [make]\n",
        "test:\n  stage: tst\n  script: [make]\n",
        "test:\n  needs: [nope]\n  script: [make]\n",
        "test:\n  extends: .missing\n  script: [make]\n",
    ];
    let v = (tool("gitlab-ci-local").lint)(&texts, limits()).unwrap();
    let rules: Vec<Vec<&str>> = v.iter().map(|v| findings(v).iter().map(|f| f.rule.as_str()).collect()).collect();
    assert_eq!(rules, [vec![], vec!["stage-not-found"], vec!["needs-not-found"], vec!["extends-not-found"]]);
}

#[test]
fn run_scripts_are_checked_never_run() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("MARKER");
    let text = format!(
        "on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n      - run: $(touch {m}) && rm -rf / ; echo $X\n      - run: echo ${{{{ github.event.issue.title }}}}\n",
        m = marker.display()
    );
    let v = (tool("actionlint").lint)(&[&text], limits()).unwrap();
    let f = findings(&v[0]);
    assert!(f.iter().any(|f| f.rule == "shellcheck:SC2086" && f.line == Some(6)), "{f:?}");
    assert!(f.iter().any(|f| f.rule == "expression" && f.line == Some(7)), "{f:?}");
    let z = (tool("zizmor").lint)(&[&text], limits()).unwrap();
    assert!(findings(&z[0]).iter().any(|f| f.rule == "template-injection"), "{z:?}");
    assert!(!marker.exists(), "a run: script was executed");
}

#[test]
fn one_text_that_stops_zizmor_costs_only_its_own_verdict() {
    let texts = [
        "on: push\npermissions: {}\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo hi\n",
        // Valid against the schema, yet zizmor cannot load it (a job without steps): zizmor stops.
        "on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n",
        "on: push\njobs: [\n",
        "on: push\npermissions: {}\njobs:\n  b:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n",
    ];
    let v = (tool("zizmor").lint)(&texts, limits()).unwrap();
    assert_eq!(v[0], Verdict::Findings(vec![]));
    assert!(matches!(&v[1], Verdict::Unreadable(w) if w.contains("could not load")), "{:?}", v[1]);
    assert!(matches!(&v[2], Verdict::Unreadable(w) if w.contains("could not read")), "{:?}", v[2]);
    assert!(findings(&v[3]).iter().any(|f| f.rule == "unpinned-uses" || f.rule == "artipacked"), "{:?}", v[3]);
}

#[test]
fn circleci_parser_findings_and_orbs() {
    let texts = [
        "version: 2.1\njobs:\n  build:\n    docker: [{image: cimg/base:current}]\n    steps: [checkout]\nworkflows:\n  w:\n    jobs: [build]\n",
        "version: 2.1\njobs:\n  build:\n    docker: [{image: cimg/base:current}]\n    steps: [checkout]\nworkflows:\n  w:\n    jobs: [deploy]\n",
        "version: 2.1\norbs:\n  node: circleci/node@5.0.2\nworkflows:\n  w:\n    jobs: [node/test]\n",
    ];
    let v = (tool("circleci-config-parser").lint)(&texts, limits()).unwrap();
    assert_eq!(v[0], Verdict::Findings(vec![]));
    assert!(findings(&v[1])[0].message.contains("Job deploy not found"), "{:?}", v[1]);
    assert!(matches!(&v[2], Verdict::Unreadable(w) if w.contains("orbs")), "{:?}", v[2]);
}

#[test]
fn hostile_texts_end_quickly_with_a_verdict() {
    let _alone = TIMED.lock().unwrap_or_else(|p| p.into_inner());
    let bomb = {
        let mut s = "a: &a [x,x,x,x,x,x,x,x,x,x]\n".to_string();
        let names = b"abcdefghi";
        for w in names.windows(2) {
            let (p, n) = (w[0] as char, w[1] as char);
            s += &format!("{n}: &{n} [{}]\n", vec![format!("*{p}"); 10].join(","));
        }
        s
    };
    let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    let binary = "on: push\njobs:\n  a: \u{1}\u{2}\u{fffd}\n";
    for t in TOOLS {
        let start = Instant::now();
        let v = (t.lint)(&[&bomb, &deep, binary], limits()).unwrap_or_else(|e| panic!("{}: {e:#}", t.name));
        assert_eq!(v.len(), 3, "{}", t.name);
        assert!(start.elapsed() < Duration::from_secs(60), "{} took {:?}", t.name, start.elapsed());
    }
}

/// The proof of the completion rules on real data: every reference of the predecessor study that
/// is a fragment, completed; those whose completed file is schema-valid (valid fragments) must get
/// no finding from the wrapper, from either tool.
#[test]
fn completed_real_references_get_no_finding_from_their_wrapper() {
    use doc2ci_lint::{attribute, complete, Completion};
    let data = std::path::Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
        .join("../shared/data/llm4ci/GitHubActions_Docs.csv.gz");
    let f = std::fs::File::open(&data).unwrap_or_else(|e| panic!("{}: {e}", data.display()));
    let mut rdr = csv::Reader::from_reader(flate2::read::MultiGzDecoder::new(f));
    let refs: Vec<String> =
        rdr.deserialize::<std::collections::HashMap<String, String>>().map(|r| r.unwrap()["Code"].clone()).collect();
    let v = crate::resources::validator().unwrap();
    let service = "github-actions".parse::<doc2ci_validate::Service>().unwrap();
    let (mut fragments, mut wrapped, mut valid) = (0, Vec::new(), Vec::new());
    for r in &refs {
        if !v.validate(service, r).unwrap().fragment {
            continue;
        }
        fragments += 1;
        if let Completion::Wrapped(w) = complete(service, r) {
            if v.validate(service, &w.text).unwrap().schema_ok {
                valid.push(w.clone());
            }
            wrapped.push(w);
        }
    }
    let texts: Vec<&str> = valid.iter().map(|w| w.text.as_str()).collect();
    let mut report = Vec::new();
    for name in ["actionlint", "zizmor"] {
        let verdicts = (tool(name).lint)(&texts, limits()).unwrap();
        let (mut inside, mut outside) = (0, Vec::new());
        for (w, verdict) in valid.iter().zip(verdicts) {
            if let Verdict::Findings(found) = verdict {
                let (i, o) = attribute(w, found);
                inside += i.len();
                outside.extend(o.into_iter().map(|f| (w.rule, f.rule, f.message)));
            }
        }
        report.push(format!("{name}: {inside} findings in the fragments, {} on the wrappers", outside.len()));
        assert!(outside.is_empty(), "{name}: the wrapper caused findings: {:?}", &outside[..outside.len().min(5)]);
    }
    eprintln!(
        "{} references, {fragments} fragments, {} completed ({:.1}%), {} completed schema-valid; {}",
        refs.len(),
        wrapped.len(),
        100.0 * wrapped.len() as f64 / fragments as f64,
        valid.len(),
        report.join("; ")
    );
    assert!(wrapped.len() * 4 >= fragments * 3, "at least three quarters of the real fragments complete");
}

/// Issue 31: scratch folders are made by mkdtemp (unpredictable, 0700, never one someone prepared),
/// and a tool's writable memory is capped.
#[test]
fn scratch_folders_are_fresh_and_tools_have_a_memory_cap() {
    use std::os::unix::fs::PermissionsExt;
    let (a, b) = (scratch().unwrap(), scratch().unwrap());
    assert_ne!(a.0, b.0);
    for s in [&a, &b] {
        let m = std::fs::symlink_metadata(&s.0).unwrap();
        assert!(m.is_dir() && m.permissions().mode() & 0o777 == 0o700, "{}", s.0.display());
    }
    let python = std::path::Path::new("/usr/bin/python3");
    let ran = run(
        python,
        &["-c".into(), "b = bytearray(4 << 30); print(len(b))".into()],
        &a.0,
        None,
        Duration::from_secs(60),
    )
    .unwrap();
    assert!(!ran.status.is_some_and(|s| s.success()), "4 GiB were allocated: {}", ran.stdout);
    assert!(ran.stderr.contains("MemoryError"), "{}", ran.stderr);
}

/// Issue 36: each distinct text is linted once: duplicates in a call and texts judged by an earlier
/// call cost no tool run, and the verdicts are the tool's own.
#[test]
fn the_lint_cache_runs_each_distinct_text_once() {
    let dir = tempfile::tempdir().unwrap();
    for t in ["actionlint", "schema"] {
        let t = tool(t);
        let v = probe(t).unwrap();
        let texts =
            ["on: push\njobs: {}\n", "language: python\nscript: make\n", "on: push\njobs: {}\n", "language: [\n"];
        let direct = (t.lint)(&texts, limits()).unwrap();
        let (first, ran) = cache::lint(dir.path(), t, &v, &texts, limits()).unwrap();
        assert_eq!(first, direct, "{}", t.name);
        assert_eq!(ran, 3, "{}: the repeated text is linted once", t.name);
        let (again, ran) = cache::lint(dir.path(), t, &v, &texts, limits()).unwrap();
        assert_eq!(again, direct, "{}", t.name);
        assert_eq!(ran, 0, "{}: every verdict came from the cache", t.name);
    }
}

/// The driver (many texts per process, the schema compiled once) judges every text as the command
/// line does, one process per text: valid pipelines, each kind of finding the reader names, YAML
/// and schema errors, and a rule the JavaScript evaluation rejects.
#[test]
fn gitlab_driver_verdicts_equal_one_process_per_text() {
    let _alone = TIMED.lock().unwrap_or_else(|p| p.into_inner());
    let mut texts: Vec<String> = vec![
        "build:\n  script: [make]\n".into(),
        "stages: [build, test]\nbuild:\n  stage: build\n  script: make\ntest:\n  needs: [build]\n  script: [make test]\n".into(),
        "test:\n  stage: tst\n  script: [make]\n".into(),
        "test:\n  needs: [nope]\n  script: [make]\n".into(),
        "test:\n  extends: .missing\n  script: [make]\n".into(),
        "test:\n  image: node:20\n".into(),
        "a: [1\n".into(),
        "test:\n  script: 1\n  when: sometimes\n".into(),
        "test:\n  script: [x]\n  rules:\n    - if: $CI == \"x\" && (\n".into(),
        "test:\n  script: [x]\n  rules:\n    - if: $CI_COMMIT_BRANCH == \"main\"\n      when: manual\n".into(),
        ".tmpl:\n  script: [make]\njob:\n  extends: .tmpl\n  variables: {A: 1}\n".into(),
        "include:\n  - local: missing.yml\nbuild:\n  script: [echo]\n".into(),
        "default:\n  image: ruby:3.2\n  before_script: [bundle]\nrspec:\n  script: rspec\n".into(),
        "- make\n- make test\n".into(),
        // gitlab-ci-local warns of this with `console.log`: the warning is the text's output.
        "build:\n  script: [a]\n  script: [b]\n".into(),
        "build:\n  script: [a]\n  stage: nope\n  stage: other\n".into(),
        "just text".into(),
        "".into(),
    ];
    // The GitLab CI corpus of documented equivalences (both sides).
    let corpus = std::fs::read_to_string(
        std::path::Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap())
            .join("libs/sem/tests/corpus/gitlab-ci.yaml"),
    )
    .unwrap();
    // Each case's `a: |` and `b: |` block (their lines are indented by four spaces).
    let mut block: Option<String> = None;
    for line in corpus.lines().chain(["-"]) {
        match (&mut block, line.strip_prefix("    ")) {
            (Some(b), Some(rest)) => {
                b.push_str(rest);
                b.push('\n');
            }
            (Some(_), None) if line.is_empty() => block.as_mut().unwrap().push('\n'),
            _ => {
                texts.extend(block.take());
                if line == "  a: |" || line == "  b: |" {
                    block = Some(String::new());
                }
            }
        }
    }
    assert!(texts.len() >= 40, "{} texts", texts.len());
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let driver = (tool("gitlab-ci-local").lint)(&refs, limits()).unwrap();
    let one: Vec<Verdict> = {
        use rayon::prelude::*;
        refs.par_iter().map(|t| gitlab_ci_local::one_process(t, limits().per_text).unwrap()).collect()
    };
    for ((t, d), o) in texts.iter().zip(&driver).zip(&one) {
        assert_eq!(d, o, "{t:?}: the driver and the command line disagree");
    }
    let rejected = one.iter().filter(|v| !matches!(v, Verdict::Findings(f) if f.is_empty())).count();
    assert!(rejected >= 8 && rejected < texts.len() - 4, "{rejected} of {} rejected", texts.len());
}

/// The CircleCI driver reloads its parser only after the parser threw: a text it refused, one
/// refused before parsing and a valid one, in every order in one process, get the verdicts each
/// gets alone.
#[test]
fn circleci_verdicts_do_not_depend_on_the_texts_before() {
    let valid = "version: 2.1\njobs:\n  build:\n    docker: [{image: cimg/base:2024.01}]\n    steps: [checkout, {run: make}]\nworkflows:\n  main:\n    jobs: [build]\n";
    let thrown = valid.replace("jobs: [build]", "jobs: [nope]");
    let refused = "not: [a, config]\n";
    let texts = [valid, thrown.as_str(), refused];
    let alone: Vec<Verdict> =
        texts.iter().map(|t| (tool("circleci-config-parser").lint)(&[t], limits()).unwrap().remove(0)).collect();
    assert!(findings(&alone[0]).is_empty() && !findings(&alone[1]).is_empty(), "{alone:?}");
    for order in [[0, 1, 2, 0], [1, 0, 2, 0], [2, 0, 1, 0], [1, 2, 0, 1]] {
        let batch: Vec<&str> = order.iter().map(|&i| texts[i]).collect();
        let got = (tool("circleci-config-parser").lint)(&batch, limits()).unwrap();
        let want: Vec<&Verdict> = order.iter().map(|&i| &alone[i]).collect();
        assert_eq!(got.iter().collect::<Vec<_>>(), want, "order {order:?}");
    }
}

#[test]
fn each_tool_checks_one_service() {
    for t in TOOLS {
        let by: Vec<Service> = Service::all().filter(|s| s.def().lint_tools.contains(&t.name)).collect();
        assert_eq!(by.len(), 1, "{} is named by {by:?}: a tool checks exactly one service", t.name);
    }
    for s in Service::all() {
        let tools: Vec<&Tool> = for_service(s).collect();
        let validators: Vec<&str> = tools.iter().filter(|t| t.kind == "validator").map(|t| t.name).collect();
        assert_eq!(validators.len(), 1, "{s:?}: one validator decides lint validity, not {validators:?}");
        assert_eq!(tools[0].kind, "validator", "{s:?}: its validator's rows come first");
        assert!(tools.iter().all(|t| ["validator", "audit"].contains(&t.kind)), "{s:?}");
    }
}

#[test]
fn a_tool_gets_its_cpu_budget_a_private_home_and_single_threaded_runtimes() {
    let s = scratch().unwrap();
    let r = run(
        std::path::Path::new("/bin/sh"),
        &[
            "-c".into(),
            "ulimit -t; ulimit -d; echo $HOME ${CARGO_MANIFEST_DIR:-none} $RAYON_NUM_THREADS $TOKIO_WORKER_THREADS"
                .into(),
        ],
        &s.0,
        None,
        Duration::from_millis(7_300),
    )
    .unwrap();
    assert_eq!(r.stdout, format!("8\n{}\n{} none 1 1\n", TOOL_MEMORY / 1024, s.0.display()));
}
