//! Context assembly (C1): what each model call sees of the Room, assembled by one function per
//! role from the Room as stored when the call is sent, in the order it matters (the adapter
//! fits it into its role's input bound, leaving out the last optional items first; never the
//! criteria, the task or the report).
//!
//! - reasoner: the objective, the owner's message that made it and the owner's corrections,
//!   the Room's current memory entries each with its provenance (a retracted entry never,
//!   M1), the Room's capabilities as the catalog resolves them, the members by role (no
//!   secrets);
//!   progress, unmet evidence and feedback travel in the brief;
//! - specialist: the objective and the owner's request, the criteria, the capability's
//!   declared outputs, the content of its dependencies' contributions and their sources;
//! - reviewer: the report's text, every source it cites (a document's excerpt and metadata,
//!   a cited contribution's text), the criteria.
//!
//! Content comes from the Room's artifact store by the digests its state holds; content that
//! is missing there is named as missing, never invented.

use std::sync::Arc;

use agentroom_ports::domain::artifact::ContentDigest;
use agentroom_ports::domain::engine::{CallBrief, CallRequest};
use agentroom_ports::domain::event::EventBody;
use agentroom_ports::domain::ids::{ContributionId, RoomId};
use agentroom_ports::domain::memory::{MemoryEntry, Provenance};
use agentroom_ports::domain::objective::{Criterion, Objective};
use agentroom_ports::domain::review::{Contribution, Source};
use agentroom_ports::domain::state::RoomState;
use agentroom_ports::{CallContext, ContextItem, StoreError};

use crate::Shared;

/// Assembles the context of `request` from `state`, the Room as stored now.
pub(crate) async fn assemble(
    shared: &Arc<Shared>,
    room: &RoomId,
    state: &RoomState,
    request: &CallRequest,
) -> Result<CallContext, StoreError> {
    let reader = Reader {
        shared,
        room,
        state,
    };
    let objective = request.objective.and_then(|id| state.objective(id));
    let items = match &request.brief {
        CallBrief::Interpret { .. } => reader.reasoner(objective).await?,
        CallBrief::Execute(task) => {
            reader
                .specialist(objective, &task.capability, &task.dep_contributions)
                .await?
        }
        CallBrief::Review { report, criteria } => {
            reader.reviewer(report.contribution, criteria).await?
        }
    };
    Ok(CallContext::new(items))
}

struct Reader<'a> {
    shared: &'a Arc<Shared>,
    room: &'a RoomId,
    state: &'a RoomState,
}

impl Reader<'_> {
    async fn reasoner(
        &self,
        objective: Option<&Objective>,
    ) -> Result<Vec<ContextItem>, StoreError> {
        let mut items = Vec::new();
        if let Some(objective) = objective {
            items.push(objective_item(objective));
            items.extend(self.owner_words(objective).await?);
        }
        items.extend(self.state.memory().current().filter_map(memory_item));
        items.extend(self.capabilities(None));
        items.push(self.members());
        Ok(items)
    }

    async fn specialist(
        &self,
        objective: Option<&Objective>,
        capability: &str,
        deps: &[ContributionId],
    ) -> Result<Vec<ContextItem>, StoreError> {
        let mut items = Vec::new();
        if let Some(objective) = objective {
            items.push(objective_item(objective));
            items.push(criteria_item(objective.criteria()));
            items.extend(self.owner_words(objective).await?);
        }
        items.extend(
            self.capabilities(Some(capability))
                .map(ContextItem::required),
        );
        for id in deps {
            let Some(contribution) = self.state.contributions().get(id) else {
                continue;
            };
            items.push(self.contribution_item("dependency", contribution).await?);
            for source in contribution.sources() {
                if let Some(item) = self.source_item(source).await? {
                    items.push(item.attr("cited_by", id.to_string()));
                }
            }
        }
        Ok(items)
    }

    async fn reviewer(
        &self,
        report: ContributionId,
        criteria: &[Criterion],
    ) -> Result<Vec<ContextItem>, StoreError> {
        let mut items = vec![criteria_item(criteria)];
        let Some(report) = self.state.contributions().get(&report) else {
            return Ok(items);
        };
        items.push(self.contribution_item("report", report).await?.required());
        for source in report.sources() {
            if let Some(item) = self.source_item(source).await? {
                items.push(item);
            }
        }
        Ok(items)
    }

    /// The owner's message that made the objective and the owner's corrections (O14), in
    /// order.
    async fn owner_words(&self, objective: &Objective) -> Result<Vec<ContextItem>, StoreError> {
        let mut items = Vec::new();
        let ids =
            std::iter::once(objective.origin()).chain(objective.corrections().iter().copied());
        for id in ids {
            let Some(event) = self.shared.persisted_event(self.room, id).await? else {
                continue;
            };
            let (kind, text) = match &event.body {
                EventBody::OwnerMessage { text } => ("owner_message", text),
                EventBody::OwnerCorrection { text, .. } => ("owner_correction", text),
                _ => continue,
            };
            items.push(
                ContextItem::new(kind, id.to_string(), text.clone())
                    .attr("author", event.author.to_string()),
            );
        }
        Ok(items)
    }

    /// The Room's capabilities as the catalog describes them, or only `only`.
    fn capabilities(&self, only: Option<&str>) -> impl Iterator<Item = ContextItem> + use<> {
        let described = self.shared.catalog.describe();
        let only = only.map(str::to_owned);
        described
            .into_iter()
            .filter(move |c| only.as_deref().is_none_or(|name| c.name == name))
            .map(|c| {
                let text = serde_json::to_string(&c).unwrap_or_default();
                ContextItem::new("capability", c.name.clone(), text)
            })
    }

    /// The members by role (principal ids only: no token, no secret).
    fn members(&self) -> ContextItem {
        let lines: Vec<String> = self
            .state
            .members()
            .iter()
            .map(|(principal, roles)| {
                let roles: Vec<&str> = roles.iter().map(|r| r.as_str()).collect();
                format!("{principal}: {}", roles.join(", "))
            })
            .collect();
        ContextItem::new("members", "", lines.join("\n"))
    }

    /// A contribution's text with who made it for which task.
    async fn contribution_item(
        &self,
        kind: &str,
        contribution: &Contribution,
    ) -> Result<ContextItem, StoreError> {
        let text = self.body_text(contribution).await?;
        Ok(ContextItem::new(kind, contribution.id().to_string(), text)
            .attr("task", contribution.task().to_string())
            .attr("author", contribution.author().to_string()))
    }

    /// A source as the reader sees it: a document's excerpt with its metadata, a cited
    /// contribution's text; `None` for a bare external reference, which has no text.
    async fn source_item(&self, source: &Source) -> Result<Option<ContextItem>, StoreError> {
        match source {
            Source::Document(document) => {
                let text = self.text(&document.excerpt).await?;
                Ok(Some(
                    ContextItem::new("source", document.id.clone(), text)
                        .attr("uri", document.uri.clone())
                        .attr("title", document.title.clone())
                        .attr(
                            "retrieved_at",
                            document.retrieved_at.as_millis().to_string(),
                        )
                        .attr("content_digest", document.content_digest.to_string()),
                ))
            }
            Source::Contribution { id } => match self.state.contributions().get(id) {
                Some(cited) => {
                    let item = self.contribution_item("source", cited).await?;
                    Ok(Some(item.attr("kind_of_source", "contribution")))
                }
                None => Ok(None),
            },
            Source::External { .. } => Ok(None),
        }
    }

    /// A contribution's body as text: its stored body, or (made before bodies were kept by
    /// digest) its inline pieces.
    async fn body_text(&self, contribution: &Contribution) -> Result<String, StoreError> {
        match contribution.body() {
            Some(body) => self.text(&body.digest).await,
            None => Ok(contribution
                .artifacts()
                .iter()
                .map(|a| format!("## {}\n\n{}\n", a.name, a.content))
                .collect::<Vec<_>>()
                .join("\n")),
        }
    }

    async fn text(&self, digest: &ContentDigest) -> Result<String, StoreError> {
        // Redacted content never reaches a model; its reason stays out of the prompt too.
        if self.state.redactions().of_content(digest).is_some() {
            return Ok(format!("(content {digest} was redacted)"));
        }
        Ok(match self.shared.store.content(self.room, digest).await? {
            Some(stored) => String::from_utf8_lossy(&stored.bytes).into_owned(),
            None => format!("(content {digest} is not in this room's store)"),
        })
    }
}

/// A current memory entry (M1) with its provenance: what it came from, who added it and
/// when, and its latest correction when it has one. `None` for a retracted entry, which
/// never reaches a model.
fn memory_item(entry: &MemoryEntry) -> Option<ContextItem> {
    if !entry.is_current() {
        return None;
    }
    let added = entry.added()?;
    let current = entry.current()?;
    let provenance = entry.provenance();
    let mut item = ContextItem::new("memory", entry.id().to_string(), current.text.clone())
        .attr("from", provenance.kind())
        .attr("source", provenance.reference());
    if let Provenance::External { digest, .. } = provenance {
        item = item.attr("content_digest", digest.to_string());
    }
    item = item
        .attr("added_by", added.by.to_string())
        .attr("added_at", added.at.as_millis().to_string());
    let versions = entry.versions().len();
    if versions > 1 {
        item = item
            .attr("version", versions.to_string())
            .attr("corrected_by", current.by.to_string())
            .attr("corrected_at", current.at.as_millis().to_string());
    }
    Some(item)
}

fn objective_item(objective: &Objective) -> ContextItem {
    ContextItem::new("objective", objective.id().to_string(), objective.title())
        .attr("status", objective.status().to_string())
        .required()
}

fn criteria_item(criteria: &[Criterion]) -> ContextItem {
    let lines: Vec<String> = criteria
        .iter()
        .map(|c| format!("{}: {}", c.id, c.text))
        .collect();
    ContextItem::new("criteria", "", lines.join("\n")).required()
}
