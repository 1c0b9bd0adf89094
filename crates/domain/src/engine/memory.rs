//! M1: the Room's memory changes only by an explicit act of the owner or an operator
//! (`memory.manage`), each with provenance; a correction adds a version and keeps the earlier
//! ones; a retraction keeps the entry with who retracted it, when and why, and from then on
//! the entry never reaches a model (C1). Nothing is learned automatically: no other input
//! touches the memory.

use super::{Ctx, MemoryChange};
use crate::ids::{MemoryEntryId, PrincipalId};
use crate::memory::{MemoryEntry, MemoryText, Provenance, Retraction, text_problem};
use crate::room::Permission;
use crate::rules::Rule;

impl Ctx<'_, '_> {
    /// M1: adds, corrects or retracts a memory entry, one decision each.
    pub(super) fn change_memory(&mut self, by: &PrincipalId, change: MemoryChange) {
        if !self.state.may(by, Permission::MemoryManage) {
            self.reject(
                None,
                Rule::M1,
                format!(
                    "{by} lacks the permission {}: only an explicit act of the owner or an operator changes the Room's memory",
                    Permission::MemoryManage
                ),
            );
            return;
        }
        match change {
            MemoryChange::Add { text, provenance } => self.add_memory(by, text, provenance),
            MemoryChange::Correct { entry, text } => self.correct_memory(by, entry, text),
            MemoryChange::Retract { entry, why } => self.retract_memory(by, entry, why),
        }
    }

    fn add_memory(&mut self, by: &PrincipalId, text: String, provenance: Provenance) {
        if let Some(problem) = text_problem(&text) {
            self.reject(None, Rule::M1, format!("memory entry not added: {problem}"));
            return;
        }
        if let Some(problem) = self.provenance_problem(&provenance) {
            self.reject(None, Rule::M1, format!("memory entry not added: {problem}"));
            return;
        }
        let id = MemoryEntryId::from_uuid(self.env.ids.next_uuid());
        let at = self.env.now;
        self.accept(
            None,
            Some(Rule::M1),
            format!("{by} added memory entry {id} from {provenance}"),
        );
        self.state.memory.push(MemoryEntry {
            id,
            provenance,
            versions: vec![MemoryText {
                text,
                by: by.clone(),
                at,
            }],
            retraction: None,
            redacted: false,
        });
    }

    fn correct_memory(&mut self, by: &PrincipalId, id: MemoryEntryId, text: String) {
        let refusal = match self.state.memory.get(id) {
            None => Some(format!("there is no memory entry {id} in this room")),
            Some(entry) if entry.is_redacted() => Some(format!(
                "memory entry {id} is redacted; add a new entry instead"
            )),
            Some(entry) if !entry.is_current() => Some(format!(
                "memory entry {id} is retracted; add a new entry instead"
            )),
            Some(_) => text_problem(&text).map(|p| format!("memory entry {id} not corrected: {p}")),
        }
        .or_else(|| {
            let same = self
                .state
                .memory
                .get(id)
                .and_then(MemoryEntry::current)
                .is_some_and(|v| v.text == text);
            same.then(|| format!("memory entry {id} says exactly this already; nothing to correct"))
        });
        if let Some(message) = refusal {
            self.reject(None, Rule::M1, message);
            return;
        }
        let at = self.env.now;
        let Some(entry) = self.state.memory.get_mut(id) else {
            return;
        };
        entry.versions.push(MemoryText {
            text,
            by: by.clone(),
            at,
        });
        let version = entry.versions.len();
        self.accept(
            None,
            Some(Rule::M1),
            format!("{by} corrected memory entry {id} (version {version}); earlier versions stay in its history"),
        );
    }

    fn retract_memory(&mut self, by: &PrincipalId, id: MemoryEntryId, why: String) {
        let refusal = match self.state.memory.get(id) {
            None => Some(format!("there is no memory entry {id} in this room")),
            Some(entry) => entry.retraction().map(|r| {
                format!(
                    "memory entry {id} was retracted already, by {} at {}",
                    r.by, r.at
                )
            }),
        }
        .or_else(|| {
            why.trim()
                .is_empty()
                .then(|| format!("memory entry {id} not retracted: say why"))
        });
        if let Some(message) = refusal {
            self.reject(None, Rule::M1, message);
            return;
        }
        let at = self.env.now;
        let Some(entry) = self.state.memory.get_mut(id) else {
            return;
        };
        entry.retraction = Some(Retraction {
            by: by.clone(),
            at,
            why,
        });
        self.accept(
            None,
            Some(Rule::M1),
            format!("{by} retracted memory entry {id}: it stays in the Room's memory and never reaches a model"),
        );
    }

    /// Why `provenance` names nothing this Room has, if it does not.
    fn provenance_problem(&self, provenance: &Provenance) -> Option<String> {
        match provenance {
            Provenance::OwnerMessage { event } => {
                let known = self.state.has_owner_message(*event)
                    || self.env.archive.has_owner_message(*event);
                (!known).then(|| format!("this room has no owner message {event}"))
            }
            Provenance::Contribution { id } => (!self.state.contributions.contains_key(id)
                && !self.env.archive.has_contribution(*id))
            .then(|| format!("this room has no contribution {id}")),
            Provenance::External { url, .. } => url
                .trim()
                .is_empty()
                .then(|| "an external source needs its address".to_owned()),
        }
    }
}
