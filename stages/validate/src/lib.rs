//! Validity of CI configurations (SPEC §6): does the text load as a YAML 1.2 mapping, does
//! it conform to its service's JSON Schema, and is it only a fragment of a file.
//!
//! Owns: what "valid" means. Which services there are is `doc2ci-sem`'s registry (one file per
//! service, from its name to its schema asset); a [`Service`] is a place in it. Whether a text is
//! only a fragment is `doc2ci-sem`'s rule (which the lint stage's completion and the semantic
//! metrics share), applied here. Never reads a schema file itself (the engine hands it the bytes).
//!
//! The peer is check-jsonschema (with ruamel.yaml), so loading uses its tweaks
//! ([`doc2ci_yaml::Options::check_jsonschema`]: timestamps stay text, GitLab's `!reference` is
//! accepted for gitlab-ci) and schema checking mirrors its validator:
//!
//! * the draft is the one the schema's `$schema` declares (2020-12 when absent, as
//!   `jsonschema.validators.validator_for` defaults);
//! * references are resolved only inside the schema: the builder runs offline, so a
//!   remote `$ref` is a schema error at [`Validator::new`], never a network fetch (none of
//!   the four vendored schemas has one);
//! * formats are checked as check-jsonschema's default install checks them: `date-time`,
//!   `regex` and the others Python's format checker implements without optional packages
//!   are validated, but `uri`, `uri-reference`, `iri` and `iri-reference` are not (Python
//!   needs `rfc3987`, which check-jsonschema does not install).
//!
//! Parse and schema checks are pure functions of (service, text); a [`Validator`] compiles
//! each schema once and is `Send + Sync` for use from many threads.

use std::fmt;
use std::str::FromStr;

use doc2ci_yaml::{load_with, Options, Value};

/// The YAML loader's bounds, for [`Validator::with_limits`].
pub use doc2ci_yaml::Limits;

/// A CI service of the study: its place in `doc2ci_sem::SERVICES`, whose file says everything
/// else about it. Services order as the registry lists them (the study's tables follow it).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Service(u8);

impl Service {
    /// Every service, in the registry's order.
    pub fn all() -> impl Iterator<Item = Service> + Clone {
        (0..doc2ci_sem::SERVICES.len()).map(|i| Service(i as u8))
    }

    /// Everything the study knows about the service: its one file in `doc2ci-sem`.
    pub fn def(self) -> &'static doc2ci_sem::Service {
        doc2ci_sem::SERVICES[self.index()]
    }

    /// The partition name used in the warehouse and in `pipeline.toml`.
    pub fn name(self) -> &'static str {
        self.def().name
    }

    fn index(self) -> usize {
        usize::from(self.0)
    }
}

impl fmt::Debug for Service {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Display for Service {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Service {
    type Err = Error;
    fn from_str(s: &str) -> Result<Service, Error> {
        Service::all().find(|svc| svc.name() == s).ok_or_else(|| {
            let names: Vec<&str> = Service::all().map(Service::name).collect();
            Error(format!("unknown service {s:?} (expected one of {})", names.join(", ")))
        })
    }
}

/// A setup error: unknown service, unreadable schema, or no schema for a service.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error(pub String);

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

/// One text's validity, as the `validations` table stores it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Validity {
    /// The text loads (YAML 1.2, one document) as a mapping.
    pub parse_ok: bool,
    /// `parse_ok` and the mapping conforms to the service's schema.
    pub schema_ok: bool,
    /// For parse failures the load error with its line and column; otherwise every schema
    /// error as `<instance path>: <message>` (`/` is the root), for the repair prompt (see
    /// `collect_errors` for how `oneOf`/`anyOf` failures are spelled out).
    pub errors: Vec<String>,
    /// See [`is_fragment`].
    pub fragment: bool,
}

/// Longest schema error message kept: oneOf/anyOf messages embed the whole instance, which
/// would swamp the repair prompt; the path and the start of the message carry the point.
const MAX_MESSAGE_CHARS: usize = 400;

/// Compiled schemas for the services, shared across threads.
pub struct Validator {
    /// By service, in the registry's order.
    schemas: Vec<Option<jsonschema::Validator>>,
    limits: Limits,
}

fn draft_of(schema: &serde_json::Value) -> Result<jsonschema::Draft, Error> {
    use jsonschema::Draft;
    let Some(uri) = schema.get("$schema").and_then(|s| s.as_str()) else {
        return Ok(Draft::Draft202012);
    };
    let trimmed = uri.trim_end_matches('#').trim_start_matches("https://").trim_start_matches("http://");
    Ok(match trimmed {
        "json-schema.org/draft-04/schema" => Draft::Draft4,
        "json-schema.org/draft-06/schema" => Draft::Draft6,
        "json-schema.org/draft-07/schema" => Draft::Draft7,
        "json-schema.org/draft/2019-09/schema" => Draft::Draft201909,
        "json-schema.org/draft/2020-12/schema" => Draft::Draft202012,
        _ => return Err(Error(format!("schema declares an unsupported draft {uri:?}"))),
    })
}

/// Compiles one schema the way check-jsonschema builds its validator (see the crate docs).
pub fn compile_schema(schema_json: &[u8]) -> Result<jsonschema::Validator, Error> {
    let schema: serde_json::Value =
        serde_json::from_slice(schema_json).map_err(|e| Error(format!("schema is not JSON: {e}")))?;
    let draft = draft_of(&schema)?;
    let mut opts = jsonschema::options().with_draft(draft).offline().should_validate_formats(true);
    for unchecked in ["uri", "uri-reference", "iri", "iri-reference"] {
        opts = opts.with_format(unchecked, |_: &str| true);
    }
    opts.build(&schema).map_err(|e| Error(format!("schema does not compile: {e}")))
}

impl Validator {
    /// Compiles the given services' schemas (JSON bytes, as shipped in check-jsonschema).
    pub fn new<'a>(schemas: impl IntoIterator<Item = (Service, &'a [u8])>) -> Result<Validator, Error> {
        let mut compiled: Vec<Option<jsonschema::Validator>> = Service::all().map(|_| None).collect();
        for (service, bytes) in schemas {
            let v = compile_schema(bytes).map_err(|e| Error(format!("{service}: {e}")))?;
            compiled[service.index()] = Some(v);
        }
        Ok(Validator { schemas: compiled, limits: Limits::default() })
    }

    /// Replaces the YAML loader's hostile-input bounds.
    pub fn with_limits(mut self, limits: Limits) -> Validator {
        self.limits = limits;
        self
    }

    pub fn has_schema(&self, service: Service) -> bool {
        self.schemas[service.index()].is_some()
    }

    /// Validates one text; Err only when no schema was given for `service`.
    pub fn validate(&self, service: Service, text: &str) -> Result<Validity, Error> {
        let schema = self.schemas[service.index()]
            .as_ref()
            .ok_or_else(|| Error(format!("no schema was loaded for {service}")))?;
        let options = Options::check_jsonschema(service.def().gitlab_reference_tag);
        let value = match load_with(text, &self.limits, &options) {
            Ok(v) => v,
            Err(e) => {
                return Ok(Validity { parse_ok: false, schema_ok: false, errors: vec![e.to_string()], fragment: false })
            }
        };
        let fragment = is_fragment(service, &value);
        if let Some(why) = not_mapping(&value) {
            return Ok(Validity { parse_ok: false, schema_ok: false, errors: vec![why], fragment });
        }
        let instance = doc2ci_yaml::to_json(&value);
        let mut errors = Vec::new();
        for e in schema.iter_errors(&instance) {
            collect_errors(&e, 0, &mut errors);
        }
        Ok(Validity { parse_ok: true, schema_ok: errors.is_empty(), errors, fragment })
    }
}

/// Why a loaded document is not a configuration file (None: it is a mapping).
fn not_mapping(value: &Value) -> Option<String> {
    let what = match value {
        Value::Map(_) => return None,
        Value::Seq(_) => "a sequence",
        Value::Null { .. } => "empty",
        _ => "a scalar",
    };
    Some(format!("the document is {what}, not a mapping"))
}

/// Why `text` cannot be a configuration file of any service: it does not load as YAML 1.2, or its
/// document is empty (nothing or only comments), a scalar (prose, a bare value) or a sequence.
/// None: it is a mapping. What `parse_ok` means, for stages that judge texts by other tools.
pub fn not_a_configuration(text: &str, limits: &Limits) -> Option<String> {
    match doc2ci_yaml::load(text, limits) {
        Ok(v) => not_mapping(&v),
        Err(e) => Some(format!("not YAML: {e}")),
    }
}

/// Schema errors as the repair prompt should read them. A failed `oneOf`/`anyOf` is reported
/// through its closest alternative (the one branch with the fewest errors), recursively, since
/// "not valid under any of the given schemas" does not say what to fix; when several branches
/// are equally close, the failure is kept and their errors are listed after it.
fn collect_errors(e: &jsonschema::ValidationError<'_>, depth: usize, out: &mut Vec<String>) {
    use jsonschema::error::ValidationErrorKind as K;
    if let K::AnyOf { context } | K::OneOfNotValid { context } = e.kind() {
        let nonempty: Vec<&Vec<jsonschema::ValidationError<'static>>> =
            context.iter().filter(|b| !b.is_empty()).collect();
        if let Some(fewest) = nonempty.iter().map(|b| b.len()).min() {
            let closest: Vec<_> = nonempty.iter().filter(|b| b.len() == fewest).collect();
            if closest.len() == 1 && depth < 4 {
                for sub in closest[0].iter() {
                    collect_errors(sub, depth + 1, out);
                }
                return;
            }
            let alternatives: Vec<String> =
                nonempty.iter().map(|b| b.iter().map(short_message).collect::<Vec<_>>().join(", ")).collect();
            let message = format!("{} (alternatives: {})", e.masked(), alternatives.join(" | "));
            out.push(located(e, message));
            return;
        }
    }
    out.push(located(e, e.to_string()));
}

/// An alternative's error without a long instance dump in it.
fn short_message(e: &jsonschema::ValidationError<'_>) -> String {
    let full = e.to_string();
    if full.chars().count() > 120 {
        e.masked().to_string()
    } else {
        full
    }
}

fn located(e: &jsonschema::ValidationError<'_>, mut message: String) -> String {
    let path = e.instance_path().to_string();
    let path = if path.is_empty() { "/".to_string() } else { path };
    if message.chars().count() > MAX_MESSAGE_CHARS {
        message = message.chars().take(MAX_MESSAGE_CHARS).collect::<String>() + "…";
    }
    format!("{path}: {message}")
}

/// Whether a loaded document is only part of a configuration file: a non-empty sequence
/// (e.g. a list of steps), or a mapping without what a standalone file of its service needs
/// (each service's `standalone` rule, in its file in `doc2ci-sem`).
///
/// Scalars, empty documents and unparseable texts are not fragments: they are not
/// configuration at all (`parse_ok` already says so).
pub fn is_fragment(service: Service, value: &Value) -> bool {
    doc2ci_sem::is_fragment(service.def(), value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(name: &str) -> Service {
        name.parse().unwrap()
    }

    fn load(text: &str) -> Value {
        doc2ci_yaml::load(text, &Limits::default()).unwrap()
    }

    #[test]
    fn service_names_round_trip() {
        for s in Service::all() {
            assert_eq!(s.name().parse::<Service>().unwrap(), s);
        }
        assert!("jenkins".parse::<Service>().is_err());
    }

    #[test]
    fn fragment_rules_per_service() {
        let gha = svc("github-actions");
        assert!(!is_fragment(gha, &load("on: push\njobs: {}")));
        assert!(is_fragment(gha, &load("jobs:\n  a:\n    runs-on: x\n")));
        assert!(is_fragment(gha, &load("- name: Checkout\n  uses: actions/checkout@v4\n")));
        assert!(!is_fragment(gha, &load("plain prose")));
        assert!(!is_fragment(gha, &load("")));
        let cci = svc("circleci");
        assert!(!is_fragment(cci, &load("version: 2.1\nworkflows: {}")));
        assert!(is_fragment(cci, &load("jobs: {}")));
        let gl = svc("gitlab-ci");
        assert!(!is_fragment(gl, &load("build:\n  script: [make]\n")));
        assert!(!is_fragment(gl, &load("include: ci/x.yml\n")));
        assert!(is_fragment(gl, &load("stages: [build]\n.hidden:\n  script: [x]\nvariables: {A: 1}\n")));
        let tr = svc("travis-ci");
        assert!(!is_fragment(tr, &load("language: python\n")));
        assert!(is_fragment(tr, &load("deploy:\n  provider: pages\n")));
    }

    #[test]
    fn draft_is_read_from_the_schema() {
        let d = |s: &str| draft_of(&serde_json::json!({"$schema": s})).unwrap();
        assert_eq!(d("http://json-schema.org/draft-07/schema#"), jsonschema::Draft::Draft7);
        assert_eq!(d("https://json-schema.org/draft/2020-12/schema"), jsonschema::Draft::Draft202012);
        assert_eq!(d("http://json-schema.org/draft-04/schema#"), jsonschema::Draft::Draft4);
        assert_eq!(draft_of(&serde_json::json!({})).unwrap(), jsonschema::Draft::Draft202012);
        assert!(draft_of(&serde_json::json!({"$schema": "http://example.com/x"})).is_err());
    }

    #[test]
    fn remote_refs_are_never_fetched() {
        let schema =
            br#"{"$schema": "http://json-schema.org/draft-07/schema#", "$ref": "https://example.com/other.json"}"#;
        let e = compile_schema(schema).unwrap_err();
        assert!(e.0.contains("schema does not compile"), "{e}");
        let internal =
            br##"{"$schema": "http://json-schema.org/draft-07/schema#", "definitions": {"s": {"type": "string"}},
            "properties": {"a": {"$ref": "#/definitions/s"}}}"##;
        let v = Validator::new([(svc("travis-ci"), &internal[..])]).unwrap();
        let r = v.validate(svc("travis-ci"), "a: 1").unwrap();
        assert_eq!(r.errors, ["/a: 1 is not of type \"string\""]);
        assert!(v.validate(svc("github-actions"), "a: 1").is_err());
    }

    #[test]
    fn uri_formats_are_not_checked_but_date_time_is() {
        let schema = br#"{"$schema": "http://json-schema.org/draft-07/schema#",
            "properties": {"u": {"format": "uri"}, "d": {"format": "date-time"}}}"#;
        let v = Validator::new([(svc("gitlab-ci"), &schema[..])]).unwrap();
        assert!(v.validate(svc("gitlab-ci"), "u: not a uri").unwrap().schema_ok);
        assert!(!v.validate(svc("gitlab-ci"), "d: yesterday").unwrap().schema_ok);
        assert!(v.validate(svc("gitlab-ci"), "d: '2024-01-02T03:04:05Z'").unwrap().schema_ok);
    }

    #[test]
    fn validator_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<Validator>();
    }
}
