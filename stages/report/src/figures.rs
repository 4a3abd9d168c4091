//! The figures, drawn with plotters' SVG backend. Each model is exactly one `<circle>` in the
//! scatter figures (Fig. 3, Fig. 5), so a reader (or a test) can count them.

use std::collections::{BTreeMap, HashMap};

use doc2ci_stats::{percentile, Tier};
use plotters::prelude::*;

use crate::{box_metrics, mean_of, model_metric_values, model_type, Input};

const GENERAL: RGBColor = RGBColor(31, 119, 180);
const CODE: RGBColor = RGBColor(214, 39, 40);
const PROPRIETARY: RGBColor = RGBColor(90, 90, 90);

/// A model's position on the similarity–validity plane, and after repair when it was repaired.
pub struct PlanePoint {
    pub cosine: f64,
    pub schema: f64,
    pub kind: &'static str,
    /// (mean cosine, schema rate, pairs with a repair round) over the final rounds.
    pub repaired: Option<(f64, f64, usize)>,
    /// The model it was fine-tuned from, when declared (`base_model`).
    pub base: Option<String>,
}

pub fn plane_points(inp: &Input) -> BTreeMap<String, PlanePoint> {
    let meta: HashMap<&str, &doc2ci_rows::ModelRow> = inp.models.iter().map(|m| (m.model.as_str(), m)).collect();
    let mut zero: BTreeMap<&str, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
    let mut last: HashMap<(&str, &str, &str), &doc2ci_stats::study::Unit> = HashMap::new();
    for u in inp.units.iter().filter(|u| u.sample == 0) {
        if u.round == 0 {
            let e = zero.entry(u.model.as_str()).or_default();
            if let Some(v) = u.values.get("cosine") {
                e.0.push(*v);
            }
            if let Some(v) = u.values.get("schema_ok") {
                e.1.push(*v);
            }
        }
        let k = (u.service.as_str(), u.model.as_str(), u.pair_id.as_str());
        if last.get(&k).is_none_or(|p| p.round < u.round) {
            last.insert(k, u);
        }
    }
    let mut out = BTreeMap::new();
    for (m, (c, s)) in zero {
        if c.is_empty() || s.is_empty() {
            continue;
        }
        let finals: Vec<&&doc2ci_stats::study::Unit> = last.iter().filter(|(k, _)| k.1 == m).map(|(_, u)| u).collect();
        let nrep = finals.iter().filter(|u| u.round > 0).count();
        let repaired = (nrep > 0).then(|| {
            let fc: Vec<f64> = finals.iter().filter_map(|u| u.values.get("cosine").copied()).collect();
            let fs: Vec<f64> = finals.iter().filter_map(|u| u.values.get("schema_ok").copied()).collect();
            (mean_of(&fc), mean_of(&fs), nrep)
        });
        let mr = meta.get(m).copied();
        let kind = if mr.and_then(|m| m.proprietary) == Some(true) { "proprietary" } else { model_type(mr) };
        let base = mr.and_then(|m| m.base_model.clone());
        out.insert(m.to_string(), PlanePoint { cosine: mean_of(&c), schema: mean_of(&s), kind, repaired, base });
    }
    out
}

fn color(kind: &str) -> RGBColor {
    match kind {
        "code" => CODE,
        "proprietary" => PROPRIETARY,
        _ => GENERAL,
    }
}

fn range(vals: impl Iterator<Item = f64>, pad: f64, clamp: (f64, f64)) -> (f64, f64) {
    let v: Vec<f64> = vals.filter(|v| v.is_finite()).collect();
    if v.is_empty() {
        return clamp;
    }
    let lo = v.iter().cloned().fold(f64::INFINITY, f64::min);
    let hi = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let span = (hi - lo).max(pad);
    ((lo - span * 0.15).max(clamp.0), (hi + span * 0.15).min(clamp.1))
}

pub type Fig = (String, String, String);

/// Every figure: (file stem, caption, SVG).
pub fn all(inp: &Input) -> Vec<Fig> {
    let mut figs = Vec::new();
    let pts = plane_points(inp);
    if !pts.is_empty() {
        figs.push(("fig3_similarity_validity".into(), "Fig. 3. Similarity is not validity: each model's mean cosine (x) versus schema validity (y), zero-shot, all services.".into(), scatter(&pts, false)));
        figs.push(("fig5_repair_plane".into(), "Fig. 5. The similarity–validity plane: arrows from each model's zero-shot point to its repaired point (final repair round), where repair ran, and thin arrows from a base model to its fine-tuned model.".into(), scatter(&pts, true)));
    }
    if let Some(svg) = tiers(inp) {
        figs.push(("fig4_tiers".into(), "Fig. 4. Quality by size tier for general and code-specialized open models (tier means): similarity (left) and schema validity (right).".into(), svg));
    }
    let means = crate::Means::new(inp.stats);
    let models: Vec<&str> = inp.models.iter().map(|m| m.model.as_str()).collect();
    if let Some(svg) = crate::lint::ladder(inp, &means, &models) {
        figs.push(("fig_validity_ladder".into(), "The validity ladder per service: parse → schema → the service's own validator (as written, then with fragments completed), per model, zero-shot.".into(), svg));
    }
    figs.extend(crate::repair::ladder(inp));
    for metric in box_metrics(inp) {
        let vals = model_metric_values(inp.units, metric);
        if vals.is_empty() {
            continue;
        }
        figs.push((
            format!("box_{metric}"),
            format!("Distribution of {metric} per model (zero-shot): box = quartiles, whiskers = 1.5 IQR."),
            boxplot(metric, &vals),
        ));
    }
    figs.extend(crate::clean::figures(inp));
    figs
}

/// The headline, the one figure a reader sees first: per service (columns), each model on the
/// similarity–validity plane (top) and its validity ladder (bottom), zero-shot, from the stats
/// table's means. A model keeps its colour in every panel.
pub fn headline(inp: &Input, means: &crate::Means, models: &[&str]) -> Option<String> {
    let has = |s: &str, metric: &str| models.iter().any(|m| means.mean(s, metric, m).is_some());
    let services: Vec<(&String, &String)> =
        inp.services.iter().filter(|(s, _)| has(s, "cosine") && has(s, "schema_ok")).collect();
    if services.is_empty() {
        return None;
    }
    let steps: Vec<(&str, &str)> = crate::lint::LADDER
        .iter()
        .filter(|(metric, _)| services.iter().any(|(s, _)| has(s, metric)))
        .copied()
        .collect();
    let mut svg = String::new();
    {
        // The page's width, whatever the number of services.
        let root = SVGBackend::with_string(&mut svg, (1080, 620)).into_drawing_area();
        root.fill(&WHITE).expect("svg");
        let (top, bottom) = root.split_vertically(330);
        for (i, ((svc, disp), (up, down))) in services
            .iter()
            .zip(top.split_evenly((1, services.len())).iter().zip(bottom.split_evenly((1, services.len())).iter()))
            .enumerate()
        {
            let y_desc = if i == 0 { "Schema-valid (%)" } else { "" };
            let mut plane = ChartBuilder::on(up)
                .caption(disp.as_str(), ("sans-serif", 16))
                .margin(10)
                .x_label_area_size(35)
                .y_label_area_size(45)
                .build_cartesian_2d(0f64..1f64, 0f64..100f64)
                .expect("chart");
            plane
                .configure_mesh()
                .x_desc("Mean cosine similarity")
                .y_desc(y_desc)
                .light_line_style(WHITE.mix(0.0))
                .draw()
                .expect("mesh");
            for (k, m) in models.iter().enumerate() {
                let (Some(c), Some(s)) = (means.mean(svc, "cosine", m), means.mean(svc, "schema_ok", m)) else {
                    continue;
                };
                let col = Palette99::pick(k).to_rgba();
                plane.draw_series(std::iter::once(Circle::new((c, s * 100.0), 5, col.filled()))).expect("point");
                plane
                    .draw_series(std::iter::once(Text::new(
                        m.to_string(),
                        (c, s * 100.0),
                        ("sans-serif", 11).into_font().color(&BLACK),
                    )))
                    .expect("label");
            }
            let y_desc = if i == 0 { "Valid at this step (%)" } else { "" };
            let panel = crate::lint::Panel { caption: None, margin: 10, y_desc, legend: false };
            crate::lint::ladder_panel(down, &steps, svc, models, means, &panel);
        }
        root.present().expect("svg");
    }
    Some(svg)
}

fn scatter(pts: &BTreeMap<String, PlanePoint>, arrows: bool) -> String {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (720, 480)).into_drawing_area();
        root.fill(&WHITE).expect("svg");
        let xs =
            pts.values().flat_map(|p| [Some(p.cosine), if arrows { p.repaired.map(|r| r.0) } else { None }]).flatten();
        let ys = pts
            .values()
            .flat_map(|p| [Some(p.schema * 100.0), if arrows { p.repaired.map(|r| r.1 * 100.0) } else { None }])
            .flatten();
        let (x0, x1) = range(xs, 0.05, (0.0, 1.0));
        let (y0, y1) = range(ys, 10.0, (0.0, 100.0));
        let mut chart = ChartBuilder::on(&root)
            .margin(15)
            .x_label_area_size(40)
            .y_label_area_size(55)
            .build_cartesian_2d(x0..x1, y0..y1)
            .expect("chart");
        chart
            .configure_mesh()
            .x_desc("Mean cosine similarity")
            .y_desc("Schema validity (%)")
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .expect("mesh");
        if arrows {
            for p in pts.values() {
                if let Some((c, s, _)) = p.repaired {
                    let col = color(p.kind);
                    chart
                        .draw_series(std::iter::once(PathElement::new(
                            vec![(p.cosine, p.schema * 100.0), (c, s * 100.0)],
                            col.stroke_width(2),
                        )))
                        .expect("arrow");
                    chart
                        .draw_series(std::iter::once(TriangleMarker::new((c, s * 100.0), 6, col.filled())))
                        .expect("head");
                }
                if let Some(b) = p.base.as_ref().and_then(|b| pts.get(b)) {
                    let col = color(p.kind).mix(0.6);
                    let (from, to) = ((b.cosine, b.schema * 100.0), (p.cosine, p.schema * 100.0));
                    chart
                        .draw_series(std::iter::once(PathElement::new(vec![from, to], col.stroke_width(1))))
                        .expect("fine-tune arrow");
                    chart.draw_series(std::iter::once(TriangleMarker::new(to, 5, col.filled()))).expect("head");
                }
            }
        }
        for (m, p) in pts {
            let col = color(p.kind);
            chart
                .draw_series(std::iter::once(Circle::new((p.cosine, p.schema * 100.0), 5, col.filled())))
                .expect("point");
            chart
                .draw_series(std::iter::once(Text::new(
                    m.clone(),
                    (p.cosine, p.schema * 100.0),
                    ("sans-serif", 12).into_font().color(&BLACK),
                )))
                .expect("label");
        }
        // Legend as coloured text (no extra circles: one circle per model).
        for (i, (name, col)) in [("general", GENERAL), ("code", CODE), ("proprietary", PROPRIETARY)].iter().enumerate()
        {
            root.draw(&Text::new(
                name.to_string(),
                (80 + i as i32 * 110, 8),
                ("sans-serif", 13).into_font().color(col),
            ))
            .expect("legend");
        }
        root.present().expect("svg");
    }
    svg
}

fn tiers(inp: &Input) -> Option<String> {
    let meta: HashMap<&str, &doc2ci_rows::ModelRow> = inp.models.iter().map(|m| (m.model.as_str(), m)).collect();
    // (type, tier) → (cosines, schema flags)
    let mut g: BTreeMap<(bool, Tier), (Vec<f64>, Vec<f64>)> = BTreeMap::new();
    for u in inp.units.iter().filter(|u| u.round == 0 && u.sample == 0) {
        let Some(m) = meta.get(u.model.as_str()) else { continue };
        if m.proprietary == Some(true) {
            continue;
        }
        let (Some(code), Some(size)) = (m.code, m.size_b) else { continue };
        let e = g.entry((code, Tier::of(size))).or_default();
        if let Some(v) = u.values.get("cosine") {
            e.0.push(*v);
        }
        if let Some(v) = u.values.get("schema_ok") {
            e.1.push(*v * 100.0);
        }
    }
    if g.is_empty() {
        return None;
    }
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 380)).into_drawing_area();
        root.fill(&WHITE).expect("svg");
        let (left, right) = root.split_horizontally(450);
        for (area, idx, desc) in [(&left, 0usize, "Mean cosine similarity"), (&right, 1, "Schema validity (%)")] {
            let series: Vec<(bool, Vec<(i32, f64)>)> = [false, true]
                .iter()
                .map(|code| {
                    let pts = Tier::ALL
                        .iter()
                        .enumerate()
                        .filter_map(|(i, t)| {
                            g.get(&(*code, *t))
                                .map(|e| if idx == 0 { &e.0 } else { &e.1 })
                                .filter(|v| !v.is_empty())
                                .map(|v| (i as i32, mean_of(v)))
                        })
                        .collect();
                    (*code, pts)
                })
                .collect();
            let (y0, y1) = range(
                series.iter().flat_map(|s| s.1.iter().map(|p| p.1)),
                if idx == 0 { 0.02 } else { 5.0 },
                (0.0, if idx == 0 { 1.0 } else { 100.0 }),
            );
            let mut chart = ChartBuilder::on(area)
                .margin(15)
                .x_label_area_size(35)
                .y_label_area_size(55)
                .build_cartesian_2d(-0.5f64..2.5f64, y0..y1)
                .expect("chart");
            chart
                .configure_mesh()
                .y_desc(desc)
                .x_labels(3)
                .x_label_formatter(&|x| {
                    let i = x.round() as i64;
                    if (x - i as f64).abs() < 1e-6 && (0..3).contains(&i) {
                        Tier::ALL[i as usize].label().to_string()
                    } else {
                        String::new()
                    }
                })
                .light_line_style(WHITE.mix(0.0))
                .draw()
                .expect("mesh");
            for (code, pts) in series {
                let col = if code { CODE } else { GENERAL };
                let pts: Vec<(f64, f64)> = pts.into_iter().map(|(i, v)| (i as f64, v)).collect();
                chart.draw_series(LineSeries::new(pts.clone(), col.stroke_width(2))).expect("line").label(if code {
                    "code"
                } else {
                    "general"
                });
                chart
                    .draw_series(pts.iter().map(|p| {
                        Rectangle::new(
                            [(p.0 - 0.04, p.1 - (y1 - y0) * 0.012), (p.0 + 0.04, p.1 + (y1 - y0) * 0.012)],
                            col.filled(),
                        )
                    }))
                    .expect("marks");
            }
            chart
                .configure_series_labels()
                .border_style(BLACK)
                .background_style(WHITE.mix(0.8))
                .draw()
                .expect("legend");
        }
        root.present().expect("svg");
    }
    Some(svg)
}

fn boxplot(metric: &str, vals: &BTreeMap<String, Vec<f64>>) -> String {
    let names: Vec<&String> = vals.keys().collect();
    let n = names.len();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (((n as u32) * 90 + 120).max(420), 420)).into_drawing_area();
        root.fill(&WHITE).expect("svg");
        let mut chart = ChartBuilder::on(&root)
            .margin(15)
            .x_label_area_size(60)
            .y_label_area_size(55)
            .caption(metric, ("sans-serif", 16))
            .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), 0f64..1f64)
            .expect("chart");
        let labels: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        chart
            .configure_mesh()
            .x_labels(n)
            .x_label_formatter(&|x| {
                let i = x.round() as i64;
                if (x - i as f64).abs() < 1e-6 && i >= 0 && (i as usize) < labels.len() {
                    labels[i as usize].clone()
                } else {
                    String::new()
                }
            })
            .y_desc(metric)
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .expect("mesh");
        for (i, name) in names.iter().enumerate() {
            let v = &vals[*name];
            let (q1, med, q3) = (percentile(v, 25.0), percentile(v, 50.0), percentile(v, 75.0));
            let iqr = q3 - q1;
            let lo = v.iter().cloned().filter(|x| *x >= q1 - 1.5 * iqr).fold(f64::INFINITY, f64::min);
            let hi = v.iter().cloned().filter(|x| *x <= q3 + 1.5 * iqr).fold(f64::NEG_INFINITY, f64::max);
            let x = i as f64;
            let col = GENERAL;
            // One box (rectangle) per model, whiskers and median as paths.
            chart
                .draw_series(std::iter::once(Rectangle::new([(x - 0.3, q1), (x + 0.3, q3)], col.mix(0.35).filled())))
                .expect("box");
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(x - 0.3, med), (x + 0.3, med)],
                    BLACK.stroke_width(2),
                )))
                .expect("median");
            chart.draw_series(std::iter::once(PathElement::new(vec![(x, lo), (x, q1)], BLACK))).expect("whisker");
            chart.draw_series(std::iter::once(PathElement::new(vec![(x, q3), (x, hi)], BLACK))).expect("whisker");
        }
        root.present().expect("svg");
    }
    svg
}
