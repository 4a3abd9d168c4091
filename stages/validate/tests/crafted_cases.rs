//! Crafted cases for all four services: YAML edge cases (a quoted `on`, anchors, merge keys,
//! duplicate keys, several documents, tags, timestamps, hex and exponent numbers, tabs) and
//! valid and invalid files per schema. The expected verdicts are check-jsonschema's
//! (0.39.0, ruamel.yaml 0.19.1); when python3 has the peer, it is run and must still say so.

use std::fs;
use std::io::Write;
use std::path::PathBuf;
use std::process::Command;

use doc2ci_validate::{Service, Validator};

/// (service, text, parse_ok, schema_ok)
const CASES: &[(&str, &str, bool, bool)] = &[
    ("github-actions", "on: push\njobs:\n  build:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo hi\n", true, true),
    ("github-actions", "on: push\njobs:\n  build:\n    steps:\n      - run: echo hi\n", true, false),
    ("github-actions", "\"on\": [push]\njobs:\n  build:\n    runs-on: ubuntu-latest\n    steps: [{run: make}]\n", true, true),
    ("github-actions", "on: push\njobs:\n  build:\n    runs-on: ubuntu-latest\n    runs-on: macos-latest\n    steps: [{run: make}]\n", false, false),
    ("github-actions", "on: push\njobs:\n  build:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo hi\n---\n", false, false),
    ("github-actions", "on: push\njobs:\n  build:\n    runs-on: ubuntu-latest\n    if: !cancelled()\n    steps: [{run: make}]\n", false, false),
    ("github-actions", "name: 2024-01-02\non: push\njobs:\n  build:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo hi\n", true, true),
    ("github-actions", "name: 2024-13-45\non: push\njobs:\n  build:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo hi\n", true, true),
    ("github-actions", "on: push\njobs:\n  build:\n    runs-on: ubuntu-latest\n    timeout-minutes: 1e3\n    steps: [{run: make}]\n", true, true),
    ("github-actions", "on: push\njobs:\n  build:\n    runs-on: ubuntu-latest\n    timeout-minutes: 0x10\n    steps: [{run: make}]\n", true, true),
    ("github-actions", "on: push\njobs:\n  1:\n    runs-on: ubuntu-latest\n    steps: [{run: make}]\n", true, false),
    ("github-actions", "on: push\njobs:\n  build: &b\n    runs-on: ubuntu-latest\n    steps: [{run: make}]\n  test:\n    <<: *b\n    needs: build\n", true, true),
    ("github-actions", "on: push\njobs:\n  build:\n    runs-on: ubuntu-latest\n    env: &e {A: 1}\n    steps:\n      - run: make\n        env: *e\n", true, true),
    ("github-actions", "- name: Checkout\n  uses: actions/checkout@v4\n", false, false),
    ("github-actions", "", false, false),
    ("github-actions", "Here is the workflow you asked for.", false, false),
    ("github-actions", "on: push\njobs:\n  build:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n        with:\n          fetch-depth: 0\n      - run: |\n          echo one\n          echo two", true, true),
    ("github-actions", "on: push\njobs:\n  build:\n    runs-on: [self-hosted, linux]\n    permissions:\n      contents: write-all\n    steps: [{run: make}]\n", true, false),
    ("github-actions", "on:\n  schedule:\n    - cron: '0 0 * * *'\njobs:\n  b:\n    runs-on: ubuntu-latest\n    steps: [{run: make}]\n", true, true),
    ("github-actions", "on: push\njobs:\n  b:\n    runs-on: ubuntu-latest\n    steps:\n      - run: make\n    strategy:\n      matrix:\n        python: [3.9, \"3.10\", 3.11]\n", true, true),
    ("github-actions", "on: push\njobs:\n  b:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/setup-node@v4\n        with:\n          node-version: 20\n      - name: x\n", true, false),
    ("github-actions", "on: push\njobs:\n  b:\n    runs-on: ubuntu-latest\n    steps:\n    - run: echo\n\ttab\n", false, false),
    ("github-actions", "on: push\njobs:\n  b:\n    runs-on: ubuntu-latest\n    container:\n      image: node:20\n      ports: [80, \"443:443\"]\n    steps: [{run: make}]\n", true, true),
    ("github-actions", "on: [push, pull_request]\njobs:\n  b:\n    uses: octo/repo/.github/workflows/x.yml@main\n    secrets: inherit\n", true, true),
    ("circleci", "version: 2.1\njobs:\n  build:\n    docker:\n      - image: cimg/base:stable\n    steps:\n      - checkout\n      - run: make\nworkflows:\n  main:\n    jobs: [build]\n", true, true),
    ("circleci", "version: 2.1\njobs: 5\n", true, false),
    ("circleci", "jobs:\n  build:\n    docker:\n      - image: cimg/base:stable\n    steps: [checkout]\n", true, false),
    ("circleci", "version: 2.1\norbs:\n  node: circleci/node@5.0.2\nworkflows:\n  test:\n    jobs:\n      - node/test\n", true, true),
    ("gitlab-ci", "stages: [build, test]\nbuild:\n  stage: build\n  script:\n    - make\n", true, true),
    ("gitlab-ci", ".setup:\n  script: [echo setup]\nbuild:\n  script:\n    - !reference [.setup, script]\n    - make\n", true, true),
    ("gitlab-ci", "build:\n  script: 5\n", true, false),
    ("gitlab-ci", "build:\n  script: [make]\n  when: sometimes\n", true, false),
    ("gitlab-ci", "include:\n  - local: ci/build.yml\nvariables:\n  A: 1\n", true, true),
    ("gitlab-ci", "build:\n  image: ruby:3\n  script: [rake]\n  rules:\n    - if: $CI_COMMIT_BRANCH == \"main\"\n  artifacts:\n    expire_in: 1 week\n    paths: [out/]\n", true, true),
    ("gitlab-ci", "build:\n  script: [make]\n  x: !reference [a]\n  y: !reference b\n", false, false),
    ("travis-ci", "language: python\npython:\n  - \"3.9\"\nscript: pytest\n", true, true),
    ("travis-ci", "language: 5\n", true, false),
    ("travis-ci", "language: node_js\nnode_js: [18]\ndeploy:\n  provider: pages\n  skip_cleanup: true\n  on:\n    branch: main\n", true, true),
    ("travis-ci", "deploy:\n  provider: heroku\n  api_key: x\n", true, true),
    ("travis-ci", "language: ruby\nos: [linux, osx]\nmatrix:\n  allow_failures:\n    - os: osx\n", true, true),
];

fn schema(service: Service) -> Vec<u8> {
    let assets = match std::env::var_os("DOC2CI_ASSETS").filter(|d| !d.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(std::env::var_os("HOME").expect("HOME is set")).join(".cache/doc2ci/assets"),
    };
    let path = assets.join("schemas").join(format!("{}.json", service.name()));
    fs::read(&path).unwrap_or_else(|e| panic!("schema {} is missing ({e}): run `doc2ci setup`", path.display()))
}

fn validator() -> Validator {
    let schemas: Vec<(Service, Vec<u8>)> = Service::all().map(|s| (s, schema(s))).collect();
    Validator::new(schemas.iter().map(|(s, b)| (*s, &b[..]))).expect("the four vendored schemas compile")
}

#[test]
fn crafted_cases_match_check_jsonschema() {
    let v = validator();
    let mut wrong = Vec::new();
    for (i, (service, text, parse_ok, schema_ok)) in CASES.iter().enumerate() {
        let r = v.validate(service.parse().unwrap(), text).unwrap();
        if (r.parse_ok, r.schema_ok) != (*parse_ok, *schema_ok) {
            wrong.push(format!(
                "case {i} ({service}): ours ({}, {}), expected ({parse_ok}, {schema_ok}): {:?}",
                r.parse_ok, r.schema_ok, r.errors
            ));
        }
        assert_eq!(r.schema_ok, r.parse_ok && r.errors.is_empty());
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));

    let probe = Command::new("python3").args(["-c", "import check_jsonschema, ruamel.yaml"]).output();
    if !matches!(probe, Ok(ref o) if o.status.success()) {
        assert!(
            std::env::var_os("DOC2CI_REQUIRE_PEERS").is_none(),
            "DOC2CI_REQUIRE_PEERS is set and the peer is missing (run scripts/deps.sh test)"
        );
        println!("python3 lacks check-jsonschema/ruamel.yaml: compared with the recorded verdicts only");
        return;
    }
    let dir = std::env::temp_dir().join(format!("doc2ci-crafted-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    let (inp, out) = (dir.join("in.jsonl"), dir.join("out.tsv"));
    let mut f = fs::File::create(&inp).unwrap();
    for (service, text, _, _) in CASES {
        writeln!(f, "{}", serde_json::json!({"service": service, "text": text})).unwrap();
    }
    drop(f);
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR")).join("../..");
    let status = Command::new("python3")
        .current_dir(root)
        .args(["-m", "peers.validity", "--cases"])
        .arg(&inp)
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success(), "the peer script failed");
    let peer = fs::read_to_string(&out).unwrap();
    let _ = fs::remove_dir_all(&dir);
    for (line, (service, text, parse_ok, schema_ok)) in peer.lines().zip(CASES) {
        let f: Vec<&str> = line.split('\t').collect();
        assert_eq!(
            (f[1] == "1", f[2] == "1"),
            (*parse_ok, *schema_ok),
            "peer changed its verdict on {service} {text:?}: {line}"
        );
    }
    assert_eq!(peer.lines().count(), CASES.len());
}

#[test]
fn errors_name_the_instance_path_and_parse_position() {
    let v = validator();
    let r = v
        .validate(
            "github-actions".parse::<Service>().unwrap(),
            "on: push\njobs:\n  build:\n    steps:\n      - run: echo hi\n",
        )
        .unwrap();
    assert!(r.errors.iter().any(|e| e == "/jobs/build: \"runs-on\" is a required property"), "{:?}", r.errors);
    let r = v.validate("github-actions".parse::<Service>().unwrap(), "on: push\njobs:\n  b: [1,\n").unwrap();
    assert!(!r.parse_ok);
    assert_eq!(r.errors.len(), 1);
    assert!(r.errors[0].contains("line ") && r.errors[0].contains("column "), "{:?}", r.errors);
    let r = v.validate("github-actions".parse::<Service>().unwrap(), "a: 1\na: 2\n").unwrap();
    assert!(r.errors[0].contains("duplicate key \"a\""), "{:?}", r.errors);
    let r = v.validate("github-actions".parse::<Service>().unwrap(), "- a\n").unwrap();
    assert_eq!(r.errors, ["the document is a sequence, not a mapping"]);
    assert!(r.fragment);
}

#[test]
fn hostile_inputs_are_invalid_quickly() {
    let v = validator();
    let mut bomb = String::from("a: &a [x,x,x,x,x,x,x,x,x,x]\n");
    for (prev, name) in ["a", "b", "c", "d", "e", "f", "g", "h"].iter().zip(["b", "c", "d", "e", "f", "g", "h", "i"]) {
        bomb.push_str(&format!("{name}: &{name} [{}]\n", vec![format!("*{prev}"); 10].join(",")));
    }
    let deep = "[".repeat(10_000);
    let huge = format!("a: {}", "x".repeat(100 << 20));
    for text in [bomb, deep, huge] {
        let start = std::time::Instant::now();
        let r = v.validate("github-actions".parse::<Service>().unwrap(), &text).unwrap();
        assert!(!r.parse_ok && !r.schema_ok);
        // A guard against unbounded work only (the limits stop these at once; bench/ measures how fast).
        assert!(start.elapsed() < std::time::Duration::from_secs(60), "took {:?}", start.elapsed());
    }
}
