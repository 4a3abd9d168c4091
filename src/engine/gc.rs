//! What the engine's own bookkeeping no longer needs (`doc2ci gc`): partitions the study no
//! longer declares, and checkpoints no run will resume.

use anyhow::Result;

use super::plan::Pipeline;
use super::{Checkpoint, State};
use crate::ui::Ui;
use crate::warehouse::{disk_size, Swept, Warehouse};

impl Pipeline {
    /// Removes stale partitions and dead checkpoints, and saves the state without them. The caller
    /// holds the warehouse's lock.
    pub fn gc(&self, wh: &Warehouse, ui: &Ui) -> Result<Swept> {
        let mut st = State::load(wh)?;
        let mut swept = Swept::default();
        let plan = self.plan()?;
        for s in &plan.stale {
            if let Some(part) = self.partition(s) {
                swept.bytes += disk_size(&wh.file(&part));
                wh.remove(&part)?;
            }
            st.partitions.remove(s);
            swept.items += 1;
            ui.info(&format!("removed stale partition {s}"));
        }
        // A checkpoint is kept only if a run may resume it: its partition is still declared, not
        // yet finished under that key, and its key has not moved on (a changed setting or input:
        // the next run starts afresh under its new key).
        let next_key: std::collections::HashMap<String, Option<String>> = plan
            .items
            .iter()
            .map(|i| (self.nodes[i.node].part.id(), i.key.as_ref().map(|k| k[..16].to_string())))
            .collect();
        swept += Checkpoint::sweep(wh, |id, key| {
            let finished = st.partitions.get(id).is_some_and(|p| p.key[..16] == *key);
            let resumable = match next_key.get(id) {
                None => false,
                // An upstream partition runs first: its key is not known yet.
                Some(None) => true,
                Some(Some(next)) => next == key,
            };
            resumable && !finished
        });
        st.save(wh)?;
        Ok(swept)
    }
}
