//! Accepting persisted events: T1 (resolved by id, authored by a current member), O6
//! (explicit references need no reasoner), O9 (only the owner's messages create objectives),
//! O12 (a wait acknowledgement stalls only its own task), O13 (receipts for terminal
//! objectives are consumed without inference), O14 and R6 (owner corrections).

use super::calls::Target;
use super::{Audience, Ctx, InputError};
use crate::event::{Event, EventBody};
use crate::ids::{EventId, ObjectiveId, PrincipalId, TaskIdentity};
use crate::objective::{Criterion, ObjectiveStatus};
use crate::plan::{PlanTrigger, TaskState};
use crate::room::{Permission, Role};
use crate::rules::Rule;

impl Ctx<'_, '_> {
    /// T1: accepts a persisted event by id. Its author is the authenticated principal.
    pub(super) fn accept_event(&mut self, event: Event) -> Result<(), InputError> {
        if event.room != self.state.room {
            return Err(InputError::WrongRoom {
                event: event.id,
                event_room: event.room,
                room: self.state.room.clone(),
            });
        }
        // Accepted once per Room: the store refuses a second commit of the same event (T1).
        self.event = Some(event.id);
        if !self.state.members.is_member(&event.author) {
            self.reject(
                None,
                Rule::T1,
                format!(
                    "{}: {} is not a member of this room",
                    event.id, event.author
                ),
            );
            return Ok(());
        }
        if !self.authorized(&event.author, Permission::EventPost, None) {
            return Ok(());
        }
        // A blank message asks the reasoner nothing: decided without a paid call. The service
        // refuses one before it is stored; this keeps one stored by an older release closed.
        if let Err(error) = event.body.check() {
            self.reject(
                None,
                Rule::O9,
                format!("{}: {error}; no reasoner call", event.id),
            );
            return Ok(());
        }
        // The rules of the event's kind, as the Room is now (the service checked them before
        // storing it; the Room may have moved since).
        if let Err(refusal) =
            self.state
                .admits_event_with(&event.author, &event.body, self.env.archive)
        {
            let objective = event
                .body
                .objective()
                .filter(|id| self.state.objective(*id).is_some());
            self.reject(
                objective,
                refusal.rule(),
                format!("{}: {refusal}", event.id),
            );
            return Ok(());
        }
        let author = event.author;
        match event.body {
            EventBody::OwnerMessage { text } => self.owner_message(event.id, &author, text),
            EventBody::OwnerCorrection {
                objective,
                text,
                criteria,
            } => self.owner_correction(event.id, objective, text, criteria),
            EventBody::ExplicitReference { objective, task } => {
                self.explicit_reference(event.id, &author, objective, task)
            }
            EventBody::InternalReceipt { objective, note } => {
                self.internal_receipt(event.id, objective, note)
            }
            EventBody::WaitAck {
                objective,
                task,
                reason,
            } => self.wait_ack(objective, &task, reason),
        }
        Ok(())
    }

    /// O9: only a message authored by the owner can create an objective; the reasoner decides
    /// whether it is an ordinary answer (O6) or a plan.
    fn owner_message(&mut self, event: EventId, author: &PrincipalId, text: String) {
        if !self.state.members.has(author, Role::Owner) {
            self.reject(
                None,
                Rule::O9,
                format!("{event}: only the owner's messages can create objectives; {author} is not the owner"),
            );
            return;
        }
        self.accept(
            None,
            None,
            format!("{event}: owner message accepted; asking the reasoner"),
        );
        self.start_interpretation(
            Target::Intake(event),
            PlanTrigger::OwnerMessage { event },
            text,
        );
    }

    /// O14 and R6: an owner correction enters the history, resets the repair cycle, fences
    /// the review in flight, and asks for a new plan. Who may correct what, and with which
    /// criteria, is [`RoomState::admits_event`](crate::state::RoomState::admits_event)'s to say (checked before).
    fn owner_correction(
        &mut self,
        event: EventId,
        objective: ObjectiveId,
        text: String,
        criteria: Option<Vec<Criterion>>,
    ) {
        let Ok(idx) = self.objective_index(objective) else {
            return;
        };
        let o = self.objective_mut(idx);
        o.corrections.push(event);
        o.revision += 1;
        if let Some(c) = criteria {
            o.criteria = c;
        }
        self.reset_repair_cycle(idx, event);
        self.replan(idx, PlanTrigger::OwnerCorrection { event }, text);
    }

    /// O6: an explicit reference is answered from the engine's state, without a reasoner call.
    fn explicit_reference(
        &mut self,
        event: EventId,
        author: &PrincipalId,
        objective: ObjectiveId,
        task: Option<TaskIdentity>,
    ) {
        let Some(idx) = self.objective_index(objective).ok() else {
            // A closed objective is answered from its record.
            let Some(closed) = self.env.archive.record(objective) else {
                self.reject(None, Rule::O6, format!("{event}: no objective {objective}"));
                return;
            };
            let text = format!(
                "objective {objective} is {} at revision {}{}",
                closed.status(),
                closed.objective.revision,
                task.map_or_else(String::new, |t| format!("; task {t} is in its record"))
            );
            self.accept(
                Some(objective),
                Some(Rule::O6),
                format!("{event}: explicit reference answered without a reasoner call"),
            );
            self.notify(Audience::Principal(author.clone()), Some(objective), text);
            return;
        };
        let o = self.objective(idx);
        let text = match &task {
            None => format!(
                "objective {objective} is {} at revision {}, plan v{}",
                o.status,
                o.revision,
                o.current_plan().map_or(0, |p| p.number)
            ),
            Some(identity) => {
                let Some((plan, t)) = o
                    .current_plan()
                    .and_then(|p| p.task(identity).map(|t| (p, t)))
                else {
                    self.reject(
                        Some(objective),
                        Rule::O6,
                        format!("{event}: no task {identity} in the current plan"),
                    );
                    return;
                };
                format!(
                    "task {identity} ({}) is {}",
                    t.spec.title,
                    plan.column_of(t).as_str()
                )
            }
        };
        self.accept(
            Some(objective),
            Some(Rule::O6),
            format!("{event}: explicit reference answered without a reasoner call"),
        );
        self.notify(Audience::Principal(author.clone()), Some(objective), text);
    }

    /// O9 and O13: an internal receipt never creates an objective; for a terminal objective it
    /// is consumed without inference; otherwise the reasoner may take it into account.
    fn internal_receipt(&mut self, event: EventId, objective: Option<ObjectiveId>, note: String) {
        // A receipt names an objective of this Room and comes from an assignee of its tasks
        // (`RoomState::admits_event`, checked before).
        let Some(idx) = objective.and_then(|id| self.objective_index(id).ok()) else {
            if let Some((id, closed)) = objective
                .and_then(|id| self.env.archive.record(id))
                .map(|r| (r.id(), r.status()))
            {
                self.accept(
                    Some(id),
                    Some(Rule::O13),
                    format!(
                        "{event}: receipt for a {closed} objective consumed without a reasoner call"
                    ),
                );
            }
            return;
        };
        let o = self.objective_mut(idx);
        o.receipts.push(event);
        let (id, status) = (o.id, o.status);
        if status.is_terminal() {
            self.accept(
                Some(id),
                Some(Rule::O13),
                format!(
                    "{event}: receipt for a {status} objective consumed without a reasoner call"
                ),
            );
            return;
        }
        if status == ObjectiveStatus::Running
            && self.objective(idx).interpretation.is_none()
            && !self.ignores_receipts()
        {
            self.accept(
                Some(id),
                None,
                format!("{event}: receipt recorded; asking the reasoner"),
            );
            self.start_interpretation(
                Target::Objective(idx),
                PlanTrigger::InternalReceipt { event },
                note,
            );
        } else {
            self.accept(Some(id), None, format!("{event}: receipt recorded"));
        }
    }

    /// O12: the task waits on something outside; other ready work and a ready review still
    /// go ahead. Only the task's assignee may say so, of a running task
    /// ([`RoomState::admits_event`](crate::state::RoomState::admits_event), checked before).
    fn wait_ack(&mut self, objective: ObjectiveId, task: &TaskIdentity, reason: String) {
        let Ok(idx) = self.objective_index(objective) else {
            return;
        };
        let Some(t) = self.current_task_mut(idx, task) else {
            return;
        };
        let Some(op) = t.running_op() else {
            return;
        };
        t.state = TaskState::WaitingOutside { op, reason };
        self.accept(
            Some(objective),
            Some(Rule::O12),
            format!("{task} waits outside; other ready work continues"),
        );
        self.advance(idx);
    }
}
