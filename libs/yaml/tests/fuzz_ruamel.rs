//! Differential fuzzing of the loader against ruamel.yaml (issue 31): documents generated from a
//! CI-flavoured YAML grammar and mutated at random (a fixed seed, so the suite's cases are the
//! same every run), loaded by both; each must give the same data (`canon_json` against
//! `json.dumps(sort_keys=True)` of `YAML(typ='safe', pure=True).load`) or both refuse it.
//!
//! A difference is allowed only when it is one of the crate's documented differences (see
//! `DIFFERENCES` below and the crate's doc); any other fails with the document. More cases:
//! `DOC2CI_FUZZ_CASES=200000 cargo test --release -p doc2ci-yaml --test fuzz_ruamel` (what
//! `bench/fuzz.sh` runs). The peer is `peers/validity.py --canon`.

use std::io::Write;
use std::path::Path;
use std::process::Command;

/// SplitMix64: a fixed sequence from a seed, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.below(xs.len())]
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

const KEYS: &[&str] = &[
    "on",
    "jobs",
    "steps",
    "run",
    "uses",
    "with",
    "env",
    "name",
    "runs-on",
    "script",
    "image",
    "stages",
    "variables",
    "version",
    "workflows",
    "language",
    "matrix",
    "include",
    "needs",
    "\"quoted key\"",
    "'single'",
    "123",
    "true",
    "null",
    "~",
    "a b",
    "x:y",
    "<<",
    "1.5",
    "2001-12-14",
];

const SCALARS: &[&str] = &[
    "push",
    "ubuntu-latest",
    "echo hi",
    "npm test",
    "actions/checkout@v4",
    "1",
    "-2",
    "0",
    "007",
    "0o17",
    "0x1F",
    "1_000",
    "1.0",
    "1e3",
    "-.5",
    ".inf",
    "-.Inf",
    ".nan",
    "true",
    "True",
    "TRUE",
    "false",
    "yes",
    "no",
    "on",
    "off",
    "y",
    "n",
    "null",
    "Null",
    "~",
    "",
    "2001-12-14",
    "2001-12-14t21:59:43.10-05:00",
    "2001-12-14 21:59:43.10 -5",
    "12:30:45",
    "\"double \\\"quoted\\\" \\u00e9 \\x41\"",
    "'single ''quoted'''",
    "'#not a comment'",
    "a #comment",
    "a#b",
    "http://example.com:8080/x",
    "${{ github.sha }}",
    "$CI_COMMIT_SHA",
    "!!str 12",
    "!!int \"12\"",
    "!custom tagged",
    "\"\\ud83d\\ude00\"",
    "\"\\t tab\"",
    "- not a seq",
    "@x",
    "`x",
    "{a: 1}",
    "[1, 2]",
    "[a, {b: c}]",
    "{}",
    "[]",
    "&anc value",
    "*anc",
    "\"multi\n  line\"",
    "plain\n  folded",
    "é ü 中文",
    "\"\\0\"",
    "'",
    "\"",
    "?",
    ":",
];

/// A block mapping of CI-like keys at `indent`.
fn mapping(r: &mut Rng, indent: usize, depth: usize, out: &mut String) {
    let n = 1 + r.below(4);
    for _ in 0..n {
        out.push_str(&" ".repeat(indent));
        if r.chance(5) {
            out.push_str("? ");
            out.push_str(r.pick(KEYS));
            out.push('\n');
            out.push_str(&" ".repeat(indent));
            out.push(':');
        } else {
            out.push_str(r.pick(KEYS));
            out.push(':');
        }
        value(r, indent, depth, out);
    }
}

/// A value after `key:` (or `-`): inline, or a nested block on the next lines.
fn value(r: &mut Rng, indent: usize, depth: usize, out: &mut String) {
    match if depth == 0 { 0 } else { r.below(7) } {
        0 | 1 => {
            out.push(' ');
            if r.chance(8) {
                out.push_str("&a ");
            }
            out.push_str(r.pick(SCALARS));
            if r.chance(8) {
                out.push_str(" # comment");
            }
            out.push('\n');
        }
        2 | 3 => {
            out.push('\n');
            mapping(r, indent + 2, depth - 1, out);
        }
        4 => {
            out.push('\n');
            for _ in 0..1 + r.below(3) {
                out.push_str(&" ".repeat(indent + if r.chance(50) { 0 } else { 2 }));
                out.push('-');
                value(r, indent + 2, depth - 1, out);
            }
        }
        5 => {
            out.push_str(if r.chance(50) { " |" } else { " >" });
            out.push_str(r.pick(&["", "-", "+", "2"]));
            out.push('\n');
            for _ in 0..1 + r.below(3) {
                out.push_str(&" ".repeat(indent + 2));
                out.push_str(r.pick(SCALARS));
                out.push('\n');
            }
        }
        _ => {
            out.push(' ');
            out.push_str(r.pick(&[
                "*a",
                "{a: 1, b: [x, y]}",
                "[push, pull_request]",
                "{ <<: *a, c: d }",
                "!!set {a, b}",
            ]));
            out.push('\n');
        }
    }
}

fn document(r: &mut Rng) -> String {
    let mut out = String::new();
    if r.chance(10) {
        out.push_str(r.pick(&["---\n", "%YAML 1.2\n---\n", "# header\n", "--- !!map\n"]));
    }
    let depth = 1 + r.below(3);
    mapping(r, 0, depth, &mut out);
    if r.chance(5) {
        out.push_str(r.pick(&["...\n", "---\nsecond: doc\n"]));
    }
    out
}

const TOKENS: &[&str] = &[
    ":", ": ", "-", "- ", " ", "  ", "\n", "\t", "{", "}", "[", "]", ",", "'", "\"", "#", "&", "*", "!", "|", ">", "?",
    "%", "@", "\\", "\r\n", "...",
];

/// One random edit of `text`: a character range deleted, a token inserted, a line duplicated,
/// moved or re-indented.
fn mutate(r: &mut Rng, text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    match r.below(5) {
        0 if !chars.is_empty() => {
            let at = r.below(chars.len());
            let len = 1 + r.below(3.min(chars.len() - at));
            chars[..at].iter().chain(&chars[at + len..]).collect()
        }
        1 => {
            let at = r.below(chars.len() + 1);
            let mut s: String = chars[..at].iter().collect();
            s.push_str(r.pick(TOKENS));
            s.extend(&chars[at..]);
            s
        }
        2 if !lines.is_empty() => {
            let i = r.below(lines.len());
            let mut v = lines.clone();
            v.insert(i, lines[i]);
            v.concat()
        }
        3 if lines.len() > 1 => {
            let (i, j) = (r.below(lines.len()), r.below(lines.len()));
            let mut v = lines.clone();
            v.swap(i, j);
            v.concat()
        }
        _ if !lines.is_empty() => {
            let i = r.below(lines.len());
            let mut v: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
            v[i] = if r.chance(50) { format!(" {}", v[i]) } else { v[i].trim_start_matches(' ').to_string() };
            v.concat()
        }
        _ => text.to_string(),
    }
}

/// The cases: half generated documents, half mutations of them (one to three edits).
fn cases(seed: u64, n: usize) -> Vec<String> {
    let mut r = Rng(seed);
    (0..n)
        .map(|i| {
            let doc = document(&mut r);
            if i % 2 == 0 {
                return doc;
            }
            let mut m = doc;
            for _ in 0..1 + r.below(3) {
                m = mutate(&mut r, &m);
            }
            m
        })
        .collect()
}

/// What doc2ci-yaml makes of a text, as the peer reports it: hex of the canonical JSON, `-` when
/// the load fails, `!` when Python could not dump what it loaded.
fn ours(text: &str) -> String {
    match doc2ci_yaml::load(text, &doc2ci_yaml::Limits::default()) {
        Err(_) => "-".into(),
        Ok(v) => match doc2ci_yaml::canon_json(&v) {
            Some(s) => s.bytes().map(|b| format!("{b:02x}")).collect(),
            None => "!".into(),
        },
    }
}

/// The documented differences: a text one of them covers may load differently.
const DIFFERENCES: &[(&str, fn(&str) -> bool)] = &[
    ("YAML 1.1 tags ruamel builds and doc2ci refuses (!!set, !!binary, !!omap, !!pairs)", |t| {
        ["!!set", "!!binary", "!!omap", "!!pairs"].iter().any(|x| t.contains(x))
    }),
    ("a %YAML 1.1 directive", |t| t.contains("%YAML 1.1")),
    ("explicitly tagged scalars (Python's int()/float() corners)", |t| t.contains("!!int") || t.contains("!!float")),
    ("NEL, U+2028, U+2029 as line breaks", |t| t.contains(['\u{85}', '\u{2028}', '\u{2029}'])),
    ("a flow mapping closed at column 0", |t| t.lines().any(|l| l.starts_with('}'))),
    ("a quoted scalar over several lines, continued at an indentation saphyr refuses and ruamel accepts", |t| {
        t.lines().any(|l| {
            let unescaped = l.replace("\\\\", "").replace("\\\"", "").replace("''", "");
            unescaped.matches('"').count() % 2 == 1 || unescaped.matches('\'').count() % 2 == 1
        })
    }),
    ("a comment right after a closing quote or bracket, with no space between (`\"x\"#`, `{}#`)", |t| {
        ["\"#", "'#", "}#", "]#"].iter().any(|p| t.contains(p))
    }),
    ("a tab outside quoted scalars (YAML 1.2 allows it in more places than ruamel's reader does)", |t| {
        t.lines().any(|l| {
            let mut quoted = None;
            l.chars().any(|c| {
                match (quoted, c) {
                    (None, '"' | '\'') => quoted = Some(c),
                    (Some(q), c) if c == q => quoted = None,
                    _ => {}
                }
                c == '\t' && quoted.is_none()
            })
        })
    }),
    ("a flow collection over several lines (continued at column 0, or `:` on the next line)", |t| {
        t.lines().any(|l| l.matches(['[', '{']).count() > l.matches([']', '}']).count())
    }),
    ("a block scalar whose leading blank lines are less indented than its text (ruamel refuses)", |t| {
        let lines: Vec<&str> = t.lines().collect();
        lines.windows(2).any(|w| {
            let head = w[0].trim_end();
            (head.ends_with('|') || head.ends_with('>') || head.ends_with("|-") || head.ends_with(">-")
                || head.ends_with("|+") || head.ends_with(">+"))
                && w[1].trim().is_empty()
        })
    }),
    ("an indicator where a node should start (`[x,: y]`, `[?x]`, `{|a}`, a block scalar header alone on its line, a `?` at the end)", |t| {
        [",:", "[:", "{:", "[?", "{?", "[|", "{|", "[>", "{>", ", :", ",?"].iter().any(|p| t.contains(p))
            || t.lines().any(|l| matches!(l.trim(), "|" | ">" | "|-" | ">-" | "?"))
            || t.trim_end().ends_with('?')
    }),
    ("an unknown directive (`%FOO`): YAML 1.2 ignores it, ruamel refuses it", |t| {
        t.lines().any(|l| l.starts_with('%') && !l.starts_with("%YAML ") && !l.starts_with("%TAG "))
    }),
    ("`:` right before a flow indicator (`{a:}`): YAML 1.2 reads key `a` with an empty value, ruamel key `a:`", |t| {
        [":}", ":]", ":,"].iter().any(|p| t.contains(p))
    }),
    ("a tab on an otherwise blank line: ruamel refuses it after a block scalar", |t| {
        t.lines().any(|l| l.contains('\t') && l.trim().is_empty())
    }),
    ("surrogate escapes (ruamel keeps lone surrogates, doc2ci refuses them)", |t| {
        let low = t.to_ascii_lowercase();
        ["\\ud8", "\\ud9", "\\uda", "\\udb", "\\udc", "\\udd", "\\ude", "\\udf"].iter().any(|p| low.contains(p))
    }),
];

fn peer(texts: &[String]) -> Option<Vec<String>> {
    let root = Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR")).join("../..");
    let dir = tempfile::tempdir().ok()?;
    let (inp, out) = (dir.path().join("in.jsonl"), dir.path().join("out.txt"));
    let mut f = std::fs::File::create(&inp).ok()?;
    for t in texts {
        writeln!(f, "{}", serde_json::json!({ "text": t })).ok()?;
    }
    drop(f);
    let run = Command::new("python3")
        .current_dir(root)
        .args(["-m", "peers.validity", "--canon"])
        .arg(&inp)
        .arg(&out)
        .output()
        .ok()?;
    if !run.status.success() {
        if std::env::var_os("DOC2CI_REQUIRE_PEERS").is_some() {
            panic!("the peer failed: {}", String::from_utf8_lossy(&run.stderr));
        }
        return None;
    }
    Some(std::fs::read_to_string(&out).ok()?.lines().map(str::to_string).collect())
}

#[test]
fn the_loader_agrees_with_ruamel_on_generated_and_mutated_documents() {
    let n: usize = std::env::var("DOC2CI_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(4000);
    let texts = cases(31, n);
    let Some(theirs) = peer(&texts) else {
        eprintln!("ruamel.yaml is not installed: the differential fuzz did not run");
        return;
    };
    assert_eq!(theirs.len(), texts.len());
    let (mut agree, mut refused_both, mut explained) = (0usize, 0usize, std::collections::BTreeMap::new());
    let mut unexplained = Vec::new();
    for (t, p) in texts.iter().zip(&theirs) {
        let o = ours(t);
        if o == *p {
            agree += 1;
            refused_both += usize::from(o == "-");
            continue;
        }
        match DIFFERENCES.iter().find(|(_, covers)| covers(t)) {
            Some((why, _)) => *explained.entry(*why).or_insert(0usize) += 1,
            None => unexplained.push((t.clone(), o, p.clone())),
        }
    }
    eprintln!(
        "{n} cases: {agree} agree ({refused_both} refused by both), {} documented differences {explained:?}, {} other",
        explained.values().sum::<usize>(),
        unexplained.len()
    );
    let show: Vec<String> = unexplained
        .iter()
        .take(8)
        .map(|(t, o, p)| {
            let dec = |h: &str| {
                if h.len() < 2 {
                    return h.to_string();
                }
                let b: Vec<u8> =
                    (0..h.len() / 2).map(|i| u8::from_str_radix(&h[2 * i..2 * i + 2], 16).unwrap()).collect();
                String::from_utf8_lossy(&b).into_owned()
            };
            format!("{t:?}\n  doc2ci: {}\n  ruamel: {}", dec(o), dec(p))
        })
        .collect();
    assert!(unexplained.is_empty(), "{} undocumented differences, e.g.:\n{}", unexplained.len(), show.join("\n"));
    assert!(agree > n / 2, "the cases were too broken to compare anything");
}
