//! What a CI configuration means, beyond how it is spelled.
//!
//! Owns: each service's fragment shapes (what part of a file a text is: the lint stage completes
//! fragments by them, so the two agree on what a fragment is), its documented equivalent spellings
//! collapsed to one canonical form (one file per service under `services/`, each rule citing the
//! page that makes it so), and containment of one configuration in another. Pure over loaded YAML
//! documents: never reads files, never scores.
//!
//! A text is canonicalised in three steps: each document's shape is read ([`shape`]); a fragment
//! is lifted to where it sits in a whole file (a step list under a job's `steps`, a trigger block
//! under `on`), so a fragment and the complete file holding it share paths; then the service's
//! rules rewrite the tree. Mapping order never matters (a [`Node`] map is sorted); sequence order
//! always does (steps, commands). A spelling no page documents as equivalent is left as written.
//!
//! [`sem_exact`] is equality of canonical forms; [`containment`] is the share of the reference's
//! canonical leaves that the output holds at the best anchoring: the output's jobs are matched to
//! the reference's whatever their names (best assignment), a sequence's items in order with gaps
//! allowed (a complete job adds a checkout before the documented steps).

mod node;
mod recall;
mod services;

pub use node::Node;
pub use recall::Containment;
pub use services::{
    circleci, github_actions, gitlab_ci, service, travis_ci, Applied, AuthorIds, Docs, Jobs, Rule, Service, Shorthand,
    Treated, Wrap, SERVICES, WRAPPER_JOB,
};

use std::collections::BTreeMap;

use doc2ci_yaml::Value;

/// The name of the job that holds a lifted fragment (the lint stage's completions use it too).
pub const FRAGMENT_JOB: &str = "doc2ci-fragment";

/// What part of a file a document is: the lint stage's completion rule for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Shape {
    /// A whole file, or no configuration at all (a scalar, an empty list): taken as written.
    File,
    /// Workflow-level keys without `on` or `jobs` (GitHub Actions).
    Workflow,
    /// One job's keys.
    Job,
    /// A mapping of jobs.
    Jobs,
    /// One step (GitHub Actions).
    Step,
    /// A list of steps.
    Steps,
    /// Trigger events only (GitHub Actions `on:` content).
    Triggers,
    /// Top-level keys without a version or workflows (CircleCI).
    Config,
    /// Global keywords and hidden jobs only (GitLab CI).
    Pipeline,
    /// A list of commands (GitLab CI, Travis CI).
    Script,
    /// A section of a file (Travis CI).
    Section,
    /// A fragment no rule covers: compared as written.
    Unknown,
}

impl Shape {
    /// The completion rule's name, as the `lints` table records it.
    pub fn rule(self) -> &'static str {
        match self {
            Shape::File => "file",
            Shape::Workflow => "workflow",
            Shape::Job => "job",
            Shape::Jobs => "jobs",
            Shape::Step => "step",
            Shape::Steps => "steps",
            Shape::Triggers => "triggers",
            Shape::Config => "config",
            Shape::Pipeline => "pipeline",
            Shape::Script => "script",
            Shape::Section => "section",
            Shape::Unknown => "unknown",
        }
    }
}

/// Whether a loaded document is only a fragment of a file of `service` (SPEC §6): a non-empty
/// list, or a mapping that is not a whole file.
pub fn is_fragment(service: &Service, value: &Value) -> bool {
    match value {
        Value::Seq(items) => !items.is_empty(),
        Value::Map(m) => !(service.standalone)(m),
        _ => false,
    }
}

/// The shape of a loaded document.
pub fn shape(service: &Service, value: &Value) -> Shape {
    if !is_fragment(service, value) {
        return Shape::File;
    }
    (service.fragment)(value).unwrap_or(Shape::Unknown)
}

/// A text's documents in canonical form.
#[derive(Clone, Debug, PartialEq)]
pub struct Canon {
    /// Each document's shape and its lifted, canonical tree.
    pub docs: Vec<(Shape, Node)>,
    /// How often each rule rewrote something (which documented equivalences the form relied on).
    pub applied: BTreeMap<&'static str, usize>,
}

/// The canonical form of a text's loaded documents.
pub fn canonical(service: &Service, docs: &[Value]) -> Canon {
    canonical_with(service, docs, Applied::default())
}

/// [`canonical`] with every rule but `rule`: a pair equal in canonical form but not here needs
/// that rule (how the differential test against gawd says which rule explains a difference).
pub fn canonical_without(service: &Service, docs: &[Value], rule: &'static str) -> Canon {
    canonical_with(service, docs, Applied::without(rule))
}

fn canonical_with(service: &Service, docs: &[Value], mut applied: Applied) -> Canon {
    let docs = docs
        .iter()
        .map(|d| {
            let s = shape(service, d);
            if s == Shape::File {
                let mut n = Node::from(d);
                (service.canonicalize)(&mut n, &mut applied);
                return (s, n);
            }
            // Only a fragment is lifted: its copy finds the mappings the lift put around it.
            let fragment = Node::from(d);
            let mut n = (service.lift)(s, fragment.clone());
            let around = wrapping(&n, &fragment);
            (service.canonicalize)(&mut n, &mut applied);
            assume_defaults(&mut n, &around);
            (s, n)
        })
        .collect();
    let applied = applied.counts().clone();
    debug_assert!(
        applied.keys().all(|r| service.rules.iter().any(|d| d.name == *r)),
        "{}: a rule applied is not listed: {applied:?}",
        service.name
    );
    Canon { docs, applied }
}

/// The keys from a lifted tree's root down to the fragment it holds: the mappings on the way are
/// the lift's, not the text's.
fn wrapping(lifted: &Node, fragment: &Node) -> Vec<Node> {
    let (mut at, mut keys) = (lifted, Vec::new());
    while at != fragment {
        match at.as_map() {
            Some(m) if m.len() == 1 => {
                let (k, v) = m.iter().next().expect("one entry");
                keys.push(k.clone());
                at = v;
            }
            _ => break,
        }
    }
    keys
}

/// A fragment does not say what the rest of its file sets: the defaults filled in at its root
/// (a Travis CI section's `os`) and in the mappings the lift put around it (the job around a list
/// of steps: its timeout, its stage) are the file's, not the fragment's to ask.
fn assume_defaults(root: &mut Node, around: &[Node]) {
    let mut at = Some(root);
    for depth in 0..around.len().max(1) {
        let Some(n) = at.take() else { return };
        for v in n.as_map_mut().into_iter().flat_map(|m| m.values_mut()) {
            if let Node::Default(d) = v {
                *v = Node::Assumed(std::mem::replace(d, Box::new(Node::Null)));
            }
        }
        at = around.get(depth).and_then(|k| n.as_map_mut()?.get_mut(k));
    }
}

/// Output and reference are equal in canonical form (and say something: no document is not a
/// configuration).
pub fn sem_exact(reference: &Canon, output: &Canon) -> bool {
    reference.docs.len() == output.docs.len()
        && !reference.docs.is_empty()
        && reference.docs.iter().zip(&output.docs).all(|((rs, r), (os, o))| rs == os && node::same(r, o))
}

/// How much of the reference the output holds; see [`Containment`].
pub fn containment(service: &Service, reference: &Canon, output: &Canon) -> Containment {
    recall::containment(service, reference, output, false)
}

/// [`containment`] with the paths of the reference's leaves the output misses.
pub fn containment_explained(service: &Service, reference: &Canon, output: &Canon) -> Containment {
    recall::containment(service, reference, output, true)
}

#[cfg(test)]
mod tests;
