//! Containment: which of the reference's canonical leaves the output holds, at the best anchoring.

use std::collections::BTreeMap;

use crate::node::Node;
use crate::{Canon, Jobs, Service};

/// How much of a reference's configuration an output holds.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Containment {
    /// Reference leaves the output holds at the best anchoring.
    pub matched: usize,
    /// Reference leaves in all.
    pub total: usize,
    /// Paths (and values) of the leaves it misses, when explained; empty otherwise.
    pub missed: Vec<String>,
}

impl Containment {
    /// `matched / total`; 0 for a reference with nothing in it.
    pub fn recall(&self) -> f64 {
        if self.total == 0 {
            return 0.0;
        }
        self.matched as f64 / self.total as f64
    }
}

/// Leaves held: those the reference writes, then the defaults it leaves out. Ordered by the written
/// ones first, so an anchoring (which steps pair up, which jobs) is chosen by what the reference
/// writes, and two steps that share only their defaults never pair.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
struct Held {
    written: usize,
    defaults: usize,
}

impl Held {
    const WRITTEN: Held = Held { written: 1, defaults: 0 };
    const DEFAULT: Held = Held { written: 0, defaults: 1 };

    fn count(self) -> usize {
        self.written + self.defaults
    }
}

impl std::ops::Add for Held {
    type Output = Held;
    fn add(self, o: Held) -> Held {
        Held { written: self.written + o.written, defaults: self.defaults + o.defaults }
    }
}

impl std::iter::Sum for Held {
    fn sum<I: Iterator<Item = Held>>(it: I) -> Held {
        it.fold(Held::default(), |a, b| a + b)
    }
}

/// Records missed leaves when explaining; counts only otherwise.
struct Trace {
    on: bool,
    missed: Vec<String>,
    /// Keys where an empty mapping is a value of its own (the service's `empty_is_a_value`).
    strict: &'static [&'static str],
}

impl Trace {
    /// A trace that only counts, for trying candidates.
    fn quiet(&self) -> Trace {
        Trace { on: false, missed: Vec::new(), strict: self.strict }
    }

    fn child(&self, path: &str, seg: &str) -> String {
        if !self.on {
            return String::new();
        }
        if path.is_empty() {
            seg.to_string()
        } else if seg.starts_with('[') {
            format!("{path}{seg}")
        } else {
            format!("{path}.{seg}")
        }
    }

    fn miss_all(&mut self, n: &Node, path: &str) {
        if !self.on {
            return;
        }
        for (p, v) in n.leaf_paths() {
            let full = match (path.is_empty(), p.is_empty()) {
                (_, true) => path.to_string(),
                (true, false) => p,
                (false, false) if p.starts_with('[') => format!("{path}{p}"),
                (false, false) => format!("{path}.{p}"),
            };
            self.missed.push(format!("{full} = {v}"));
        }
    }
}

pub(crate) fn containment(service: &Service, reference: &Canon, output: &Canon, explain: bool) -> Containment {
    let total = reference.docs.iter().map(|(_, n)| n.leaves()).sum();
    let mut matched = 0;
    let mut trace = Trace { on: explain, missed: Vec::new(), strict: service.empty_is_a_value };
    for (_, r) in &reference.docs {
        let mut quiet = trace.quiet();
        let best = output.docs.iter().map(|(_, o)| (root(service, r, o, &mut quiet, ""), o)).max_by_key(|(m, _)| *m);
        match best {
            Some((m, o)) => {
                matched += m.count();
                if explain {
                    root(service, r, o, &mut trace, "");
                }
            }
            None => trace.miss_all(r, ""),
        }
    }
    Containment { matched, total, missed: trace.missed }
}

/// A whole-file reference against a whole-file output: jobs matched whatever their names.
fn root<'a>(service: &Service, r: &'a Node, o: &'a Node, t: &mut Trace, path: &str) -> Held {
    let (Node::Map(rm), Node::Map(om)) = (r, o) else { return matched(r, o, t, path) };
    match service.jobs {
        Jobs::None => matched(r, o, t, path),
        Jobs::Under(k) => rm
            .iter()
            .map(|(key, rv)| {
                let p = t.child(path, &key.label());
                match (key.as_str() == Some(k), rv, om.get(key)) {
                    (true, Node::Map(rj), Some(Node::Map(oj))) if !rv.is_bare() => {
                        assign(rj.iter().collect(), oj.iter().collect(), t, &p)
                    }
                    (_, _, Some(ov)) => matched(rv, ov, t, &p),
                    (_, _, None) => {
                        t.miss_all(rv, &p);
                        Held::default()
                    }
                }
            })
            .sum(),
        Jobs::TopLevelExcept(keywords) => {
            let is_job = |k: &Node| k.as_str().is_none_or(|k| !keywords.contains(&k));
            let jobs = |m: &'a BTreeMap<Node, Node>| m.iter().filter(|(k, _)| is_job(k)).collect::<Vec<_>>();
            // Global keywords by name, jobs whatever their names.
            entries(rm.iter().filter(|(k, _)| !is_job(k)), om, t, path) + assign(jobs(rm), jobs(om), t, path)
        }
    }
}

/// Leaves of `r` that `o` holds at the same place.
fn matched(r: &Node, o: &Node, t: &mut Trace, path: &str) -> Held {
    match (r, o) {
        // An empty mapping or list written as a value is held only by an empty one (`permissions: {}`
        // grants nothing); where it only says "no settings" the parent holds it by any mapping.
        (r, o) if r.is_bare() && o.is_bare() && std::mem::discriminant(r) == std::mem::discriminant(o) => Held::WRITTEN,
        (r, _) if r.is_bare() => {
            t.miss_all(r, path);
            Held::default()
        }
        (Node::Map(rm), Node::Map(om)) => entries(rm.iter(), om, t, path),
        (Node::Seq(rs), Node::Seq(os)) => align(rs, os, t, path),
        // A default the reference leaves out is how its job runs: the output holds it by leaving
        // it out too or by writing it, not by overriding it.
        (Node::Default(d), o) if o == &**d || matches!(o, Node::Default(e) | Node::Assumed(e) if e == d) => {
            Held::DEFAULT
        }
        (Node::Assumed(_), _) => Held::default(),
        (r, Node::Default(d) | Node::Assumed(d)) if r == &**d => Held::WRITTEN,
        _ if r == o => Held::WRITTEN,
        _ => {
            t.miss_all(r, path);
            Held::default()
        }
    }
}

/// Leaves of the reference entries that the output mapping holds under the same keys.
fn entries<'a>(
    rs: impl Iterator<Item = (&'a Node, &'a Node)>,
    om: &BTreeMap<Node, Node>,
    t: &mut Trace,
    path: &str,
) -> Held {
    let mut held_defaults = Vec::new();
    let held: Held = rs
        .map(|(k, rv)| {
            let p = t.child(path, &k.label());
            let lenient = k.as_str().is_none_or(|k| !t.strict.contains(&k));
            match om.get(k) {
                Some(Node::Map(_)) if lenient && rv.is_bare() && matches!(rv, Node::Map(_)) => Held::WRITTEN,
                Some(ov) => {
                    let h = matched(rv, ov, t, &p);
                    if t.on && h == Held::DEFAULT && matches!(rv, Node::Default(_)) {
                        held_defaults.push((rv, p));
                    }
                    h
                }
                None => {
                    t.miss_all(rv, &p);
                    Held::default()
                }
            }
        })
        .sum();
    // A mapping the output holds none of the written leaves of (another job, another step) is not
    // this one: agreeing on defaults alone is not holding it. (The defaults it held are recorded
    // only when explaining: counting, the hot path, allocates nothing.)
    if held.written == 0 && held.defaults > 0 {
        for (rv, p) in held_defaults {
            t.miss_all(rv, &p);
        }
        return Held::default();
    }
    held
}

/// The reference's items matched to the output's in order, gaps allowed on both sides, for the
/// most leaves (a weighted longest common subsequence). Items pair only on a written leaf.
fn align(rs: &[Node], os: &[Node], t: &mut Trace, path: &str) -> Held {
    let (n, m) = (rs.len(), os.len());
    let mut quiet = t.quiet();
    let mut score = vec![vec![Held::default(); m]; n];
    for (i, r) in rs.iter().enumerate() {
        for (j, o) in os.iter().enumerate() {
            score[i][j] = matched(r, o, &mut quiet, "");
        }
    }
    let mut best = vec![vec![Held::default(); m + 1]; n + 1];
    for i in 1..=n {
        for j in 1..=m {
            let s = score[i - 1][j - 1];
            let pair = if s.written > 0 { best[i - 1][j - 1] + s } else { Held::default() };
            best[i][j] = best[i - 1][j].max(best[i][j - 1]).max(pair);
        }
    }
    if t.on {
        // Walk the table back to the chosen pairs, then explain each reference item.
        let mut pairs = vec![None; n];
        let (mut i, mut j) = (n, m);
        while i > 0 && j > 0 {
            if best[i][j] == best[i - 1][j] {
                i -= 1;
            } else if best[i][j] == best[i][j - 1] {
                j -= 1;
            } else {
                pairs[i - 1] = Some(j - 1);
                i -= 1;
                j -= 1;
            }
        }
        for (i, r) in rs.iter().enumerate() {
            let p = t.child(path, &format!("[{i}]"));
            match pairs[i] {
                Some(j) => {
                    matched(r, &os[j], t, &p);
                }
                None => t.miss_all(r, &p),
            }
        }
    }
    best[n][m]
}

/// Jobs of the reference matched one-to-one to the output's whatever their names: greedily by
/// leaves held, a job of the same name first among equals (so a file is fully matched to itself).
fn assign(r: Vec<(&Node, &Node)>, o: Vec<(&Node, &Node)>, t: &mut Trace, path: &str) -> Held {
    let mut quiet = t.quiet();
    let mut cands: Vec<(Held, bool, usize, usize)> = Vec::with_capacity(r.len() * o.len());
    for (i, (rk, rv)) in r.iter().enumerate() {
        for (j, (ok, ov)) in o.iter().enumerate() {
            cands.push((matched(rv, ov, &mut quiet, ""), rk == ok, i, j));
        }
    }
    cands.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)).then(a.2.cmp(&b.2)).then(a.3.cmp(&b.3)));
    let (mut r_used, mut o_used) = (vec![None; r.len()], vec![false; o.len()]);
    let mut total = Held::default();
    for (s, _, i, j) in cands {
        if r_used[i].is_none() && !o_used[j] {
            r_used[i] = Some(j);
            o_used[j] = true;
            total = total + s;
        }
    }
    if t.on {
        for (i, (rk, rv)) in r.iter().enumerate() {
            let p = t.child(path, &rk.label());
            match r_used[i] {
                Some(j) => {
                    matched(rv, o[j].1, t, &p);
                }
                None => t.miss_all(rv, &p),
            }
        }
    }
    total
}
