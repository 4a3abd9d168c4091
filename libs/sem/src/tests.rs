use super::*;
use doc2ci_yaml::{load_all, Limits};

fn canon(service: &str, text: &str) -> Canon {
    canonical(service_of(service), &load_all(text, &Limits::default()).unwrap())
}

fn service_of(name: &str) -> &'static Service {
    service(name).unwrap()
}

fn recall(service: &str, r: &str, o: &str) -> Containment {
    containment_explained(service_of(service), &canon(service, r), &canon(service, o))
}

#[test]
fn github_shapes() {
    let gha = service_of("github-actions");
    let shape_of = |t: &str| shape(gha, &doc2ci_yaml::load(t, &Limits::default()).unwrap());
    assert_eq!(shape_of("on: push\njobs: {}\n"), Shape::File);
    assert_eq!(shape_of("jobs:\n  a:\n    runs-on: x\n    steps: [{run: make}]\n"), Shape::Workflow);
    assert_eq!(shape_of("runs-on: ubuntu-latest\nsteps:\n  - run: make\n"), Shape::Job);
    assert_eq!(shape_of("build:\n  runs-on: x\n  steps: [{run: a}]\ntest:\n  runs-on: x\n"), Shape::Jobs);
    assert_eq!(shape_of("name: Build\nrun: make\n"), Shape::Step);
    assert_eq!(shape_of("- uses: actions/checkout@v4\n- run: make\n"), Shape::Steps);
    assert_eq!(shape_of("push:\n  branches: [main]\nschedule:\n  - cron: '0 0 * * *'\n"), Shape::Triggers);
    assert_eq!(shape_of("foo: bar\n"), Shape::Unknown);
    assert_eq!(shape_of("- 1\n- 2\n"), Shape::Unknown);
    assert_eq!(shape_of("plain prose"), Shape::File);
}

#[test]
fn a_steps_fragment_is_contained_in_a_complete_workflow_that_adds_steps() {
    let r = "- uses: actions/setup-node@v4\n  with:\n    node-version: 18\n- run: npm test\n";
    let o = "on: [push]\njobs:\n  test:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n      - uses: actions/setup-node@v4\n        with:\n          node-version: '18'\n      - run: npm ci\n      - run: |\n          npm test\n";
    // Three written leaves and each step's `continue-on-error: false`; the job around the steps is
    // the lift's, so its defaults are not the fragment's to ask.
    let c = recall("github-actions", r, o);
    assert_eq!((c.matched, c.total), (5, 5), "{c:?}");
    assert!(!sem_exact(&canon("github-actions", r), &canon("github-actions", o)));
    // Out of order: only the longest in-order part counts.
    let swapped = "on: push\njobs:\n  t:\n    runs-on: x\n    steps:\n      - run: npm test\n      - uses: actions/setup-node@v4\n        with: {node-version: 18}\n";
    let c = recall("github-actions", r, swapped);
    assert_eq!((c.matched, c.total), (3, 5), "{c:?}");
    assert_eq!(
        c.missed,
        [
            "jobs.doc2ci-fragment.steps[1].continue-on-error = false (default)",
            "jobs.doc2ci-fragment.steps[1].run = npm test"
        ]
    );
}

#[test]
fn job_names_do_not_decide_containment_but_values_do() {
    let r = "on: push\njobs:\n  build:\n    runs-on: ubuntu-latest\n    steps: [{run: make}]\n";
    let o = "on: push\njobs:\n  compile:\n    runs-on: [ubuntu-latest]\n    steps: [{run: make}]\n  lint:\n    runs-on: x\n    steps: [{run: lint}]\n";
    assert_eq!(recall("github-actions", r, o).recall(), 1.0);
    let c = recall("github-actions", r, "on: push\njobs:\n  b:\n    runs-on: macos-latest\n    steps: [{run: make}]\n");
    assert_eq!(c.missed, ["jobs.build.runs-on[0] = ubuntu-latest"]);
}

#[test]
fn gitlab_jobs_are_the_top_level_keys_that_are_not_keywords() {
    let r = "stages: [build]\nbuild:\n  stage: build\n  script: make\n";
    let o = "stages: [build]\ncompile:\n  stage: build\n  image: gcc\n  script:\n    - make\n";
    // Three written leaves and the job's `when: on_success` and `allow_failure: false`.
    let c = recall("gitlab-ci", r, o);
    assert_eq!((c.matched, c.total), (5, 5), "{c:?}");
    let c = recall("gitlab-ci", r, "stages: [test]\ncompile:\n  stage: build\n  script: [make]\n");
    assert_eq!(c.missed, ["stages[0] = build"]);
}

#[test]
fn nothing_is_not_a_configuration() {
    let empty = canon("github-actions", "");
    assert!(!sem_exact(&empty, &empty));
    assert_eq!(containment(service_of("github-actions"), &empty, &empty).recall(), 0.0);
}

/// From the hand-coded sample: `permissions: {}` grants nothing, so a set of grants does not hold
/// it; elsewhere an empty mapping only says "no settings", which any mapping holds.
#[test]
fn an_empty_mapping_is_a_value_only_where_the_service_says_so() {
    assert_eq!(recall("github-actions", "permissions: {}\n", "permissions:\n  contents: read\n").recall(), 0.0);
    assert_eq!(recall("github-actions", "permissions: {}\n", "permissions: {}\non: push\n").recall(), 1.0);
    // Filled-in defaults do not make a mapping non-empty, and `strategy: {}` asks for no setting
    // (three written leaves, and the job's and the step's defaults: a job fragment is a whole job).
    let c = recall(
        "github-actions",
        "runs-on: x\nstrategy: {}\nsteps: [{run: a}]\n",
        "runs-on: x\nstrategy: {max-parallel: 2}\nsteps: [{run: a}]\n",
    );
    assert_eq!((c.matched, c.total), (6, 6), "{c:?}");
    assert_eq!(recall("circleci", "- checkout\n", "- checkout:\n    path: src\n").recall(), 1.0);
}

/// Issue 48: a default the reference leaves out is how its job runs, so an output that overrides
/// it does not contain the reference; one that writes it, or leaves it out too, does. Where the
/// rest of a file could set the key (a job that inherits, the job around a fragment), the
/// reference asks nothing of it.
#[test]
fn containment_asks_for_the_defaults_a_reference_runs_with() {
    let contains = |svc: &str, r: &str, o: &str| recall(svc, r, o).recall() == 1.0;
    let gl = "build:\n  script: make\n";
    assert!(contains("gitlab-ci", gl, "b:\n  script: [make]\n  when: on_success\n"));
    let c = recall("gitlab-ci", gl, "b:\n  script: [make]\n  when: manual\n");
    // `manual` also flips allow_failure's default to true.
    assert_eq!(c.missed, ["build.allow_failure = false (default)", "build.when = on_success (default)"]);
    assert!(!contains("gitlab-ci", gl, "b:\n  script: [make]\n  allow_failure: true\n"));
    // A job that extends a template may inherit `when`: none of its defaults are filled in.
    assert!(contains(
        "gitlab-ci",
        "b:\n  extends: .t\n  script: make\n",
        "b:\n  extends: .t\n  script: make\n  when: manual\n"
    ));

    let gha = "on: push\njobs:\n  t:\n    runs-on: x\n    steps: [{run: make}]\n";
    let with = |extra: &str| format!("on: push\njobs:\n  t:\n    runs-on: x\n{extra}    steps: [{{run: make}}]\n");
    assert!(contains("github-actions", gha, &with("    timeout-minutes: 360\n")));
    assert!(!contains("github-actions", gha, &with("    timeout-minutes: 5\n")));
    assert!(!contains("github-actions", gha, &with("    continue-on-error: true\n")));

    let cci = "version: 2.1\njobs:\n  b:\n    docker: [{image: x}]\n    steps: [checkout]\n";
    let par = "version: 2.1\njobs:\n  b:\n    docker: [{image: x}]\n    parallelism: 4\n    steps: [checkout]\n";
    assert!(!contains("circleci", cci, par));
    assert!(contains("circleci", par, par));

    // The job around a list of steps is the lift's: a fragment asks nothing of its timeout.
    assert!(contains("github-actions", "- run: make\n", &with("    timeout-minutes: 5\n")));
    // Two steps that share only their defaults do not pair up: the written leaf decides.
    let c = recall("github-actions", "- run: a\n- run: b\n", &with(""));
    assert_eq!((c.matched, c.total), (0, 4), "{c:?}");
    // Nor does a job: an unrelated one holds nothing, though it runs with the same defaults.
    let other = "on: push\njobs:\n  lint:\n    runs-on: y\n    steps: [{run: lint}]\n";
    let c = recall("github-actions", gha, other);
    assert_eq!((c.matched, c.total), (1, 6), "{c:?}");
    assert!(c.missed.contains(&"jobs.t.timeout-minutes = 360 (default)".to_string()), "{:?}", c.missed);
}
