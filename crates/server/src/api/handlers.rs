//! The REST handlers. Each runs behind the guard, which put the authorized [`Caller`] (with
//! the Room as loaded) in the request, and takes what it needs through the extractors of
//! [`super::extract`]: the caller, the idempotency key, a strict JSON body (read whole up to
//! [`super::MAX_BODY_BYTES`], parsed into types that refuse unknown fields), a page, and the
//! ids in its path (one the Room does not know is a 404).

use super::Api;
use agentroom_api_model::requests::{
    AcknowledgeBody, ControlBody, EmptyBody, LateBody, PostEvent, RaiseBody, ResolveBody,
    ResolvedAs, ReviewBody, TaskUpdateBody,
};
use agentroom_api_model::responses::{
    Board, BoardColumn, Budget, CallStatus, ContributionView, CorrectionView, Corrections, Decided,
    Decision, LateResult, Member, ObjectiveBrief, ObjectiveDetail, OperationView, Page as ApiPage,
    PendingMessage, PlanDiff, PlanVersionView, PoolGauge, QuotesView, RedactionView, ReportContent,
    ReportView, ResolutionView, Resolved, ReviewView, Reviews, RoomView, SourceView, TaskView, You,
};
use agentroom_coordinator::{
    ContributionContent, HumanReview, InputId, OperatorInput, Outcome, ResolveOutcome, TaskUpdate,
};
use agentroom_domain::engine::{self, LogEntry};
use agentroom_domain::event::{Event, EventBody};
use agentroom_domain::ids::{EventId, ObjectiveId, OperationId, PrincipalId, TaskKey};
use agentroom_domain::money::UsdMicros;
use agentroom_domain::objective::{Criterion, Objective, ObservedRevisions};
use agentroom_domain::plan::{Column, PlanVersion, Task};
use agentroom_domain::review::{Contribution, CriterionVerdict};
use agentroom_domain::room::Permission;
use agentroom_domain::state::{OperationState, RoomState};
use agentroom_planning::{Session, Step};
use agentroom_ports::{OperationStatus, Resolution, ResolutionOutcome, Revision};
use axum::Json;
use axum::body::Body;
use axum::extract::{FromRequestParts, State};
use axum::http::header::CONTENT_TYPE;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};

use super::State as ApiState;
use super::auth::Caller;
use super::extract::{
    HeldOperation, IdempotencyKey, KnownObjective, ObjectiveView, PendingEvent,
    ReadableContribution, RoomOperation, StrictJson, StrictJsonOrEmpty,
};
use crate::error::ApiError;

// ---------------------------------------------------------------------------------------------
// Reading requests
// ---------------------------------------------------------------------------------------------

/// A page of a list: `?limit=1..=200` (default 50) and `?cursor=` from the previous page.
pub(super) struct Page {
    offset: usize,
    limit: usize,
}

impl Page {
    const DEFAULT: usize = 50;
    const MAX: usize = 200;

    /// A `limit` query value: a whole number from 1 to [`Page::MAX`].
    fn limit(value: &str) -> Result<usize, ApiError> {
        value
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=Self::MAX).contains(n))
            .ok_or_else(|| {
                ApiError::BadRequest(format!(
                    "limit must be a whole number from 1 to {}",
                    Self::MAX
                ))
            })
    }

    /// A list's query: `limit` (default [`Page::DEFAULT`]) and the raw `cursor`, if any;
    /// anything else is refused. Each kind of page reads its own cursor.
    fn query(uri: &Uri) -> Result<(usize, Option<&str>), ApiError> {
        let (mut limit, mut cursor) = (Self::DEFAULT, None);
        for pair in uri.query().unwrap_or_default().split('&') {
            if pair.is_empty() {
                continue;
            }
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            match name {
                "limit" => limit = Page::limit(value)?,
                "cursor" => cursor = Some(value),
                other => {
                    return Err(ApiError::BadRequest(format!(
                        "unknown query parameter `{other}`: lists take `limit` and `cursor`"
                    )));
                }
            }
        }
        Ok((limit, cursor))
    }

    /// A cursor this API did not hand out.
    fn bad_cursor() -> ApiError {
        ApiError::BadRequest("cursor must be a next_cursor this API returned".to_owned())
    }

    pub(super) fn from_uri(uri: &Uri) -> Result<Self, ApiError> {
        let (limit, cursor) = Self::query(uri)?;
        let offset = match cursor {
            None => 0,
            Some(value) => value.parse::<usize>().map_err(|_| Self::bad_cursor())?,
        };
        Ok(Page { offset, limit })
    }

    /// `{"items": [...], "next_cursor": "..." | null}`.
    pub(super) fn of<T: Clone>(&self, items: &[T]) -> Json<ApiPage<T>> {
        let end = self.offset.saturating_add(self.limit).min(items.len());
        let slice = items.get(self.offset..end).unwrap_or_default();
        let next = (end < items.len()).then(|| end.to_string());
        Json(ApiPage {
            items: slice.to_vec(),
            next_cursor: next,
        })
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Page {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        Page::from_uri(&parts.uri)
    }
}

/// The input id of a request: derived from `Idempotency-Key`, the Room, the caller and what
/// the request asks (`what`: the endpoint's target and the request's content), fresh
/// otherwise. The Room decides an input id once, durably (the store refuses a second
/// commit of it), so a retry with the same key — in this process, after a restart, or on
/// another process of the same database — is answered with the original decision and changes
/// nothing, while one key reused for a different request is a different input.
pub(super) fn input_id(
    api: &Api,
    caller: &Caller,
    key: &IdempotencyKey,
    what: &str,
) -> Result<InputId, ApiError> {
    match &key.0 {
        Some(key) => Ok(keyed_input_id(caller, key, what)),
        // The service's one randomness source: none is a 503, never a guessable id.
        None => Ok(api.rooms.fresh_input_id()?),
    }
}

/// The input id of `what` sent by `caller` under Idempotency-Key `key`.
pub(super) fn keyed_input_id(caller: &Caller, key: &str, what: &str) -> InputId {
    InputId::named(&format!(
        "rest/{}/{}/{what}/{key}",
        caller.room, caller.principal
    ))
}

/// What revoking `principal` is named in its input id.
pub(super) fn revoke_input(principal: &PrincipalId) -> String {
    format!("member/revoke/{principal}")
}

/// What a decided input answers: the revision and the decision log (rejections by a rule are
/// decisions too, with their rule). An input decided before answers with its original
/// revision and log, `decided: false` and `already_done: true`.
pub(super) fn answer(outcome: &Outcome) -> Json<Decision> {
    let accepted = |log: &[LogEntry]| log.iter().all(|e| e.verdict == engine::Verdict::Accepted);
    Json(match outcome {
        Outcome::Decided { revision, log, .. } => Decision {
            decided: true,
            already_done: false,
            revision: Some(revision.0),
            accepted: Some(accepted(log)),
            log: log.clone(),
            event: None,
        },
        Outcome::AlreadyDecided { revision, log } => Decision {
            decided: false,
            already_done: true,
            revision: Some(revision.0),
            accepted: Some(accepted(log)),
            log: log.clone(),
            event: None,
        },
        Outcome::AlreadyDone => Decision {
            decided: false,
            already_done: true,
            revision: None,
            accepted: None,
            log: Vec::new(),
            event: None,
        },
    })
}

/// What an operator input answers: [`answer`], or a 409 naming the rule when the domain
/// refused the input itself (its first log entry, the input's own verdict, is a rejection;
/// later entries are what it set off). A retry of a refused input is refused alike.
pub(super) fn decided(outcome: &Outcome) -> Result<Json<Decision>, ApiError> {
    let revision = match outcome {
        Outcome::Decided { revision, .. } | Outcome::AlreadyDecided { revision, .. } => revision.0,
        Outcome::AlreadyDone => return Ok(answer(outcome)),
    };
    match outcome.log().first() {
        Some(LogEntry {
            verdict: engine::Verdict::Rejected,
            rule: Some(rule),
            message,
            ..
        }) => Err(ApiError::RuleRefused {
            rule: *rule,
            message: message.clone(),
            revision,
        }),
        _ => Ok(answer(outcome)),
    }
}

// ---------------------------------------------------------------------------------------------
// The Room
// ---------------------------------------------------------------------------------------------

fn objective_brief(objective: &Objective) -> ObjectiveBrief {
    ObjectiveBrief {
        id: objective.id().to_string(),
        title: objective.title().to_owned(),
        status: objective.status(),
        owner: objective.owner().clone(),
        revision: objective.revision(),
        control_revision: objective.control_revision(),
        plan_versions: objective.plans().len(),
    }
}

/// `GET /v1/rooms/{room}`: the Room, every objective it has held listed (closed ones read
/// back from their records).
pub(crate) async fn room(
    State(api): State<ApiState>,
    caller: Caller,
) -> Result<Json<RoomView>, ApiError> {
    let stored = api.rooms.room_with_history(&caller.room).await?;
    let state = &stored.state;
    let quotes = state.quotes();
    let short = api.rooms.served().map_or_else(Vec::new, |served| {
        served
            .shortfalls(&quotes)
            .into_iter()
            .map(|(role, model, quote)| {
                format!(
                    "{}: the Room's quote {quote} is below what model `{}` may cost ({}); no {} \
                     call is admitted until an operator updates the quotes (`agentroom budget \
                     quotes`, POST /v1/rooms/{}/quotes)",
                    role.as_str(),
                    model.model,
                    model.quote,
                    role.as_str(),
                    state.room()
                )
            })
            .collect()
    });
    Ok(Json(RoomView {
        room: state.room().clone(),
        revision: stored.revision.0,
        you: You {
            principal: caller.principal.clone(),
            roles: caller.roles.clone(),
        },
        members: state.members().iter().count(),
        objectives: state.objectives().iter().map(objective_brief).collect(),
        budget: caller
            .may(Permission::BudgetRead)
            .then(|| state.ledger().balances()),
        review_source: state.policy().review_source(),
        // The quotes name models and amounts: budget readers only.
        quotes: caller.may(Permission::BudgetRead).then(|| QuotesView {
            reasoner_micros: quotes.reasoner.micros(),
            specialist_micros: quotes.specialist.micros(),
            reviewer_micros: quotes.reviewer.micros(),
            short,
        }),
        // The owner's messages: for those who oversee the Room (as with every task), not
        // for specialists and agent hosts, who see their own work.
        pending_messages: if state.oversees(&caller.principal) {
            state
                .intake()
                .iter()
                .map(|(event, i)| PendingMessage {
                    event: event.to_string(),
                    text: i.text().chars().take(200).collect(),
                    attempts: i.attempts(),
                    call: i.op().and_then(|op| call_status(state, op)),
                    held: i.held().map(str::to_owned),
                })
                .collect()
        } else {
            Vec::new()
        },
    }))
}

/// The call `op` as the Room holds it, if it is open.
fn call_status(state: &RoomState, op: OperationId) -> Option<CallStatus> {
    let operation = state.operation(op)?;
    let status = match operation.state() {
        OperationState::InFlight if operation.waiting_for_provider() => "waiting_for_provider",
        OperationState::InFlight => "running",
        OperationState::CancelRequested => "stopping",
        OperationState::Uncertain => "uncertain",
        _ => return None,
    };
    Some(CallStatus {
        op: op.to_string(),
        status: status.to_owned(),
        cause: operation.cause().map(|c| c.cause.clone()),
        since: operation.cause().map(|c| c.since.as_millis()),
    })
}

/// `GET /v1/rooms/{room}/members`.
pub(crate) async fn members(caller: Caller, page: Page) -> Result<Json<ApiPage<Member>>, ApiError> {
    let members: Vec<Member> = caller
        .stored
        .state
        .members()
        .iter()
        .map(|(principal, roles)| Member {
            principal: principal.clone(),
            roles: roles.iter().copied().collect(),
        })
        .collect();
    Ok(page.of(&members))
}

/// `POST /v1/rooms/{room}/events`.
pub(crate) async fn post_event(
    State(api): State<ApiState>,
    caller: Caller,
    key: IdempotencyKey,
    StrictJson(posted): StrictJson<PostEvent>,
) -> Result<Response, ApiError> {
    let body = match posted {
        PostEvent::OwnerMessage { text } => EventBody::OwnerMessage { text },
        // What the Room refuses of these (an unknown objective or task, another's task, a
        // terminal objective, criteria that cannot be frozen) the service refuses before
        // storing anything (the domain's `admits_event`).
        PostEvent::OwnerCorrection {
            objective,
            text,
            criteria,
        } => EventBody::OwnerCorrection {
            objective,
            text,
            criteria: criteria.map(|c| {
                c.into_iter()
                    .map(|c| Criterion {
                        id: c.id,
                        text: c.text,
                    })
                    .collect()
            }),
        },
        PostEvent::ExplicitReference { objective, task } => {
            known_objective(&api, &caller, objective).await?;
            EventBody::ExplicitReference { objective, task }
        }
        PostEvent::WaitAck {
            objective,
            task,
            reason,
        } => EventBody::WaitAck {
            objective,
            task,
            reason,
        },
        PostEvent::InternalReceipt { objective, note } => EventBody::InternalReceipt {
            objective: Some(objective),
            note,
        },
    };
    let id =
        EventId::from_uuid(*input_id(&api, &caller, &key, &format!("event/{body:?}"))?.as_uuid());
    let event = Event {
        id,
        room: caller.room.clone(),
        author: caller.principal.clone(),
        body,
    };
    let outcome = api.rooms.post(&event).await?;
    let Json(mut answer) = answer(&outcome);
    answer.event = Some(id.to_string());
    Ok((StatusCode::ACCEPTED, Json(answer)).into_response())
}

/// 404 unless the caller's Room has objective `objective`, open or closed (its record read
/// then).
async fn known_objective(
    api: &ApiState,
    caller: &Caller,
    objective: ObjectiveId,
) -> Result<(), ApiError> {
    let known = caller.stored.state.objective(objective).is_some()
        || api
            .rooms
            .room_for_objective(&caller.room, objective)
            .await?
            .state
            .objective(objective)
            .is_some();
    known
        .then_some(())
        .ok_or_else(|| ApiError::NotFound(format!("no objective {objective} in this room")))
}

// ---------------------------------------------------------------------------------------------
// Objectives
// ---------------------------------------------------------------------------------------------

/// `GET /v1/rooms/{room}/objectives`.
pub(crate) async fn objectives(
    State(api): State<ApiState>,
    caller: Caller,
    page: Page,
) -> Result<Json<ApiPage<ObjectiveBrief>>, ApiError> {
    let stored = api.rooms.room_with_history(&caller.room).await?;
    let items: Vec<ObjectiveBrief> = stored
        .state
        .objectives()
        .iter()
        .map(objective_brief)
        .collect();
    Ok(page.of(&items))
}

/// Whether the caller sees `task` (the domain's visibility: an owner, operator or reviewer
/// sees every task, anyone else only its own).
fn sees(caller: &Caller, task: &Task) -> bool {
    caller.stored.state.sees_task(&caller.principal, task)
}

fn task_view(state: &RoomState, plan: &PlanVersion, task: &Task) -> TaskView {
    TaskView {
        call: task.running_op().and_then(|op| call_status(state, op)),
        identity: task.identity().clone(),
        key: task.key().clone(),
        title: task.spec().title.clone(),
        capability: task.capability().to_owned(),
        kind: task.kind(),
        assignee: task.assignee().clone(),
        deps: task.spec().deps.clone(),
        column: plan.column_of(task),
        state: task.state().clone(),
        reused: task.is_reused(),
    }
}

/// `GET /v1/rooms/{room}/objectives/{objective}`: the objective and its current board.
pub(crate) async fn objective(
    caller: Caller,
    view: ObjectiveView,
) -> Result<Json<ObjectiveDetail>, ApiError> {
    let objective = view.objective()?;
    let board = objective.current_plan().map(|plan| {
        let columns: Vec<BoardColumn> = [
            Column::Backlog,
            Column::Todo,
            Column::InProgress,
            Column::Done,
        ]
        .into_iter()
        .map(|column| {
            let tasks: Vec<TaskView> = plan
                .tasks()
                .iter()
                .filter(|task| plan.column_of(task) == column && sees(&caller, task))
                .map(|task| task_view(&view.room.state, plan, task))
                .collect();
            BoardColumn { column, tasks }
        })
        .collect();
        Board {
            plan_version: plan.number(),
            columns,
        }
    });
    Ok(Json(ObjectiveDetail {
        brief: objective_brief(objective),
        criteria: objective.criteria().to_vec(),
        counters: objective.counters(),
        observed: objective.observed(),
        board,
        awaiting_review: objective.awaiting_review().map(|r| r.report().clone()),
    }))
}

/// `GET /v1/rooms/{room}/objectives/{objective}/corrections`: the owner's corrections of the
/// objective, oldest first (O14), as the service reads them from the stored events.
pub(crate) async fn corrections(
    State(api): State<ApiState>,
    caller: Caller,
    KnownObjective(objective): KnownObjective,
) -> Result<Json<Corrections>, ApiError> {
    let history = api.rooms.corrections(&caller.room, objective).await?;
    let items = history
        .corrections
        .into_iter()
        .map(|c| CorrectionView {
            event: c.event.to_string(),
            author: c.author,
            text: c.text,
            criteria: c.criteria,
            plan_version: c.plan_version,
        })
        .collect();
    Ok(Json(Corrections {
        objective: objective.to_string(),
        criteria: history.criteria,
        items,
    }))
}

/// `GET /v1/rooms/{room}/contributions/{contribution}`: a contribution the caller may read,
/// with its body, its sources and their excerpts, its outputs and digests.
pub(crate) async fn contribution(
    State(api): State<ApiState>,
    readable: ReadableContribution,
) -> Result<Json<ContributionView>, ApiError> {
    let contribution = readable.contribution()?;
    let state = &readable.room.state;
    Ok(Json(ContributionView {
        id: contribution.id().to_string(),
        objective: contribution.objective().to_string(),
        task: contribution.task().clone(),
        operation: contribution.op().to_string(),
        content: content_of(&api, state, contribution).await?,
        content_digest: contribution.content_digest(),
        redactions: contribution
            .digests()
            .into_iter()
            .filter_map(|digest| state.redactions().of_content(digest))
            .map(RedactionView::from)
            .collect(),
    }))
}

/// A report's content for its reviewers, as the service reads it (its cited contributions'
/// bodies as their excerpts, R7).
async fn report_content(
    api: &ApiState,
    state: &RoomState,
    report: &Contribution,
) -> Result<ReportContent, ApiError> {
    let content = api.rooms.report_content(state, report).await?;
    Ok(content_view(content))
}

/// What `contribution` holds, its content read from the Room's store by the service.
async fn content_of(
    api: &ApiState,
    state: &RoomState,
    contribution: &Contribution,
) -> Result<ReportContent, ApiError> {
    let content = api.rooms.contribution_content(state, contribution).await?;
    Ok(content_view(content))
}

fn content_view(content: ContributionContent) -> ReportContent {
    ReportContent {
        author: content.author,
        body: content.body,
        media_type: content.media_type,
        body_digest: content.body_digest,
        artifacts: content.artifacts,
        sources: content
            .sources
            .into_iter()
            .map(|source| SourceView {
                kind: source.kind.as_str().to_owned(),
                id: source.id,
                uri: source.uri,
                title: source.title,
                excerpt: source.excerpt,
                retrieved_at: source.retrieved_at,
                content_digest: source.content_digest,
                excerpt_digest: source.excerpt_digest,
            })
            .collect(),
        outputs: content.outputs,
    }
}

/// `GET /v1/rooms/{room}/objectives/{objective}/plans`: each version with its diff.
pub(crate) async fn plans(
    caller: Caller,
    view: ObjectiveView,
    page: Page,
) -> Result<Json<ApiPage<PlanVersionView>>, ApiError> {
    let objective = view.objective()?;
    let mut previous: Option<&PlanVersion> = None;
    let mut versions = Vec::new();
    for plan in objective.plans() {
        // Only the keys of tasks the caller sees (the domain decides which).
        let changes = view
            .room
            .state
            .visible_changes(&caller.principal, plan, previous);
        let keys = |keys: Vec<TaskKey>| keys.iter().map(ToString::to_string).collect::<Vec<_>>();
        let tasks: Vec<TaskView> = plan
            .tasks()
            .iter()
            .filter(|t| sees(&caller, t))
            .map(|t| task_view(&view.room.state, plan, t))
            .collect();
        versions.push(PlanVersionView {
            id: plan.id().to_string(),
            number: plan.number(),
            predecessor: plan.predecessor().map(|p| p.to_string()),
            trigger: plan.trigger().clone(),
            observed: plan.observed(),
            explanation: plan.explanation().to_owned(),
            current: objective.current_plan().map(|c| c.id()) == Some(plan.id()),
            tasks,
            diff: PlanDiff {
                added: keys(changes.added),
                removed: keys(changes.removed),
                changed: keys(changes.changed),
                unchanged: keys(changes.unchanged),
                reused: keys(changes.reused),
            },
        });
        previous = Some(plan);
    }
    Ok(page.of(&versions))
}

/// A page of the decision log: `?limit=1..=200` (default 50) and `?cursor=` from the previous
/// page, which names the last entry it listed (`{revision}.{index}`).
pub(crate) struct DecisionPage {
    limit: usize,
    after: (i64, usize),
}

impl DecisionPage {
    fn from_uri(uri: &Uri) -> Result<Self, ApiError> {
        let (limit, cursor) = Page::query(uri)?;
        let after = match cursor {
            None => (0, 0),
            Some(value) => value
                .split_once('.')
                .and_then(|(r, i)| Some((r.parse().ok()?, i.parse().ok()?)))
                .filter(|(r, _): &(i64, usize)| *r >= 1)
                .ok_or_else(Page::bad_cursor)?,
        };
        Ok(DecisionPage { limit, after })
    }
}

impl<S: Send + Sync> FromRequestParts<S> for DecisionPage {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        DecisionPage::from_uri(&parts.uri)
    }
}

/// `GET /v1/rooms/{room}/objectives/{objective}/decisions`: the objective's entries of the
/// Room's decision log, read from the store's history (so they outlive the process), in
/// commit order.
pub(crate) async fn decisions(
    State(api): State<ApiState>,
    caller: Caller,
    KnownObjective(objective): KnownObjective,
    page: DecisionPage,
) -> Result<Json<ApiPage<Decided>>, ApiError> {
    /// History rows read per round trip.
    const BATCH: usize = 256;
    let id = objective;
    let (after_revision, after_index) = page.after;
    // Entries of the revision the cursor is in come again from index `after_index + 1`.
    let mut from = Revision(after_revision.saturating_sub(1));
    let mut items: Vec<(Decided, String)> = Vec::new();
    'rows: loop {
        let rows = api.rooms.history(&caller.room, from, BATCH).await?;
        let last = rows.len() < BATCH;
        for row in rows {
            from = row.revision;
            let input = row.input;
            for (index, entry) in row.log.into_iter().enumerate() {
                if (row.revision.0, index) <= (after_revision, after_index) && after_revision > 0 {
                    continue;
                }
                // Entries of budget rules only for `budget.read` (the domain decides).
                if entry.objective != Some(id)
                    || !caller
                        .stored
                        .state
                        .sees_log_entry(&caller.principal, &entry)
                {
                    continue;
                }
                let cursor = format!("{}.{index}", row.revision.0);
                items.push((
                    Decided {
                        revision: row.revision.0,
                        input: input.clone(),
                        entry,
                    },
                    cursor,
                ));
                // One more than the page holds says whether another page follows.
                if items.len() > page.limit {
                    break 'rows;
                }
            }
        }
        if last {
            break;
        }
    }
    let next = (items.len() > page.limit)
        .then(|| items.get(page.limit - 1).map(|(_, cursor)| cursor.clone()))
        .flatten();
    items.truncate(page.limit);
    let items: Vec<Decided> = items.into_iter().map(|(decided, _)| decided).collect();
    Ok(Json(ApiPage {
        items,
        next_cursor: next,
    }))
}

/// `POST /v1/rooms/{room}/objectives/{objective}/control`.
pub(crate) async fn control(
    State(api): State<ApiState>,
    caller: Caller,
    KnownObjective(objective): KnownObjective,
    key: IdempotencyKey,
    StrictJson(ControlBody { action }): StrictJson<ControlBody>,
) -> Result<Json<Decision>, ApiError> {
    let outcome = api
        .rooms
        .submit(
            &caller.room,
            input_id(
                &api,
                &caller,
                &key,
                &format!("control/{objective}/{action:?}"),
            )?,
            OperatorInput::Control {
                by: caller.principal.clone(),
                objective,
                action,
            },
        )
        .await?;
    decided(&outcome)
}

/// `POST /v1/rooms/{room}/quotes`: the Room's quotes brought up to the models this host
/// serves (operators, B6).
pub(crate) async fn update_quotes(
    State(api): State<ApiState>,
    caller: Caller,
    key: IdempotencyKey,
    StrictJsonOrEmpty(EmptyBody {}): StrictJsonOrEmpty<EmptyBody>,
) -> Result<Json<Decision>, ApiError> {
    let id = input_id(&api, &caller, &key, "quotes")?;
    let outcome = api
        .rooms
        .update_quotes(&caller.room, id, caller.principal.clone())
        .await?;
    decided(&outcome)
}

/// `POST /v1/rooms/{room}/messages/{event}/retry`: a pending owner message whose provider
/// failed it is interpreted again (owners and operators).
pub(crate) async fn retry_message(
    State(api): State<ApiState>,
    caller: Caller,
    PendingEvent(event): PendingEvent,
    key: IdempotencyKey,
    StrictJsonOrEmpty(EmptyBody {}): StrictJsonOrEmpty<EmptyBody>,
) -> Result<Json<Decision>, ApiError> {
    let outcome = api
        .rooms
        .submit(
            &caller.room,
            input_id(&api, &caller, &key, &format!("retry/{event}"))?,
            OperatorInput::RetryMessage {
                by: caller.principal.clone(),
                event,
            },
        )
        .await?;
    decided(&outcome)
}

/// `POST /v1/rooms/{room}/objectives/{objective}/tasks`: only the task's assignee (checked
/// here, and again by the domain, T2/T3).
pub(crate) async fn update_task(
    State(api): State<ApiState>,
    caller: Caller,
    KnownObjective(objective): KnownObjective,
    key: IdempotencyKey,
    StrictJson(update): StrictJson<TaskUpdateBody>,
) -> Result<Json<Decision>, ApiError> {
    let id = input_id(
        &api,
        &caller,
        &key,
        &format!(
            "task/{objective}/{}/{:?}/{:?}",
            update.task, update.status, update.contribution
        ),
    )?;
    let outcome = api
        .rooms
        .update_own_task(
            &caller.room,
            id,
            caller.principal.clone(),
            objective,
            TaskUpdate {
                task: update.task,
                status: update.status,
                contribution: update.contribution,
            },
        )
        .await?;
    decided(&outcome)
}

// ---------------------------------------------------------------------------------------------
// Reviews
// ---------------------------------------------------------------------------------------------

/// `GET /v1/rooms/{room}/objectives/{objective}/reviews`.
pub(crate) async fn reviews(
    State(api): State<ApiState>,
    view: ObjectiveView,
) -> Result<Json<Reviews>, ApiError> {
    let objective = view.objective()?;
    let state = &view.room.state;
    let contributions = state.contributions();
    let mut reports = Vec::new();
    for report in objective.reports() {
        let content = match contributions.get(&report.contribution) {
            Some(c) => Some(report_content(&api, state, c).await?),
            None => None,
        };
        reports.push(ReportView {
            version: report.version,
            task: report.task.clone(),
            contribution: report.contribution.to_string(),
            source_set: report.source_set.clone(),
            content,
        });
    }
    let reviews = objective
        .reviews()
        .iter()
        .map(|review| ReviewView {
            id: review.id().to_string(),
            reviewer: review.reviewer().clone(),
            report_version: review.report().version,
            report: review.report().clone(),
            verdicts: review.verdicts().to_vec(),
            outcome: review.outcome(),
            model: review.model().map(str::to_owned),
        })
        .collect();
    Ok(Json(Reviews {
        objective: objective.id().to_string(),
        criteria: objective.criteria().to_vec(),
        observed: objective.observed(),
        awaiting_review: objective.awaiting_review().map(|r| r.report().clone()),
        reports,
        reviews,
    }))
}

/// `POST /v1/rooms/{room}/objectives/{objective}/reviews`: a human review of the report
/// version awaiting review; the domain checks R1, R2 and R6.
pub(crate) async fn record_review(
    State(api): State<ApiState>,
    caller: Caller,
    view: ObjectiveView,
    key: IdempotencyKey,
    StrictJson(review): StrictJson<ReviewBody>,
) -> Result<Json<Decision>, ApiError> {
    let objective = view.id;
    // R2 and R7 over REST: bound to the report version named, the evidence naming its
    // sources (the service refuses it as written otherwise).
    let submission = HumanReview {
        report_version: review.report_version,
        observed: ObservedRevisions {
            objective: review.observed.objective,
            control: review.observed.control,
        },
        verdicts: review
            .verdicts
            .into_iter()
            .map(|v| CriterionVerdict {
                criterion: v.criterion,
                verdict: v.verdict,
                evidence: v.evidence,
                sources: v.sources,
                quote: v.quote,
            })
            .collect(),
    }
    .bind(&view.room.state, objective)?;
    let outcome = api
        .rooms
        .submit(
            &caller.room,
            input_id(
                &api,
                &caller,
                &key,
                &format!("review/{objective}/{submission:?}"),
            )?,
            OperatorInput::RecordReview {
                by: caller.principal.clone(),
                objective,
                review: submission,
            },
        )
        .await?;
    decided(&outcome)
}

// ---------------------------------------------------------------------------------------------
// Late results
// ---------------------------------------------------------------------------------------------

/// `GET /v1/rooms/{room}/late-results`.
pub(crate) async fn late_results(
    caller: Caller,
    page: Page,
) -> Result<Json<ApiPage<LateResult>>, ApiError> {
    let items: Vec<LateResult> = caller
        .stored
        .state
        .held_results()
        .values()
        .map(|held| LateResult {
            op: held.op(),
            objective: held.objective(),
            task: held.task().clone(),
            contribution: held.contribution(),
        })
        .collect();
    Ok(page.of(&items))
}

/// `POST /v1/rooms/{room}/late-results/{operation}`.
pub(crate) async fn decide_late_result(
    State(api): State<ApiState>,
    caller: Caller,
    HeldOperation(op): HeldOperation,
    key: IdempotencyKey,
    StrictJson(LateBody { decision }): StrictJson<LateBody>,
) -> Result<Json<Decision>, ApiError> {
    let outcome = api
        .rooms
        .submit(
            &caller.room,
            input_id(&api, &caller, &key, &format!("late/{op}/{decision:?}"))?,
            OperatorInput::DecideLateResult {
                by: caller.principal.clone(),
                op,
                decision,
            },
        )
        .await?;
    decided(&outcome)
}

// ---------------------------------------------------------------------------------------------
// Budget
// ---------------------------------------------------------------------------------------------

/// `GET /v1/rooms/{room}/budget`: balances, overrun, cost by objective, role, principal and
/// model (from the settled operations; the model is the one their receipt names,
/// `(unnamed)` when none does), and the ledger entries (paginated).
pub(crate) async fn budget(
    State(api): State<ApiState>,
    caller: Caller,
    page: Page,
) -> Result<Json<Budget>, ApiError> {
    let breakdown = api.rooms.budget(&caller.room).await?;
    let ledger = caller.stored.state.ledger();
    let Json(page) = page.of(&breakdown.entries);
    // B8: the pool's gauge, read now (every Room drawing on it moves it).
    let pool = api
        .rooms
        .room_pool(&caller.room)
        .await?
        .map(|pool| PoolGauge {
            id: pool.id.to_string(),
            balances: pool.ledger.balances(),
            overrun: pool.ledger.overrun(),
        });
    Ok(Json(Budget {
        pool,
        balances: ledger.balances(),
        overrun: ledger.overrun(),
        spent_micros_by_objective: breakdown.by_objective,
        spent_micros_by_role: breakdown.by_role,
        spent_micros_by_principal: breakdown.by_principal,
        spent_micros_by_model: breakdown.by_model,
        entries: page.items,
        next_cursor: page.next_cursor,
    }))
}

/// `POST /v1/rooms/{room}/budget/raise`.
pub(crate) async fn raise_limit(
    State(api): State<ApiState>,
    caller: Caller,
    key: IdempotencyKey,
    StrictJson(RaiseBody { amount_micros }): StrictJson<RaiseBody>,
) -> Result<Json<Decision>, ApiError> {
    if amount_micros <= 0 {
        return Err(ApiError::InvalidBody(format!(
            "amount_micros must be positive, not {amount_micros}"
        )));
    }
    let outcome = api
        .rooms
        .submit(
            &caller.room,
            input_id(&api, &caller, &key, &format!("raise/{amount_micros}"))?,
            OperatorInput::RaiseLimit {
                by: caller.principal.clone(),
                amount: UsdMicros::new(amount_micros),
            },
        )
        .await?;
    decided(&outcome)
}

/// `POST /v1/rooms/{room}/budget/acknowledge`.
pub(crate) async fn acknowledge_overrun(
    State(api): State<ApiState>,
    caller: Caller,
    key: IdempotencyKey,
    StrictJsonOrEmpty(AcknowledgeBody {}): StrictJsonOrEmpty<AcknowledgeBody>,
) -> Result<Json<Decision>, ApiError> {
    let outcome = api
        .rooms
        .submit(
            &caller.room,
            input_id(&api, &caller, &key, "acknowledge")?,
            OperatorInput::AcknowledgeOverrun {
                by: caller.principal.clone(),
            },
        )
        .await?;
    decided(&outcome)
}

// ---------------------------------------------------------------------------------------------
// Operations
// ---------------------------------------------------------------------------------------------

/// `GET /v1/rooms/{room}/operations`: the Room's uncertain and dead-lettered operations.
pub(crate) async fn operations(
    State(api): State<ApiState>,
    caller: Caller,
    page: Page,
) -> Result<Json<ApiPage<OperationView>>, ApiError> {
    let mut items = Vec::new();
    for status in [OperationStatus::Uncertain, OperationStatus::DeadLetter] {
        for record in api
            .rooms
            .room_operations(&caller.room, Some(status))
            .await?
        {
            items.push(OperationView {
                op: record.op().to_string(),
                status: record.status.as_str().to_owned(),
                role: record.request.role.as_str().to_owned(),
                principal: record.request.principal.clone(),
                objective: record.request.objective.map(|o| o.to_string()),
                reservation_micros: record.request.reservation.micros(),
                recovery_attempts: record.recovery_attempts,
                dead_letter_reason: record.dead_letter_reason.clone(),
                cause: caller
                    .stored
                    .state
                    .operation(record.op())
                    .and_then(|o| o.cause())
                    .map(|c| c.cause.clone()),
            });
        }
    }
    Ok(page.of(&items))
}

/// `POST /v1/rooms/{room}/operations/{operation}/resolve`: the caller is the operator on
/// record; the Room applies the resolution at its coordinator's next recovery (D2).
pub(crate) async fn resolve_operation(
    State(api): State<ApiState>,
    caller: Caller,
    // An operation of another Room is not found, before the body is read.
    RoomOperation(record): RoomOperation,
    StrictJson(ResolveBody { outcome, reason }): StrictJson<ResolveBody>,
) -> Result<Json<Resolved>, ApiError> {
    let op = record.op();
    let unknown = || ApiError::NotFound(format!("no operation {op} in this room"));
    if reason.trim().is_empty() {
        return Err(ApiError::InvalidBody(
            "reason must say why (what was checked)".to_owned(),
        ));
    }
    let resolution = Resolution {
        outcome: match outcome {
            ResolvedAs::Succeeded => ResolutionOutcome::Succeeded,
            ResolvedAs::Failed => ResolutionOutcome::Failed,
        },
        operator: caller.principal.to_string(),
        reason,
        at: api.rooms.now(),
    };
    match api.rooms.resolve(&caller.room, op, &resolution).await? {
        None => return Err(unknown()),
        Some(ResolveOutcome::Recorded) => {}
        Some(ResolveOutcome::NotResolvable(status)) => {
            return Err(ApiError::WrongState(format!(
                "operation {op} is {}, not uncertain or dead-lettered; nothing was changed",
                status.as_str()
            )));
        }
    }
    Ok(Json(Resolved {
        op: op.to_string(),
        resolution: ResolutionView {
            outcome,
            operator: resolution.operator,
            reason: resolution.reason,
            at: resolution.at,
        },
        applied: "at the next recovery of the room's coordinator".to_owned(),
    }))
}

// ---------------------------------------------------------------------------------------------
// Planning messages
// ---------------------------------------------------------------------------------------------

/// `POST /v1/rooms/{room}/planning`: one A2E message in the caller's Room, its reply out
/// (unknown fields tolerated, as the A2E contract says).
pub(crate) async fn planning(
    State(api): State<ApiState>,
    caller: Caller,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    // No randomness, no session: 503 before the message is read, nothing stored.
    // The session acts as the token's principal: an agent moves its own tasks on an
    // objective board by the rules (T2, T3, O7), never another's.
    let session = Session::new(api.planning.clone(), caller.room.clone())?
        .acting_as(caller.principal.clone());
    let message = match crate::body::read_message(&headers, body).await {
        Ok(message) => message,
        Err(ApiError::MessageTooLarge { bytes, req_id, .. }) => {
            return Ok(json_line(
                StatusCode::PAYLOAD_TOO_LARGE,
                crate::body::too_large_line(&session, bytes, req_id.as_deref()),
            ));
        }
        Err(error) => return Err(error),
    };
    match tokio::spawn(async move { session.step(&message).await }).await {
        Ok(Step::Reply(line)) => Ok(json_line(StatusCode::OK, line)),
        Ok(Step::Silent | Step::Close) => Ok(StatusCode::NO_CONTENT.into_response()),
        Err(error) => Err(ApiError::internal(error)),
    }
}

fn json_line(status: StatusCode, line: String) -> Response {
    let mut response = (status, line).into_response();
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if status == StatusCode::PAYLOAD_TOO_LARGE {
        crate::error::close_connection(&mut response);
    }
    response
}
