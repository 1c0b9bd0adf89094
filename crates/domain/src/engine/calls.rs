//! Reservations, dispatch, settlement and uncertainty: every provider call starts here with a
//! reservation (B1, B2, B5 through the ledger), is settled here (B3), and is marked uncertain
//! or reconciled here (D2). Authorization is checked again before dispatch (T3).

use super::{
    Audience, CallBrief, CallFailure, CallRequest, CallResult, Charge, Ctx, Effect, FailureKind,
    InputError, Reconciliation, SpecialistResult, TaskBrief, TaskProgress,
};
use crate::ids::{EventId, ObjectiveId, OperationId, PoolId, PrincipalId};
use crate::ledger::LedgerError;
use crate::money::UsdMicros;
use crate::objective::{ObjectiveStatus, ObservedRevisions};
use crate::plan::{Task, TaskState};
use crate::policy::ReviewSource;
use crate::room::Role;
use crate::rules::Rule;
use crate::state::{CallCause, CallRole, Operation, OperationState, Purpose};

/// Where an interpretation lives: an owner message without objective yet, or an objective.
#[derive(Debug, Clone, Copy)]
pub(super) enum Target {
    Intake(EventId),
    Objective(usize),
}

impl Ctx<'_, '_> {
    /// Reserves a call and emits it (B1). A refused reservation (B2, B5) is logged, the
    /// operators are told, and `None` is returned: no reservation, no call.
    pub(super) fn reserve_call(
        &mut self,
        role: CallRole,
        principal: Option<PrincipalId>,
        objective: Option<ObjectiveId>,
        observed: ObservedRevisions,
        purpose: Purpose,
        brief: CallBrief,
    ) -> Option<OperationId> {
        let amount = self.state.quotes.for_role(role);
        // B6: the reservation must be a true upper bound of what the host's model may cost.
        if let Some(served) = self.env.served.and_then(|s| s.for_role(role))
            && amount < served.quote
        {
            let message = format!(
                "{} call not admitted: the Room's {} quote {amount} is below what model `{}` \
                 may cost ({}); an operator updates the Room's quotes to what this host serves \
                 (`agentroom budget quotes`, POST /v1/rooms/{}/quotes)",
                role.as_str(),
                role.as_str(),
                served.model,
                served.quote,
                self.state.room
            );
            self.reject(objective, Rule::B6, message.clone());
            self.notify(Audience::Operators, objective, message);
            return None;
        }
        let op = OperationId::from_uuid(self.env.ids.next_uuid());
        // B8: a Room that draws on a pool admits a reservation only when the pool can hold
        // it too; tried on a copy, kept only when the Room's ledger admits it as well.
        match self.pool_trial(op, amount) {
            Ok(()) => {}
            Err(refusal) => {
                let message = format!("{} call not admitted: {refusal}", role.as_str());
                self.reject(objective, Rule::B8, message.clone());
                self.notify(Audience::Operators, objective, message);
                return None;
            }
        }
        if let Err(err) = self.state.ledger.reserve(op, amount) {
            let rule = match err {
                LedgerError::AdmissionsStopped(_) => Rule::B5,
                _ => Rule::B2,
            };
            let message = format!("{} call not admitted: {err}", role.as_str());
            self.reject(objective, rule, message.clone());
            self.notify(Audience::Operators, objective, message);
            return None;
        }
        self.state.operations.insert(
            op,
            Operation {
                id: op,
                role,
                principal: principal.clone(),
                objective,
                purpose,
                observed,
                reservation: amount,
                charged: None,
                state: OperationState::InFlight,
                cause: None,
                fenced: false,
            },
        );
        self.accept(
            objective,
            Some(Rule::B1),
            format!("reserved {amount} for {} call {op}", role.as_str()),
        );
        self.effects.push(Effect::ReserveAndCall(CallRequest {
            op,
            role,
            principal,
            objective,
            observed,
            reservation: amount,
            brief,
        }));
        Some(op)
    }

    /// B8: whether the pool the Room draws on can hold `amount` for `op` too (always, when
    /// it draws on none); why not, when it cannot or was not read. The pool is taken as the
    /// store will have it when this reservation's entry is applied: what the host read,
    /// moved by every entry this decision appended so far (its settlements and releases free
    /// it, its earlier reservations hold it), by the store's own rule (`pool::follow`).
    fn pool_trial(&self, op: OperationId, amount: UsdMicros) -> Result<(), String> {
        let Some(id) = &self.state.pool else {
            return Ok(());
        };
        let Some(pool) = self.env.pool else {
            return Err(format!(
                "the Room draws on pool {id}, which the host could not read"
            ));
        };
        let mut trial = pool.clone();
        crate::pool::follow(&mut trial, self.state.ledger.journal())
            .map_err(|err| format!("pool {id}: {err}"))?;
        match trial.reserve(op, amount) {
            Ok(()) => Ok(()),
            Err(LedgerError::AdmissionsStopped(overrun)) => Err(format!(
                "pool {id} stopped admissions after an overrun ({overrun}); the host's \
                 administrator raises its limit or acknowledges it (`agentroom pool raise|acknowledge`)"
            )),
            Err(err) => Err(format!("pool {id}: {err}")),
        }
    }

    /// B8: the host's administrator makes the Room draw on `pool` (or on none). Refused while
    /// calls are open, so that each reservation a pool holds is settled under that pool.
    pub(super) fn attach_pool(&mut self, pool: Option<PoolId>) {
        if self.state.pool == pool {
            let message = match &pool {
                Some(id) => format!("the Room already draws on pool {id}"),
                None => "the Room draws on no pool".to_owned(),
            };
            self.reject(None, Rule::B8, message);
            return;
        }
        let open = self.state.operations.len();
        if open > 0 {
            self.reject(
                None,
                Rule::B8,
                format!("the Room has {open} open call(s); its pool changes once they are settled"),
            );
            return;
        }
        let message = match (&self.state.pool, &pool) {
            (_, Some(id)) => format!("the Room draws on pool {id} from now on"),
            (Some(old), None) => format!("the Room no longer draws on pool {old}"),
            (None, None) => "the Room draws on no pool".to_owned(),
        };
        self.state.pool = pool;
        // Nothing is dispatched here: the host's administrator decides this from a process
        // that runs no agents; a host's next pass resumes waiting work (`PoolChanged`).
        self.accept(None, Some(Rule::B8), message);
    }

    /// Moves a settled or released operation out of the live state into the decision's
    /// closed operations: the live state holds open work only, and the operation rows and
    /// ledger entries are the record of closed work.
    fn close_operation(&mut self, op: OperationId, state: OperationState, charged: UsdMicros) {
        if let Some(mut closed) = self.state.operations.remove(&op) {
            closed.state = state;
            closed.charged = Some(charged);
            self.closed.push(closed);
        }
    }

    /// Looks up an operation that still holds its reservation.
    pub(super) fn open_operation(&self, op: OperationId) -> Result<Operation, InputError> {
        let operation = self
            .state
            .operations
            .get(&op)
            .filter(|operation| operation.state.is_open())
            .ok_or(InputError::NotOpen(op))?;
        Ok(operation.clone())
    }

    /// Settles `op` (B3): the actual usage is charged and the rest released; a response
    /// without usage is charged its whole reservation, never zero. A usage the ledger cannot
    /// take (above [`UsdMicros::MAX_CHARGE`], or beyond what its balances hold) is decided
    /// once: the whole reservation is charged, an overrun stops admissions for an operator
    /// (B5), the operation closes, and the caller is told not to use the result as it is.
    fn settle(&mut self, op: &Operation, charge: Charge) -> Settlement {
        let amount = match charge {
            Charge::Actual(actual) if !actual.is_negative() => actual,
            Charge::Actual(actual) => {
                self.reject(
                    op.objective,
                    Rule::B3,
                    format!(
                        "negative usage {actual} of {}: charged the whole reservation",
                        op.id
                    ),
                );
                op.reservation
            }
            Charge::NoUsage => op.reservation,
        };
        let settled = if amount > UsdMicros::MAX_CHARGE {
            Err(format!(
                "usage {amount} is above the largest charge a call may report ({})",
                UsdMicros::MAX_CHARGE
            ))
        } else {
            self.state
                .ledger
                .settle(op.id, amount)
                .map_err(|err| err.to_string())
        };
        match settled {
            Ok(released) => {
                self.accept(
                    op.objective,
                    Some(Rule::B3),
                    format!("{} charged {amount}, released {released}", op.id),
                );
                self.close_operation(op.id, OperationState::Settled, amount);
                if let Some(overrun) = self.state.ledger.overrun()
                    && (amount > op.reservation
                        || self.state.ledger.balances().spent > self.state.ledger.balances().limit)
                {
                    let message = format!("admissions stopped: {overrun}");
                    self.reject(op.objective, Rule::B5, message.clone());
                    self.notify(Audience::Operators, op.objective, message);
                }
                Settlement::Charged
            }
            Err(why) => self.settlement_refused(op, amount, &why),
        }
    }

    /// B3, B5: the ledger cannot take `reported`. Decided once: the whole reservation is
    /// charged, the operation closes (nothing redelivers its receipt), and an overrun stops
    /// admissions until an operator raises the limit or acknowledges it.
    fn settlement_refused(&mut self, op: &Operation, reported: UsdMicros, why: &str) -> Settlement {
        if let Err(err) = self.state.ledger.settle_refused(op.id, reported) {
            // Only an operation without a reservation gets here, and `open_operation` found
            // one: say so rather than leave the operation open.
            self.reject(
                op.objective,
                Rule::B3,
                format!("settling {}: {why}; and the reservation: {err}", op.id),
            );
        } else {
            self.reject(
                op.objective,
                Rule::B3,
                format!(
                    "settling {}: {why}: charged its whole reservation of {} instead; its result is not used as it is",
                    op.id, op.reservation
                ),
            );
        }
        self.close_operation(op.id, OperationState::Settled, op.reservation);
        let message = match self.state.ledger.overrun() {
            Some(overrun) => format!("admissions stopped: {overrun}"),
            None => format!("admissions stopped: {} reported usage of {reported}", op.id),
        };
        self.reject(op.objective, Rule::B5, message.clone());
        self.notify(Audience::Operators, op.objective, message);
        Settlement::Refused
    }

    /// A call returned a result: settle it, then hand the result to its port's handler. A
    /// result whose settlement was refused is not used as it is: a contribution is held for
    /// an owner's or operator's readmission (D4), a plan or review is given back (its purpose
    /// is taken up again once an operator has cleared the overrun, B5).
    pub(super) fn call_returned(
        &mut self,
        op: OperationId,
        charge: Charge,
        result: CallResult,
    ) -> Result<(), InputError> {
        let operation = self.open_operation(op)?;
        if operation.role != result.role() {
            return Err(InputError::WrongPort {
                op,
                expected: operation.role.as_str(),
                got: result.role().as_str(),
            });
        }
        match self.settle(&operation, charge) {
            Settlement::Charged => self.route_result(&operation, result),
            Settlement::Refused => self.refused_result(&operation, result),
        }
        Ok(())
    }

    fn refused_result(&mut self, operation: &Operation, result: CallResult) {
        match result {
            CallResult::Specialist(result @ SpecialistResult::Contribution(_)) => {
                self.specialist_returned_held(operation, result);
            }
            CallResult::Specialist(SpecialistResult::Failure { .. })
            | CallResult::Reasoner(_)
            | CallResult::Reviewer(_) => {
                self.call_given_back(operation);
            }
        }
    }

    fn route_result(&mut self, operation: &Operation, result: CallResult) {
        match result {
            CallResult::Reasoner(result) => self.reasoner_returned(operation, result),
            CallResult::Specialist(result) => self.specialist_returned(operation, result),
            CallResult::Reviewer(result) => self.reviewer_returned(operation, result),
        }
    }

    /// A call ended without a result: charged, and its purpose is left open again (after an
    /// abort) or treated as failed.
    pub(super) fn call_settled(
        &mut self,
        op: OperationId,
        charge: Charge,
    ) -> Result<(), InputError> {
        let operation = self.open_operation(op)?;
        match self.settle(&operation, charge) {
            Settlement::Charged => {
                self.call_ended_without_result(&operation, "the call ended without a result");
            }
            Settlement::Refused => self.call_given_back(&operation),
        }
        Ok(())
    }

    /// A call whose outcome is not used: its purpose is open again, as after an abort (D3),
    /// consuming no attempt (O8, O11, R4).
    fn call_given_back(&mut self, operation: &Operation) {
        match &operation.purpose {
            Purpose::Execute { task } => self.release_task(operation, task.clone(), None),
            Purpose::Interpret { .. } => self.interpretation_aborted(operation),
            Purpose::Review { .. } => self.review_aborted(operation),
        }
    }

    fn call_ended_without_result(&mut self, operation: &Operation, why: &str) {
        let aborted = operation.state == OperationState::CancelRequested;
        match &operation.purpose {
            Purpose::Execute { task } => {
                let failure = (!aborted).then(|| why.to_owned());
                self.release_task(operation, task.clone(), failure);
            }
            Purpose::Interpret { .. } => {
                if aborted {
                    self.interpretation_aborted(operation);
                } else {
                    self.interpretation_failed_for(
                        operation,
                        Rule::O11,
                        format!("the reasoner call: {why}"),
                    );
                }
            }
            Purpose::Review { .. } => {
                if aborted {
                    self.review_aborted(operation);
                } else {
                    self.review_failed_for(operation, &format!("the review call: {why}"));
                }
            }
        }
    }

    /// The call has not reached its provider yet: it is retried with backoff under the same
    /// id, its reservation held; the Room shows that it waits, and why. Recorded once per
    /// call; the outcome that ends it clears it.
    pub(super) fn call_waiting(
        &mut self,
        op: OperationId,
        cause: String,
    ) -> Result<(), InputError> {
        let operation = self.open_operation(op)?;
        if operation.state != OperationState::InFlight || operation.cause.is_some() {
            return Err(InputError::NotOpen(op));
        }
        if let Some(stored) = self.state.operations.get_mut(&op) {
            stored.cause = Some(CallCause {
                cause: cause.clone(),
                since: self.env.now,
            });
        }
        let waiting = format!(
            "{} call {op} is waiting for the provider: {cause}; it is retried with backoff under \
             the same id",
            operation.role.as_str(),
        );
        let held = format!(
            "{op} keeps its reservation of {} while it waits",
            operation.reservation
        );
        // The amount goes in an entry of its budget rule (only `budget.read` reads money).
        self.accept(operation.objective, None, waiting);
        self.accept(operation.objective, Some(Rule::B3), held);
        // Operators read money: their notification says it all at once.
        self.notify(
            Audience::Operators,
            operation.objective,
            format!(
                "{} call {op} is waiting for the provider: {cause}; it is retried with backoff \
                 under the same id, its reservation of {} held",
                operation.role.as_str(),
                operation.reservation
            ),
        );
        Ok(())
    }

    /// The call never ran: settled at zero (nothing ran, so nothing is charged, B3), with its
    /// cause in the log. A provider that failed (unreachable for the whole window, or refusing
    /// the request) consumes no interpretation (O11) and counts as no replan (O8): the work is
    /// open again and its objective (or the pending message) stops until a person resumes it.
    /// A call refused at the sink (T3) fails like any call without a result.
    pub(super) fn call_failed(
        &mut self,
        op: OperationId,
        failure: CallFailure,
    ) -> Result<(), InputError> {
        let operation = self.open_operation(op)?;
        if operation.state == OperationState::Uncertain {
            return Err(InputError::AlreadyUncertain(op));
        }
        // Zero always fits the ledger: nothing to refuse.
        let _ = self.settle(&operation, Charge::Actual(UsdMicros::ZERO));
        let role = operation.role.as_str();
        let cause = &failure.cause;
        if operation.state == OperationState::CancelRequested {
            self.accept(
                operation.objective,
                Some(Rule::D3),
                format!("{role} call {op} was not sent after its abort: {cause}"),
            );
            self.call_ended_without_result(&operation, cause);
            return Ok(());
        }
        match failure.kind {
            FailureKind::Unauthorized => {
                self.reject(
                    operation.objective,
                    Rule::T3,
                    format!("{role} call {op} was not sent: {cause}"),
                );
                self.call_ended_without_result(&operation, &format!("not sent: {cause}"));
            }
            FailureKind::Unreachable => {
                let why = format!("the {role} call {op} never reached its provider: {cause}");
                self.provider_failed(&operation, why);
            }
            FailureKind::Refused => {
                let why = format!("the {role} call {op} was refused before it ran: {cause}");
                self.provider_failed(&operation, why);
            }
        }
        Ok(())
    }

    /// A provider failed `operation` (it never ran): its work is open again, no attempt is
    /// counted (O8, O11), and its objective stops for attention (resumable), or the pending
    /// message it interprets waits to be retried.
    fn provider_failed(&mut self, operation: &Operation, why: String) {
        match &operation.purpose {
            Purpose::Execute { task } => {
                let Some(idx) = operation
                    .objective
                    .and_then(|id| self.objective_index(id).ok())
                else {
                    return;
                };
                if let Some(t) = self.current_task_mut(idx, task)
                    && t.running_op() == Some(operation.id)
                {
                    t.state = TaskState::Pending;
                }
                self.stop_for_provider(idx, why);
            }
            Purpose::Interpret { .. } => {
                let Some(target) = self.interpretation_target(operation) else {
                    return;
                };
                if let Some(i) = self.interpretation_mut(target) {
                    i.op = None;
                    i.attempts = i.attempts.saturating_sub(1);
                }
                match target {
                    Target::Objective(idx) => self.stop_for_provider(idx, why),
                    Target::Intake(event) => self.hold_message(event, why),
                }
            }
            Purpose::Review { .. } => {
                let Some(idx) = self.awaited_review(operation) else {
                    return;
                };
                if let Some(request) = self.objective_mut(idx).awaiting_review.as_mut() {
                    request.op = None;
                }
                self.stop_for_provider(idx, why);
            }
        }
    }

    /// A pending owner message whose interpretation a provider failed waits for a person:
    /// nothing more is issued for it until it is retried (`Input::RetryMessage`).
    fn hold_message(&mut self, event: EventId, why: String) {
        let Some(i) = self.state.intake.get_mut(&event) else {
            return;
        };
        i.held = Some(why.clone());
        let excerpt = clip(&i.text, 80);
        let message = format!(
            "the owner's message {event} (\"{excerpt}\") waits for attention: {why}; retry it \
             once the provider is back (`agentroom message retry {event}`)"
        );
        self.accept(None, Some(Rule::D3), message.clone());
        self.notify(Audience::Owners, None, message.clone());
        self.notify(Audience::Operators, None, message);
    }

    /// Puts a task whose call ended without a usable result back to pending, or marks it
    /// failed and asks for repair.
    fn release_task(
        &mut self,
        operation: &Operation,
        task: crate::ids::TaskIdentity,
        failure: Option<String>,
    ) {
        let Some(idx) = operation
            .objective
            .and_then(|id| self.objective_index(id).ok())
        else {
            return;
        };
        let Some(state) = self.current_task_mut(idx, &task).map(|t| &mut t.state) else {
            return;
        };
        if !matches!(state, TaskState::Dispatched { op } | TaskState::WaitingOutside { op, .. } | TaskState::Uncertain { op } if *op == operation.id)
        {
            return;
        }
        match failure {
            None => {
                *state = TaskState::Pending;
                self.advance(idx);
            }
            Some(reason) => self.task_failed(idx, task, reason),
        }
    }

    /// D2: no receipt — the outcome is unknown, the whole reservation stays held, and the
    /// call is never replayed.
    pub(super) fn call_uncertain(
        &mut self,
        op: OperationId,
        cause: Option<String>,
    ) -> Result<(), InputError> {
        let operation = self.open_operation(op)?;
        if operation.state == OperationState::Uncertain {
            return Err(InputError::AlreadyUncertain(op));
        }
        if let Err(err) = self.state.ledger.mark_uncertain(op) {
            self.reject(operation.objective, Rule::D2, format!("{op}: {err}"));
            return Ok(());
        }
        let since = self.env.now;
        if let Some(stored) = self.state.operations.get_mut(&op) {
            stored.state = OperationState::Uncertain;
            stored.cause = cause.clone().map(|cause| CallCause { cause, since });
        }
        if let Purpose::Execute { task } = &operation.purpose
            && let Some(idx) = operation
                .objective
                .and_then(|id| self.objective_index(id).ok())
            && let Some(t) = self.current_task_mut(idx, task)
            && t.running_op() == Some(op)
        {
            t.state = TaskState::Uncertain { op };
        }
        let why = cause.map_or_else(String::new, |cause| format!(" ({cause})"));
        let role = operation.role.as_str();
        let uncertain = format!(
            "{role} call {op} is uncertain{why}: never replayed; an operator resolves it once \
             the provider's own record shows what it did (`agentroom operations resolve`)"
        );
        let held = format!(
            "{op} keeps its whole reservation of {} while uncertain",
            operation.reservation
        );
        // The amount goes in an entry of its budget rule (only `budget.read` reads money).
        self.accept(operation.objective, Some(Rule::D2), uncertain);
        self.accept(operation.objective, Some(Rule::B3), held);
        // Operators read money: their notification says it all at once.
        self.notify(
            Audience::Operators,
            operation.objective,
            format!(
                "{role} call {op} is uncertain{why}: reservation of {} held, never replayed; an \
                 operator resolves it once the provider's own record shows what it did \
                 (`agentroom operations resolve`)",
                operation.reservation
            ),
        );
        Ok(())
    }

    /// D2: a reconciler confirmed an uncertain call's outcome from durable evidence; only now
    /// is it charged or released.
    pub(super) fn reconciled(
        &mut self,
        op: OperationId,
        outcome: Reconciliation,
    ) -> Result<(), InputError> {
        let operation = self.open_operation(op)?;
        if operation.state != OperationState::Uncertain {
            self.reject(
                operation.objective,
                Rule::D2,
                format!("{op} is not uncertain; only uncertain calls are reconciled"),
            );
            return Ok(());
        }
        match outcome {
            Reconciliation::NotExecuted => {
                match self.state.ledger.release(op) {
                    Ok(amount) => {
                        self.accept(
                            operation.objective,
                            Some(Rule::D2),
                            format!("{op} confirmed never executed"),
                        );
                        self.accept(
                            operation.objective,
                            Some(Rule::B3),
                            format!("{op} released {amount}: it never ran"),
                        );
                    }
                    Err(err) => {
                        self.reject(operation.objective, Rule::D2, format!("{op}: {err}"));
                        return Ok(());
                    }
                }
                self.close_operation(op, OperationState::Released, UsdMicros::ZERO);
                // Known never to have run: the work is open again, like an abort.
                let mut as_aborted = operation.clone();
                as_aborted.state = OperationState::CancelRequested;
                self.call_ended_without_result(&as_aborted, "confirmed never executed");
            }
            Reconciliation::Executed { charge, result } => {
                if operation.role != result.role() {
                    return Err(InputError::WrongPort {
                        op,
                        expected: operation.role.as_str(),
                        got: result.role().as_str(),
                    });
                }
                self.accept(
                    operation.objective,
                    Some(Rule::D2),
                    format!("{op} confirmed executed by the reconciler"),
                );
                match self.settle(&operation, charge) {
                    Settlement::Charged => self.route_result(&operation, result),
                    Settlement::Refused => self.refused_result(&operation, result),
                }
            }
            Reconciliation::ExecutedWithoutResult { charge } => {
                self.accept(
                    operation.objective,
                    Some(Rule::D2),
                    format!("{op} confirmed executed, result lost"),
                );
                if self.settle(&operation, charge) == Settlement::Refused {
                    self.call_given_back(&operation);
                    return Ok(());
                }
                // D4: a call a control change (or T6, a membership change) aborted that ran
                // without a result leaves its work open, like a discarded late result;
                // otherwise the call failed.
                let aborted = operation.fenced
                    || operation
                        .objective
                        .and_then(|id| self.objective_index(id).ok())
                        .is_some_and(|idx| {
                            self.objective(idx).control_revision != operation.observed.control
                        });
                let mut as_ended = operation.clone();
                as_ended.state = if aborted {
                    OperationState::CancelRequested
                } else {
                    OperationState::InFlight
                };
                self.call_ended_without_result(&as_ended, "it ran, and its result was lost");
            }
        }
        Ok(())
    }

    /// Asks every in-flight call of objective `idx` to abort (D3).
    pub(super) fn cancel_calls(&mut self, idx: usize) {
        let id = self.objective(idx).id;
        let ops: Vec<OperationId> = self
            .state
            .operations
            .values()
            .filter(|o| o.objective == Some(id) && o.state == OperationState::InFlight)
            .map(|o| o.id)
            .collect();
        for op in ops {
            self.cancel_call(op);
        }
    }

    /// Asks one in-flight call to abort (D3).
    pub(super) fn cancel_call(&mut self, op: OperationId) {
        if let Some(stored) = self.state.operations.get_mut(&op)
            && stored.state == OperationState::InFlight
        {
            stored.state = OperationState::CancelRequested;
            self.effects.push(Effect::CancelCall { op });
        }
    }

    /// Moves objective `idx` forward as far as its status allows: interpretations without a
    /// call, ready tasks, and a review without a call.
    pub(super) fn advance(&mut self, idx: usize) {
        match self.objective(idx).status {
            ObjectiveStatus::Planning
                if self
                    .objective(idx)
                    .interpretation
                    .as_ref()
                    .is_some_and(|i| i.op.is_none()) =>
            {
                self.issue_interpretation(Target::Objective(idx));
            }
            ObjectiveStatus::Running => {
                self.dispatch_ready(idx);
                let review_without_call = self
                    .objective(idx)
                    .awaiting_review
                    .as_ref()
                    .is_some_and(|r| r.op.is_none());
                if review_without_call && self.state.policy.review_source() == ReviewSource::Model {
                    self.request_model_review(idx);
                }
            }
            _ => {}
        }
    }

    /// Moves everything in the Room forward: after the budget changed.
    pub(super) fn advance_all(&mut self) {
        let waiting: Vec<EventId> = self
            .state
            .intake
            .iter()
            .filter(|(_, i)| i.op.is_none() && i.held.is_none())
            .map(|(e, _)| *e)
            .collect();
        for event in waiting {
            self.issue_interpretation(Target::Intake(event));
        }
        for idx in 0..self.state.objectives.len() {
            self.advance(idx);
        }
    }

    /// Dispatches every ready task of a running objective, in plan order; stops at the first
    /// reservation the budget refuses.
    fn dispatch_ready(&mut self, idx: usize) {
        let Some(plan) = self.objective(idx).current_plan() else {
            return;
        };
        let ready: Vec<Task> = plan
            .tasks
            .iter()
            .filter(|t| t.state == TaskState::Pending && plan.deps_completed(t))
            .cloned()
            .collect();
        for task in ready {
            if !self.may_dispatch_to(idx, &task) {
                continue;
            }
            let objective = self.objective(idx);
            let brief = CallBrief::Execute(TaskBrief {
                identity: task.identity.clone(),
                key: task.key.clone(),
                title: task.spec.title.clone(),
                capability: task.capability.clone(),
                inputs: task.inputs.clone(),
                kind: task.kind,
                dep_contributions: objective
                    .current_plan()
                    .map(|p| {
                        task.spec
                            .deps
                            .iter()
                            .filter_map(|d| match p.task_by_key(d).map(|t| &t.state) {
                                Some(TaskState::Completed { contribution }) => Some(*contribution),
                                _ => None,
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
            });
            let (id, observed) = (objective.id, objective.observed());
            let Some(op) = self.reserve_call(
                CallRole::Specialist,
                Some(task.assignee.clone()),
                Some(id),
                observed,
                Purpose::Execute {
                    task: task.identity.clone(),
                },
                brief,
            ) else {
                return;
            };
            if let Some(t) = self.current_task_mut(idx, &task.identity) {
                t.state = TaskState::Dispatched { op };
            }
        }
    }

    /// T3 before a call is dispatched: the assignee must still be a specialist of the Room.
    fn may_dispatch_to(&mut self, idx: usize, task: &Task) -> bool {
        if self.state.members.has(&task.assignee, Role::Specialist) {
            return true;
        }
        let id = self.objective(idx).id;
        let message = format!(
            "task {} not dispatched: {} is no longer a specialist of this room",
            task.identity, task.assignee
        );
        self.reject(Some(id), Rule::T3, message.clone());
        self.notify(Audience::Operators, Some(id), message);
        false
    }

    /// The task of `identity` in objective `idx`'s current plan.
    pub(super) fn current_task_mut(
        &mut self,
        idx: usize,
        identity: &crate::ids::TaskIdentity,
    ) -> Option<&mut Task> {
        self.objective_mut(idx)
            .plans
            .last_mut()?
            .tasks
            .iter_mut()
            .find(|t| &t.identity == identity)
    }

    /// Engine-owned progress of objective `idx`'s current plan, as the reasoner sees it.
    pub(super) fn progress(&self, idx: usize) -> Vec<TaskProgress> {
        let Some(plan) = self.objective(idx).current_plan() else {
            return Vec::new();
        };
        plan.tasks
            .iter()
            .map(|t| TaskProgress {
                key: t.key.clone(),
                identity: t.identity.clone(),
                title: t.spec.title.clone(),
                column: plan.column_of(t),
            })
            .collect()
    }
}

/// The first `max` characters of `text` on one line, with an ellipsis when cut.
fn clip(text: &str, max: usize) -> String {
    let line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line,
    }
}

/// How a settlement was decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
enum Settlement {
    /// The usage was charged (B3).
    Charged,
    /// The ledger could not take the usage: the whole reservation was charged and an overrun
    /// flagged (B3, B5); the call's result is not used as it is.
    Refused,
}
