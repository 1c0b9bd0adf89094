//! The memory routes (issue 18 part 3, M1): list the Room's memory (`objective.read`), add an
//! entry with its provenance, correct one, retract one (`memory.manage`, the owner and
//! operators by default). Each handler extracts, calls one service method and serializes:
//! the domain decides who may and refuses what the Room does not have.

use agentroom_api_model::requests::MemoryProvenance;
use agentroom_api_model::requests::{AddMemoryBody, CorrectMemoryBody, RetractMemoryBody};
use agentroom_api_model::responses::{
    Decision, MemoryEntryView, MemoryVersionView, Page as ApiPage, RedactionView, RetractionView,
};
use agentroom_domain::memory::{MemoryEntry, text_problem};
use agentroom_domain::redaction::{RedactionTarget, Redactions};
use axum::Json;
use axum::extract::State;

use super::State as ApiState;
use super::auth::Caller;
use super::extract::{IdempotencyKey, KnownMemoryEntry, StrictJson};
use super::handlers::Page;
use super::handlers::{decided, input_id};
use crate::error::ApiError;

/// An entry as the API shows it, with its redaction record when redacted (`None` for an
/// entry without a text, which the domain never makes).
fn view(entry: &MemoryEntry, redactions: &Redactions) -> Option<MemoryEntryView> {
    let added = entry.added()?;
    let current = entry.current()?;
    let versions: Vec<MemoryVersionView> = entry
        .versions()
        .iter()
        .map(|v| MemoryVersionView {
            text: v.text.clone(),
            by: v.by.clone(),
            at: v.at.as_millis(),
        })
        .collect();
    Some(MemoryEntryView {
        id: entry.id(),
        text: current.text.clone(),
        provenance: entry.provenance().clone().into(),
        added_by: added.by.clone(),
        added_at: added.at.as_millis(),
        versions,
        retracted: entry.retraction().map(|r| RetractionView {
            by: r.by.clone(),
            at: r.at.as_millis(),
            why: r.why.clone(),
        }),
        redacted: redactions
            .of(&RedactionTarget::Memory { entry: entry.id() })
            .map(RedactionView::from),
    })
}

/// A text the domain would refuse by M1 is a 422 here, before anything is decided.
fn check_text(field: &str, text: &str) -> Result<(), ApiError> {
    match text_problem(text) {
        Some(problem) => Err(ApiError::InvalidBody(format!("{field}: {problem}"))),
        None => Ok(()),
    }
}

/// `GET /v1/rooms/{room}/memory`: every entry in the order added, retracted ones included.
pub(crate) async fn list(
    caller: Caller,
    page: Page,
) -> Result<Json<ApiPage<MemoryEntryView>>, ApiError> {
    let state = &caller.stored.state;
    let entries: Vec<MemoryEntryView> = state
        .memory()
        .entries()
        .iter()
        .filter_map(|entry| view(entry, state.redactions()))
        .collect();
    Ok(page.of(&entries))
}

/// `POST /v1/rooms/{room}/memory`.
pub(crate) async fn add(
    State(api): State<ApiState>,
    caller: Caller,
    key: IdempotencyKey,
    StrictJson(body): StrictJson<AddMemoryBody>,
) -> Result<Json<Decision>, ApiError> {
    check_text("text", &body.text)?;
    if let MemoryProvenance::External { url, .. } = &body.provenance
        && url.trim().is_empty()
    {
        return Err(ApiError::InvalidBody(
            "provenance.url: an external source needs its address".to_owned(),
        ));
    }
    // The same key with another body is another request (as for events).
    let what = format!("memory/add/{:?}/{:?}", body.text, body.provenance);
    let id = input_id(&api, &caller, &key, &what)?;
    let outcome = api
        .rooms
        .add_memory(
            &caller.room,
            id,
            caller.principal.clone(),
            body.text,
            body.provenance.into(),
        )
        .await?;
    decided(&outcome)
}

/// `POST /v1/rooms/{room}/memory/{entry}/correct`.
pub(crate) async fn correct(
    State(api): State<ApiState>,
    caller: Caller,
    KnownMemoryEntry(entry): KnownMemoryEntry,
    key: IdempotencyKey,
    StrictJson(body): StrictJson<CorrectMemoryBody>,
) -> Result<Json<Decision>, ApiError> {
    check_text("text", &body.text)?;
    let what = format!("memory/correct/{entry}/{:?}", body.text);
    let id = input_id(&api, &caller, &key, &what)?;
    let outcome = api
        .rooms
        .correct_memory(&caller.room, id, caller.principal.clone(), entry, body.text)
        .await?;
    decided(&outcome)
}

/// `POST /v1/rooms/{room}/memory/{entry}/retract`.
pub(crate) async fn retract(
    State(api): State<ApiState>,
    caller: Caller,
    KnownMemoryEntry(entry): KnownMemoryEntry,
    key: IdempotencyKey,
    StrictJson(body): StrictJson<RetractMemoryBody>,
) -> Result<Json<Decision>, ApiError> {
    if body.why.trim().is_empty() {
        return Err(ApiError::InvalidBody(
            "why: blank; say why the entry is retracted".to_owned(),
        ));
    }
    let id = input_id(&api, &caller, &key, &format!("memory/retract/{entry}"))?;
    let outcome = api
        .rooms
        .retract_memory(&caller.room, id, caller.principal.clone(), entry, body.why)
        .await?;
    decided(&outcome)
}
