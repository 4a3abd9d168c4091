//! validate: parse and JSON-Schema validity of every answer (`validations`, one partition per
//! generations partition, repair rounds included; an errored request has no row) and of every pair's own reference
//! (`pair_validations`). The checks are `stages/validate`'s; the schemas are pinned assets.
//! A [`super::Check`]: declared by [`super::quality`] and by repair, per generations partition.

use anyhow::Result;
use doc2ci_rows::{Generation, Pair, RowKey, Validation};
use doc2ci_validate::{Service, Validator};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::tables::{PAIR_VALIDATIONS, VALIDATIONS};
use crate::config::Section;
use crate::engine::{Ctx, Graph, Job, Node, Output};
use crate::resources;
use crate::warehouse::Partition;

/// `[stages.validate]`: on or off.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Settings(pub super::Switch);

impl Section for Settings {
    const NAME: &'static str = "validate";
}

/// Schema errors are what every repair round quotes.
pub const CHECK: super::Check = super::Check {
    settings: super::SectionType::of::<Settings>(),
    table: VALIDATIONS,
    on: |cfg| Ok(cfg.section::<Settings>()?.0.enabled),
    references: Some(|_, g, service, pairs| add_references(g, service, pairs).map(drop)),
    add: |_, g, at| add(g, at.service, at.generations),
    feedback: Some("schema"),
    stats: true,
};

/// The validity of each reference of the pairs of `dedupe`.
pub fn add_references(g: &mut Graph, service: Service, dedupe: usize) -> Result<usize> {
    let job = Validate { service, input: g.part(dedupe).clone(), references: true };
    Ok(g.add(
        Node::new("validate", Partition::new(PAIR_VALIDATIONS, &[service.name()]), job)
            .deps(vec![dedupe])
            .pinned(vec![super::pin(&resources::schema_asset(service))?]),
    ))
}

/// The validations partition of one generations partition (any round).
pub fn add(g: &mut Graph, service: Service, gen: usize) -> Result<usize> {
    let gp = g.part(gen).clone();
    let part = gp.sibling(VALIDATIONS);
    let model = gp.get("model").unwrap_or_default().to_string();
    let job = Validate { service, input: gp, references: false };
    Ok(g.add(
        Node::new("validate", part, job)
            .deps(vec![gen])
            .pinned(vec![super::pin(&resources::schema_asset(service))?])
            .model(&model),
    ))
}

#[derive(Serialize)]
struct Validate {
    #[serde(serialize_with = "super::service_name")]
    service: Service,
    #[serde(skip)]
    /// A pairs partition (`references`) or a generations partition.
    input: Partition,
    references: bool,
}

impl Job for Validate {
    fn run(&self, cx: &Ctx) -> Result<Output> {
        let v = resources::validator()?;
        let s = self.service;
        if self.references {
            let pairs: Vec<Pair> = cx.read(&self.input)?;
            let rows: Vec<Validation> = pairs
                .par_iter()
                .map(|p| {
                    let key = RowKey {
                        pair_id: p.pair_id.clone(),
                        service: s.name().into(),
                        model: "reference".into(),
                        sample: 0,
                        round: 0,
                    };
                    validation(v, s, key, Some(&p.reference))
                })
                .collect::<Result<_>>()?;
            let frag = rows.iter().filter(|r| r.fragment).count();
            let parsed = rows.iter().filter(|r| r.parse_ok).count();
            let note = format!("{} references: {parsed} parse as mappings, {frag} fragments", rows.len());
            return cx.publish(&rows, Some(note));
        }
        let gens: Vec<Generation> = super::answers(cx, &self.input)?;
        let rows: Vec<Validation> = gens
            .par_iter()
            .map(|g| {
                // The partition's service names the row, as it always has.
                let key = RowKey { service: s.name().into(), ..g.key() };
                validation(v, s, key, g.output.as_deref())
            })
            .collect::<Result<_>>()?;
        let ok = rows.iter().filter(|r| r.schema_ok).count();
        cx.publish(&rows, Some(format!("{ok}/{} schema-valid", rows.len())))
    }
}

fn validation(v: &Validator, service: Service, key: RowKey, text: Option<&str>) -> Result<Validation> {
    let (parse_ok, schema_ok, errors, fragment) = match text {
        Some(t) => {
            let r = v.validate(service, t)?;
            (r.parse_ok, r.schema_ok, r.errors, r.fragment)
        }
        None => (false, false, vec!["no output: the answer held no text".to_string()], false),
    };
    Ok(Validation {
        pair_id: key.pair_id,
        service: key.service,
        model: key.model,
        sample: key.sample,
        round: key.round,
        parse_ok,
        schema_ok,
        errors,
        fragment,
    })
}
