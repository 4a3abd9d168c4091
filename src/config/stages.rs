//! `[stages.*]`: each stage's section, kept as written for the one that reads it. A section's
//! keys, defaults and rules are its owner's type (`impl Section`, every one listed in
//! `crate::jobs`), so a new stage adds no line here; what this file keeps is where each key is
//! written, so every error still names the file, the line and the key.

use std::sync::Arc;

use anyhow::{bail, Result};
use serde::de::DeserializeOwned;
use serde::Serialize;
use toml::de::{DeTable, DeValue};
use toml::Spanned;

use super::Config;
use crate::keys::Ctx;

/// The type of one `[stages.NAME]` section: its keys (`deny_unknown_fields`), their defaults
/// (an absent section is `Default`) and the rules the type cannot say. Jobs serialise it into
/// their parameters, so it is part of their cache key.
pub trait Section: Serialize + DeserializeOwned + Default {
    const NAME: &'static str;
    /// Rules across keys, or across sections and `[[models]]`.
    fn check(&self, _at: &Place, _cfg: &Config) -> Result<()> {
        Ok(())
    }
}

/// The `[stages]` table as written. The text is parsed again, with spans, each time a section
/// is read: a few microseconds, and the only way the typed section still knows its lines.
#[derive(Debug, Clone, Default)]
pub struct Stages {
    text: Arc<str>,
    /// Each section written, with its line (an unknown name's message names it).
    pub written: Vec<(String, usize)>,
}

/// Where a section and its keys are written, for [`Section::check`]'s messages.
pub struct Place<'a> {
    cx: Ctx<'a>,
    name: &'static str,
    line: Option<usize>,
    keys: Vec<(String, usize)>,
}

impl Place<'_> {
    /// An error about the whole section, at its header.
    pub fn fail<T>(&self, msg: impl std::fmt::Display) -> Result<T> {
        let at = self.line.map_or(String::new(), |l| format!(":{l}"));
        bail!("{}{at}: `stages.{}`: {msg}", self.cx.file.display(), self.name)
    }

    /// An error about one key, at its line (the header's when the key is not written).
    pub fn fail_at<T>(&self, key: &str, msg: impl std::fmt::Display) -> Result<T> {
        let line = self.keys.iter().find(|(k, _)| k == key).map(|(_, l)| *l).or(self.line);
        let at = line.map_or(String::new(), |l| format!(":{l}"));
        bail!("{}{at}: `stages.{}.{key}`: {msg}", self.cx.file.display(), self.name)
    }
}

impl Stages {
    /// The `[stages]` table taken out of the parsed document: every value a table.
    pub(super) fn take(cx: &Ctx, doc: &mut DeTable) -> Result<Stages> {
        let mut written = Vec::new();
        if let Some(v) = doc.remove("stages") {
            let span = v.span();
            let DeValue::Table(t) = v.into_inner() else { return cx.err(span, "stages", "a table (`[stages.NAME]`)") };
            for (k, v) in &t {
                if !matches!(v.get_ref(), DeValue::Table(_)) {
                    return cx.err(k.span(), &format!("stages.{}", k.get_ref()), "a table (`[stages.NAME]`)");
                }
                written.push((k.get_ref().to_string(), cx.line(k.span().start)));
            }
        }
        Ok(Stages { text: cx.text.into(), written })
    }
}

impl Config {
    /// `[stages.NAME]` as its type, checked (not written: the defaults, checked too).
    pub fn section<T: Section>(&self) -> Result<T> {
        let cx = Ctx { file: &self.file, text: &self.stages.text };
        let mut doc = DeTable::parse(cx.text).map_err(|e| cx.toml_error(&e))?;
        let found = match doc.get_mut().remove("stages").map(Spanned::into_inner) {
            Some(DeValue::Table(mut t)) => {
                let key = t.keys().find(|k| k.get_ref() == T::NAME).cloned();
                key.and_then(|k| t.remove(&k).map(|v| (k.span(), v)))
            }
            _ => None,
        };
        let (value, place) = match found {
            Some((head, v)) => {
                let keys = match v.get_ref() {
                    DeValue::Table(t) => t.keys().map(|k| (k.get_ref().to_string(), cx.line(k.span().start))).collect(),
                    _ => vec![],
                };
                (Some(v), Place { line: Some(cx.line(head.start)), keys, name: T::NAME, cx })
            }
            None => (None, Place { line: None, keys: vec![], name: T::NAME, cx }),
        };
        let typed: T = match value {
            Some(v) => place.cx.typed(v)?,
            None => T::default(),
        };
        typed.check(&place, self)?;
        Ok(typed)
    }
}
