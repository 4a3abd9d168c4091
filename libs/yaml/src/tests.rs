//! Crafted cases; expected canonical JSON strings were produced with ruamel.yaml 0.19.1's
//! safe loader and Python 3.11's `json.dumps(sort_keys=True, ensure_ascii=False,
//! separators=(',', ':'), default=str)`.

use std::time::{Duration, Instant};

use super::*;

fn canon(text: &str) -> String {
    match load(text, &Limits::default()) {
        Ok(v) => canon_json(&v).unwrap_or_else(|| "<python raises>".into()),
        Err(e) => format!("ERR {:?}", e.kind),
    }
}

fn load_err(text: &str, limits: &Limits) -> YamlError {
    load(text, limits).expect_err("input must be rejected")
}

#[test]
fn on_is_a_string_key_and_yaml_1_1_words_stay_strings() {
    let v = load("on: [push]\njobs: {}\n", &Limits::default()).unwrap();
    let m = v.as_map().unwrap();
    assert!(v.is_mapping());
    assert_eq!(m.keys().next(), Some(&Value::Str("on".into())));
    assert!(m.contains_key("jobs"));
    assert_eq!(canon("a: [on, off, yes, no, y, n, On, NO]"), r#"{"a":["on","off","yes","no","y","n","On","NO"]}"#);
}

#[test]
fn core_schema_resolution_matches_ruamel() {
    assert_eq!(canon("a: [true, True, TRUE, false, FALSE, tRUE]"), r#"{"a":[true,true,true,false,false,"tRUE"]}"#);
    assert_eq!(
        canon("a: [~, null, Null, NULL, nULL]\nb:\nc: {x: }"),
        r#"{"a":[null,null,null,null,"nULL"],"b":null,"c":{"x":null}}"#
    );
    assert_eq!(canon("a: [~, , x]"), "ERR Syntax");
    assert_eq!(canon("017: 0o17"), r#"{"17":15}"#);
    assert_eq!(canon("a: [0x1F, 0b101, 1_000, +12, 0o, 0o9, 0X1F]"), r#"{"a":[31,5,1000,12,"0o","0o9","0X1F"]}"#);
    assert_eq!(
        canon("a: [.inf, -.Inf, .NaN, 1e-5, 1.0, 1e16, 123456789.123, 1., .5e3, 12e03, 1e400, -0.0]"),
        r#"{"a":[Infinity,-Infinity,NaN,1e-05,1.0,1e+16,123456789.123,1.0,".5e3",12000.0,Infinity,-0.0]}"#
    );
    assert_eq!(canon("a: 10000000000000000000000000000"), r#"{"a":10000000000000000000000000000}"#);
    assert_eq!(canon("a: \"12\"\nb: '1.5'\nc: |\n  x\n"), r#"{"a":"12","b":"1.5","c":"x\n"}"#);
    // Numbers keep their written text for the score stage's tree labels.
    let v = load("a: 0x1F\nb: 1.50\nc: TRUE", &Limits::default()).unwrap();
    let texts: Vec<_> = v.as_map().unwrap().iter().map(|(_, v)| v.scalar_text().unwrap().to_string()).collect();
    assert_eq!(texts, ["0x1F", "1.50", "TRUE"]);
}

#[test]
fn block_scalars_at_end_of_input_keep_no_invented_line_break() {
    assert_eq!(canon("a: |\n  x"), r#"{"a":"x"}"#);
    assert_eq!(canon("a: |\n  x\n"), r#"{"a":"x\n"}"#);
    assert_eq!(canon("a: >\n  x\n  y"), r#"{"a":"x y"}"#);
    assert_eq!(canon("a: |+\n  x"), r#"{"a":"x"}"#);
    assert_eq!(canon("a: |-\n  x\n"), r#"{"a":"x"}"#);
    assert_eq!(canon("a: |\n  x\nb: 1"), r#"{"a":"x\n","b":1}"#);
    assert_eq!(canon("a: |\n  x\n  "), r#"{"a":"x\n"}"#);
    assert_eq!(canon("a: |+\n  x\n\n  "), r#"{"a":"x\n\n"}"#);
    assert_eq!(canon("a: |\n  x\r\n  y"), r#"{"a":"x\ny"}"#);
    assert_eq!(canon("- |\n  x\n- |\n  y"), r#"["x\n","y"]"#);
}

#[test]
fn timestamps_print_as_python_str_and_invalid_dates_fail() {
    assert_eq!(canon("a: 2024-01-02"), r#"{"a":"2024-01-02"}"#);
    assert_eq!(canon("a: 2024-01-02T10:11:12.5Z"), r#"{"a":"2024-01-02 10:11:12.500000+00:00"}"#);
    assert_eq!(canon("a: 2024-13-45"), "ERR Construct");
    // check-jsonschema's loader keeps them as text, so the date is not checked there.
    let v = load_with("a: 2024-13-45", &Limits::default(), &Options::check_jsonschema(false)).unwrap();
    assert_eq!(to_json(&v), serde_json::json!({"a": "2024-13-45"}));
    // A date key is not a JSON key type: json.dumps raises.
    assert_eq!(canon("2024-01-02: x"), "<python raises>");
}

#[test]
fn canonical_keys_follow_python_sorting_and_key_rules() {
    assert_eq!(canon("{2: a, 1.5: b, true: c}"), r#"{"true":"c","1.5":"b","2":"a"}"#);
    assert_eq!(canon("b: 1\na: 2\nB: 3\n\u{e9}: 4"), "{\"B\":3,\"a\":2,\"b\":1,\"\u{e9}\":4}");
    assert_eq!(canon("true: 1\n2: 3"), r#"{"true":1,"2":3}"#);
    assert_eq!(canon("null: 1"), r#"{"null":1}"#);
    assert_eq!(canon("a: 1\n1: 2"), "<python raises>");
    assert_eq!(canon("? [1, 2]\n: x"), "<python raises>");
    assert_eq!(canon("? {a: 1}\n: x"), "ERR Construct");
    assert_eq!(
        canon("a: \"tab\\there \\u0001 \\\" \\\\ \u{2028}\""),
        "{\"a\":\"tab\\there \\u0001 \\\" \\\\ \u{2028}\"}"
    );
}

#[test]
fn anchors_aliases_and_merge_keys() {
    assert_eq!(canon("b: &x {a: 1}\nc:\n  <<: *x\n  d: 2"), r#"{"b":{"a":1},"c":{"a":1,"d":2}}"#);
    // Own keys win over merged ones; in a list earlier mappings win over later ones.
    let text = "x: &x {a: 1, b: 1}\ny: &y {b: 2, c: 2}\nz:\n  <<: [*x, *y]\n  c: 3\n";
    assert_eq!(canon(text), r#"{"x":{"a":1,"b":1},"y":{"b":2,"c":2},"z":{"a":1,"b":1,"c":3}}"#);
    // Insertion order is ruamel's: merged keys first (from the reversed list), then own keys.
    let z = load(text, &Limits::default()).unwrap();
    let keys: Vec<_> = z.as_map().unwrap().get("z").unwrap().as_map().unwrap().keys().cloned().collect();
    assert_eq!(keys, [Value::Str("b".into()), Value::Str("c".into()), Value::Str("a".into())]);
    // A mapping with `<<` takes duplicate keys silently (last wins), as ruamel does, unless
    // nothing is merged (an empty mapping or list): then they are errors, as in ruamel.
    assert_eq!(canon("b: &x {a: 1}\nc:\n  <<: *x\n  d: 2\n  d: 3"), r#"{"b":{"a":1},"c":{"a":1,"d":3}}"#);
    assert_eq!(canon("<<: {}\nb: 1\nb: 2\n"), "ERR DuplicateKey { path: \"/b\" }");
    assert_eq!(canon("? <<\n: []\n~: a\n~: b\n"), "ERR DuplicateKey { path: \"/~0\" }");
    assert_eq!(canon("<<: 1"), "ERR Construct");
    assert_eq!(canon("<<: [1]"), "ERR Construct");
    assert_eq!(canon("a: <<"), "ERR Tag");
    assert_eq!(canon("'<<': 1"), r#"{"<<":1}"#);
    assert_eq!(canon("a: {<<: {x: 1}, <<: {y: 2}}"), "ERR DuplicateKey { path: \"/a/<<\" }");
    // Aliases copy scalars with their text, and sequences.
    assert_eq!(canon("a: &n 0x10\nb: *n\nc: &s [1, 2]\nd: *s"), r#"{"a":16,"b":16,"c":[1,2],"d":[1,2]}"#);
    let e = load_err("a: *nope", &Limits::default());
    assert_eq!(e.kind, ErrorKind::Syntax, "{e}");
    let e = load_err("a: &r [*r]", &Limits::default());
    assert!(matches!(e.kind, ErrorKind::Alias | ErrorKind::Syntax), "{e}");
}

#[test]
fn duplicate_keys_are_errors_with_path_and_position() {
    let e = load_err("jobs:\n  build:\n    runs-on: a\n    runs-on: b\n", &Limits::default());
    assert_eq!(e.kind, ErrorKind::DuplicateKey { path: "/jobs/build/runs-on".into() });
    assert_eq!((e.line, e.column), (4, 5));
    // Python's key equality: 1 and 1.0 are the same key.
    let e = load_err("1: a\n1.0: b", &Limits::default());
    assert!(matches!(e.kind, ErrorKind::DuplicateKey { .. }));
    let e = load_err("steps:\n  - {a: 1, a: 2}\n", &Limits::default());
    assert_eq!(e.kind, ErrorKind::DuplicateKey { path: "/steps/0/a".into() });
    // A merged-in mapping that is never built on its own does not raise.
    assert_eq!(canon("a:\n  <<: {x: 1, x: 2}\n"), r#"{"a":{"x":2}}"#);
}

#[test]
fn single_document_only() {
    assert_eq!(canon("---\na: 1\n...\n"), r#"{"a":1}"#);
    for text in ["a: 1\n---\n", "a: 1\n...\n---\nb: 2", "--- 1\n--- 2\n"] {
        let e = load_err(text, &Limits::default());
        assert_eq!(e.kind, ErrorKind::MultipleDocuments, "{text:?}");
    }
    assert_eq!(canon(""), "null");
    assert_eq!(canon("# only a comment\n"), "null");
    assert!(!load("- a\n- b", &Limits::default()).unwrap().is_mapping());
}

/// Where ruamel reads `...` with no document open (checked with ruamel.yaml 0.19.1): an elided
/// example in real documentation (CircleCI's concurrency guide) begins with one.
#[test]
fn a_document_end_with_no_document_open_fails_as_in_ruamel() {
    for text in [
        "...\n",
        "# c\n\n...\na: 1\n",
        "...\n---\na: 1\n",
        "a: 1\n...\n...\nb: 2\n",
        "... # c\na: 1\n",
        "\u{feff}...\na: 1\n",
    ] {
        let e = load_err(text, &Limits::default());
        assert_eq!(e.kind, ErrorKind::Syntax, "{text:?}");
        assert!(e.message.contains("found '<document end>'"), "{text:?}: {}", e.message);
    }
    let e = load_err("# c\n\n...\na: 1\n", &Limits::default());
    assert_eq!((e.line, e.column), (3, 1));
    // Markers that close a document, and text that only begins with dots, load as before.
    assert_eq!(canon("---\n...\n"), "null");
    assert_eq!(canon("...x: 1\n"), r#"{"...x":1}"#);
    assert_eq!(canon("a: |\n  ...\n"), r#"{"a":"...\n"}"#);
    assert_eq!(load_all("a: 1\n...\n---\nb: 2\n", &Limits::default()).unwrap().len(), 2);
}

#[test]
fn tags_follow_the_safe_loader() {
    assert_eq!(
        canon("a: !!str 12\nb: !!int \"12\"\nc: !!float \"1\"\nd: !!bool \"yes\"\ne: ! 12\nf: !!null \"\""),
        r#"{"a":"12","b":12,"c":1.0,"d":true,"e":12,"f":null}"#
    );
    assert_eq!(load_err("a: !Ref x", &Limits::default()).kind, ErrorKind::Tag);
    assert_eq!(load_err("if: !cancelled()", &Limits::default()).kind, ErrorKind::Tag);
    assert_eq!(load_err("a: !!str [a]", &Limits::default()).kind, ErrorKind::Construct);
    assert_eq!(load_err("a: =", &Limits::default()).kind, ErrorKind::Tag);
    assert_eq!(canon("? =\n: 1"), r#"{"=":1}"#);
    let gitlab = Options::check_jsonschema(true);
    let v = load_with("script:\n  - !reference [.setup, script]\n", &Limits::default(), &gitlab).unwrap();
    assert_eq!(to_json(&v), serde_json::json!({"script": [[".setup", "script"]]}));
    assert_eq!(load_err("a: !reference [x]", &Limits::default()).kind, ErrorKind::Tag);
}

#[test]
fn to_json_stringifies_keys_like_check_jsonschema() {
    let v = load("true: 1\n~: 2\n1.5: 3\n? [a, 1]\n: 4\n7: 5\n1e-5: 6", &Limits::default()).unwrap();
    assert_eq!(to_json(&v), serde_json::json!({"True": 1, "None": 2, "1.5": 3, "('a', 1)": 4, "7": 5, "1e-05": 6}));
}

#[test]
fn errors_carry_line_and_column() {
    let e = load_err("a: 1\nb: [1, 2\nc: 3\n", &Limits::default());
    assert_eq!(e.kind, ErrorKind::Syntax);
    assert!(e.line >= 2, "{e}");
    let e = load_err("a: 1\nb: x\u{7f}y\n", &Limits::default());
    assert_eq!((e.kind.clone(), e.line, e.column), (ErrorKind::UnacceptableCharacter, 2, 5));
    assert!(e.to_string().contains("line 2, column 5"), "{e}");
}

fn assert_fast(what: &str, f: impl FnOnce() -> YamlError, kind: ErrorKind) {
    let start = Instant::now();
    let e = f();
    let took = start.elapsed();
    assert_eq!(e.kind, kind, "{what}: {e}");
    // A guard against unbounded work only: the limits stop these at once on a quiet machine.
    assert!(took < Duration::from_secs(60), "{what} took {took:?}");
}

#[test]
fn billion_laughs_fails_fast() {
    let mut text = String::from("a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n");
    let names = ["a", "b", "c", "d", "e", "f", "g", "h", "i"];
    for w in names.windows(2) {
        let refs = vec![format!("*{}", w[0]); 9].join(",");
        text.push_str(&format!("{}: &{} [{}]\n", w[1], w[1], refs));
    }
    assert_fast("billion laughs", || load_err(&text, &Limits::default()), ErrorKind::TooManyNodes);
    // Long strings multiply too: the byte budget stops them even under the node budget.
    let mut text = format!("a: &a \"{}\"\n", "x".repeat(1 << 20));
    text.push_str("b: &b [*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b]\n");
    assert_fast("string bomb", || load_err(&text, &Limits::default()), ErrorKind::ExpansionTooLarge);
}

#[test]
fn deep_nesting_fails_fast() {
    let flow = "[".repeat(10_000);
    assert_fast("10k [", || load_err(&flow, &Limits::default()), ErrorKind::TooDeep);
    let maps = "{a: ".repeat(10_000) + "1" + &"}".repeat(10_000);
    assert_fast("10k {a:", || load_err(&maps, &Limits::default()), ErrorKind::TooDeep);
    let block: String = (0..10_000).map(|i| format!("{}a:\n", " ".repeat(i % 2000))).collect();
    let e = load(&block, &Limits::default());
    assert!(e.is_err());
    // Under the limit nesting loads (and drops) without recursion trouble.
    let ok = "[".repeat(100) + &"]".repeat(100);
    assert!(load(&ok, &Limits::default()).is_ok());
}

#[test]
fn huge_scalars_fail_fast() {
    let big = format!("a: {}", "x".repeat(100 << 20));
    assert_fast("100 MB scalar", || load_err(&big, &Limits::default()), ErrorKind::InputTooLarge);
    // Without the input bound the scalar bound still holds, but only once the scanner has read
    // the scalar: linear time, so bounded, yet not instant (the input bound is what makes it so).
    let limits = Limits { max_input_bytes: usize::MAX, ..Limits::default() };
    let start = Instant::now();
    assert_eq!(load_err(&big, &limits).kind, ErrorKind::ScalarTooLong);
    assert!(start.elapsed() < Duration::from_secs(60), "took {:?}", start.elapsed());
    let two_mb = format!("a: \"{}\"", "y".repeat(2 << 20));
    assert_fast("2 MB quoted scalar", || load_err(&two_mb, &Limits::default()), ErrorKind::ScalarTooLong);
}

/// `load_all` cases: (text, `json.dumps(list(load_all(text)), sort_keys=True, ...)` from
/// ruamel.yaml 0.19.1's safe loader, "ERR" where it raises, "<python raises>" where the dump does).
const LOAD_ALL_CASES: &[(&str, &str)] = &[
    ("", "[]"),
    ("---", "[null]"),
    ("# only a comment\n", "[]"),
    ("a: 1\n---\n", r#"[{"a":1},null]"#),
    ("a: 1\n...\n", r#"[{"a":1}]"#),
    ("--- 1\n--- 2\n", "[1,2]"),
    ("a: 1\n---\nb: 2\n", r#"[{"a":1},{"b":2}]"#),
    ("a: &x 1\n---\nb: *x\n", "ERR"),
    ("a: &x 1\n---\nb: &x 2\nc: *x\n", r#"[{"a":1},{"b":2,"c":2}]"#),
    ("--- &a [1]\n--- *a\n", "ERR"),
    ("x: &a {k: 1}\n---\ny:\n  <<: *a\n", "ERR"),
    ("a: &x {k: 1}\nb: *x\n---\nc: &x [2]\nd: *x\n", r#"[{"a":{"k":1},"b":{"k":1}},{"c":[2],"d":[2]}]"#),
    ("a: 1\n---\nb: [\n", "ERR"),
    ("a: 1\n---\na: 1\na: 2\n", "ERR"),
    ("--- !Ref x\n--- 1\n", "ERR"),
    ("--- 1\n--- 2024-13-45\n", "ERR"),
    ("a: 1\nb\n---\n", "ERR"),
    ("---\n...\n---\n...\n", "[null,null]"),
    ("%YAML 1.2\n---\na: 1\n...\n%YAML 1.2\n---\nb: 2\n", r#"[{"a":1},{"b":2}]"#),
    ("--- |\n  x", r#"["x"]"#),
    ("--- |\n  x\n--- >\n  y", r#"["x\n","y"]"#),
    ("- a\n--- !!str\n", r#"[["a"],""]"#),
    ("a: 1\n--- # c\n# d\n", r#"[{"a":1},null]"#),
    (
        "on: [push]\n---\n0x1F: [yes, no, ~, 1.50, 2024-01-02]\n",
        r#"[{"on":["push"]},{"31":["yes","no",null,1.5,"2024-01-02"]}]"#,
    ),
    ("---\n---\n---\n", "[null,null,null]"),
    ("'a'\n---\n- {b: c}\n", r#"["a",[{"b":"c"}]]"#),
    ("a: 1\n---\n1: x\nb: y\n", "<python raises>"),
];

fn canon_all(text: &str) -> String {
    match load_all(text, &Limits::default()) {
        Ok(docs) => docs
            .iter()
            .map(canon_json)
            .collect::<Option<Vec<_>>>()
            .map_or_else(|| "<python raises>".into(), |d| format!("[{}]", d.join(","))),
        Err(_) => "ERR".into(),
    }
}

#[test]
fn load_all_matches_ruamel_load_all() {
    let wrong: Vec<String> = LOAD_ALL_CASES
        .iter()
        .filter(|(text, want)| canon_all(text) != *want)
        .map(|(text, want)| format!("{text:?}: ours {} ruamel {want}", canon_all(text)))
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));

    // Live differential check when python3 has ruamel.yaml.
    const PEER: &str = r#"
import json, sys
from ruamel.yaml import YAML
out = []
for t in json.load(sys.stdin):
    try:
        docs = list(YAML(typ="safe", pure=True).load_all(t))
    except Exception:
        out.append("ERR")
        continue
    try:
        out.append(json.dumps(docs, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str))
    except Exception:
        out.append("<python raises>")
print(json.dumps(out))
"#;
    use std::io::Write;
    use std::process::{Command, Stdio};
    let Ok(mut child) = Command::new("python3")
        .args(["-c", PEER])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    else {
        assert!(
            std::env::var_os("DOC2CI_REQUIRE_PEERS").is_none(),
            "DOC2CI_REQUIRE_PEERS is set and the peer is missing (run scripts/deps.sh test)"
        );
        println!("no python3: compared with the recorded ruamel results only");
        return;
    };
    let texts: Vec<&str> = LOAD_ALL_CASES.iter().map(|(t, _)| *t).collect();
    child.stdin.take().unwrap().write_all(serde_json::to_string(&texts).unwrap().as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("No module named 'ruamel'"), "the ruamel peer failed:\n{stderr}");
        assert!(
            std::env::var_os("DOC2CI_REQUIRE_PEERS").is_none(),
            "DOC2CI_REQUIRE_PEERS is set and the peer is missing (run scripts/deps.sh test)"
        );
        println!("python3 lacks ruamel.yaml: compared with the recorded results only");
        return;
    }
    let peer: Vec<String> = serde_json::from_slice(&out.stdout).expect("the peer prints JSON");
    assert_eq!(peer.len(), texts.len());
    let wrong: Vec<String> = texts
        .iter()
        .zip(&peer)
        .filter(|(t, p)| canon_all(t) != **p)
        .map(|(t, p)| format!("{t:?}: ours {} live ruamel {p}", canon_all(t)))
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn load_all_of_one_document_is_load() {
    let texts = [
        "a: 1\n",
        "---\na: &x {k: 1}\nb: *x\n...\n",
        "- |\n  x",
        "---",
        "x: &x {a: 1, b: 1}\nz:\n  <<: [*x]\n  c: 3\n",
    ];
    for text in texts {
        let one = load(text, &Limits::default()).unwrap();
        assert_eq!(load_all(text, &Limits::default()).unwrap(), vec![one], "{text:?}");
    }
    // The errors are the same ones, located alike.
    for text in ["a: 1\na: 2\n", "a: [1,\n", "a: !Ref x\n", "a: x\u{7f}\n"] {
        assert_eq!(load_all(text, &Limits::default()).unwrap_err(), load_err(text, &Limits::default()), "{text:?}");
    }
}

#[test]
fn load_all_errors_name_the_failing_document() {
    let e = load_all("a: 1\n---\nb: 1\nb: 2\n", &Limits::default()).unwrap_err();
    assert_eq!((e.kind, e.line), (ErrorKind::DuplicateKey { path: "/b".into() }, 4));
    let e = load_all("a: &x 1\n---\nb: *x\n", &Limits::default()).unwrap_err();
    assert_eq!((e.kind.clone(), e.line, e.column), (ErrorKind::Alias, 3, 4), "{e}");
    let v = load_all_with("a: 1\n---\nb: 2024-13-45\n", &Limits::default(), &Options::check_jsonschema(false)).unwrap();
    assert_eq!(
        v.iter().map(to_json).collect::<Vec<_>>(),
        [serde_json::json!({"a": 1}), serde_json::json!({"b": "2024-13-45"})]
    );
}

#[test]
fn load_all_limits_count_the_whole_stream() {
    // Each document has 4 nodes and 6 scalar bytes: one loads under the limits, three do not.
    let one = "[ab, cd, ef]\n";
    let three = "[ab, cd, ef]\n---\n[ab, cd, ef]\n---\n[ab, cd, ef]\n";
    let nodes = Limits { max_nodes: 10, ..Limits::default() };
    assert!(load_all(one, &nodes).is_ok());
    assert_eq!(load_all(three, &nodes).unwrap_err().kind, ErrorKind::TooManyNodes);
    let bytes = Limits { max_total_scalar_bytes: 15, ..Limits::default() };
    assert!(load_all(one, &bytes).is_ok());
    assert_eq!(load_all(three, &bytes).unwrap_err().kind, ErrorKind::ExpansionTooLarge);
    // Empty documents count too, so a stream of them is bounded by the node budget.
    let empties = "---\n".repeat(11);
    assert_eq!(load_all(&"---\n".repeat(10), &nodes).unwrap().len(), 10);
    assert_eq!(load_all(&empties, &nodes).unwrap_err().kind, ErrorKind::TooManyNodes);
    // Depth is per document; the input size is the whole stream's.
    let deep = "[[[1]]]\n---\n[[[2]]]\n";
    let shallow = Limits { max_depth: 3, ..Limits::default() };
    assert_eq!(load_all(deep, &shallow).unwrap().len(), 2);
    let small = Limits { max_input_bytes: deep.len() - 1, ..Limits::default() };
    assert_eq!(load_all(deep, &small).unwrap_err().kind, ErrorKind::InputTooLarge);
    // A bomb in a later document fails fast as in a single one.
    let mut bomb =
        String::from("ok: 1\n---\na: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n");
    let names = ["a", "b", "c", "d", "e", "f", "g", "h", "i"];
    for w in names.windows(2) {
        let refs = vec![format!("*{}", w[0]); 9].join(",");
        bomb.push_str(&format!("{}: &{} [{}]\n", w[1], w[1], refs));
    }
    assert_fast(
        "billion laughs in a second document",
        || load_all(&bomb, &Limits::default()).unwrap_err(),
        ErrorKind::TooManyNodes,
    );
}
