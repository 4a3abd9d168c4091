//! Where a key sits in `pipeline.toml`, and entries whose keys are split by type.
//!
//! A `[[sources]]` or `[[models]]` entry is parsed in typed parts: the keys every kind shares,
//! then the keys of its kind, then (models) the keys of its backend, each a `deny_unknown_fields`
//! type declared by its owner (`config`, `backends/*`). The document is parsed once, with spans,
//! so every part still names the line of each key.

use std::ops::Range;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use serde::de::{self, Deserialize, Visitor};
use toml::de::{DeTable, DeValue, ValueDeserializer};
use toml::Spanned;

/// The config file and its text, for messages that name file, line and key.
pub struct Ctx<'a> {
    pub file: &'a Path,
    pub text: &'a str,
}

impl Ctx<'_> {
    pub fn line(&self, offset: usize) -> usize {
        self.text[..offset.min(self.text.len())].matches('\n').count() + 1
    }

    pub fn err<T>(&self, span: Range<usize>, key: &str, msg: impl std::fmt::Display) -> Result<T> {
        bail!("{}:{}: `{}`: {}", self.file.display(), self.line(span.start), key, msg)
    }

    /// A path as written, resolved against the config file's folder; it must exist.
    pub fn path(&self, span: Range<usize>, key: &str, p: &str) -> Result<PathBuf> {
        let full = self.file.parent().unwrap_or(Path::new(".")).join(p);
        if !full.exists() {
            return self.err(span, key, format!("file `{}` does not exist (resolved to {})", p, full.display()));
        }
        Ok(full)
    }

    /// toml's own message quotes the offending line, which may hold a pasted key: name the
    /// place (line, column and the line's key, never its value) and toml's reason only.
    pub fn toml_error(&self, e: &toml::de::Error) -> anyhow::Error {
        self.syntax_error(e.span(), e.message())
    }

    fn syntax_error(&self, span: Option<Range<usize>>, msg: &str) -> anyhow::Error {
        let text = self.text;
        let at = span.map_or(String::new(), |sp| {
            let before = &text[..sp.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
            let key = text.lines().nth(line - 1).and_then(|l| l.split_once('=')).map(|(k, _)| k.trim());
            match key.filter(|k| !k.is_empty() && k.len() <= 64) {
                Some(k) => format!(" at line {line}, column {col} (key `{k}`)"),
                None => format!(" at line {line}, column {col}"),
            }
        });
        anyhow::anyhow!("{}: TOML parse error{at}: {}", self.file.display(), msg.trim_end())
    }

    /// Typed from a spanned value of this document.
    pub fn typed<'i, T: Deserialize<'i>>(&self, v: Spanned<DeValue<'i>>) -> Result<T> {
        T::deserialize(ValueDeserializer::from(v)).map_err(|e| self.toml_error(&e))
    }
}

/// One entry of an array of tables (`[[models]]`), while its parts are taken out.
pub struct Entry<'i> {
    pub span: Range<usize>,
    table: DeTable<'i>,
    /// Keys of the parts taken so far, so an unknown key's message lists all the entry takes.
    taken: Vec<&'static str>,
}

impl<'i> Entry<'i> {
    /// The entries of `[[key]]`, removed from the document (`key` absent: none).
    pub fn take_all(cx: &Ctx, doc: &mut DeTable<'i>, key: &str) -> Result<Vec<Entry<'i>>> {
        let Some(v) = doc.remove(key) else { return Ok(vec![]) };
        let span = v.span();
        let DeValue::Array(items) = v.into_inner() else {
            return cx.err(span, key, format!("an array of tables (`[[{key}]]`)"));
        };
        items
            .iter()
            .map(|item| match item.get_ref() {
                DeValue::Table(t) => Ok(Entry { span: item.span(), table: t.clone(), taken: vec![] }),
                _ => cx.err(item.span(), key, format!("each `{key}` entry is a table")),
            })
            .collect()
    }

    /// The keys `T` declares, typed; the others stay for the next part.
    pub fn part<T: Deserialize<'i>>(&mut self, cx: &Ctx) -> Result<T> {
        let fields = fields_of::<T>();
        self.taken.extend(fields);
        let mut mine = DeTable::new();
        let rest = std::mem::take(&mut self.table);
        for (k, v) in rest {
            if fields.contains(&k.get_ref().as_ref()) {
                mine.insert(k, v);
            } else {
                self.table.insert(k, v);
            }
        }
        cx.typed(Spanned::new(self.span.clone(), DeValue::Table(mine)))
    }

    /// The first key left that `T` does not declare, with where it is written.
    pub fn foreign<'de, T: Deserialize<'de>>(&self) -> Option<(&str, Range<usize>)> {
        self.outside(fields_of::<T>())
    }

    /// The first key left that is not one of `fields`, with where it is written.
    pub fn outside(&self, fields: &[&str]) -> Option<(&str, Range<usize>)> {
        self.table.keys().find(|k| !fields.contains(&k.get_ref().as_ref())).map(|k| (k.get_ref().as_ref(), k.span()))
    }

    /// Every key left, typed as the entry's last part (an unknown key is an error naming it).
    pub fn rest<T: Deserialize<'i>>(self, cx: &Ctx) -> Result<T> {
        if let Some((k, span)) = self.foreign::<T>() {
            let all: Vec<String> = self.taken.iter().chain(fields_of::<T>()).map(|f| format!("`{f}`")).collect();
            return Err(
                cx.syntax_error(Some(span), &format!("unknown field `{k}`, expected one of {}", all.join(", ")))
            );
        }
        cx.typed(Spanned::new(self.span, DeValue::Table(self.table)))
    }
}

/// The field names a derived `Deserialize` struct declares: the one list the type's keys are
/// checked against, read from the type rather than repeated by hand.
pub fn fields_of<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    struct Probe<'a>(&'a mut &'static [&'static str]);
    impl<'de> de::Deserializer<'de> for Probe<'_> {
        type Error = de::value::Error;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
            Err(de::Error::custom("not a struct"))
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Self::Error> {
            *self.0 = fields;
            Err(de::Error::custom("fields read"))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option
            unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier ignored_any
        }
    }
    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(Probe(&mut fields));
    fields
}
