//! Property tests of `decide`. Random sequences of moves (calls answered, settled, made
//! uncertain and reconciled; pause, resume and cancel; late results; limit raises and overrun
//! acknowledgements; owner messages and corrections; wait acks, receipts, membership changes
//! and human reviews) drive a Room, and after every step these invariants are checked:
//! - [1] the ledger log is append-only and replays to the same ledger;
//! - [2] no micro is lost or created: reserved, spent and uncertain add up over the
//!   operations, and a closed operation never changes;
//! - [3] B1, B2, B5, B6: every `ReserveAndCall` has its own reservation of the role's quote,
//!   admitted within the balance available at that moment, never while an overrun stops
//!   admissions;
//! - [4] O2: every objective has plan versions 1..=n, each after its predecessor, and the
//!   history is append-only;
//! - [5] a running task of a current plan runs an open operation, one task per operation;
//! - [6] R1, R2: no reviewer authored the objective's work; a completed objective's last
//!   review binds its last report and meets every criterion exactly once;
//! - [7] O8, O11, R2, R4: the counters stay within their bounds;
//! - [8] a terminal objective stays terminal and gets no new call;
//! - [9] D3, R5: a paused, stopped or waiting objective gets no new call; a specialist or
//!   reviewer call only while it runs.
//! - [10] B3, B5 (issue 17): an input that carries a call's receipt (returned, settled,
//!   failed, reconciled as run or not) closes its operation whatever usage it reports, so
//!   recovery never redelivers a receipt twice and no history grows without a new input.
//! - [11] visibility (issue 17): every amount the decision log names is in an entry of a
//!   budget rule, so hiding those entries from roles without `budget.read` hides all money.
//! - [12] M1 (issue 18): the memory only grows: no entry is removed, an entry's text versions
//!   are append-only, a retraction is never undone; only an accepted `Input::Memory` changes
//!   it (nothing is learned automatically), and it calls nothing. A redaction is the one
//!   rewrite: versions keep who and when and their texts become the marker, the entry is
//!   never current again, and redaction records only grow.
// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeMap;

use agentroom_domain::catalog::MemoryCatalog;
use agentroom_domain::engine::{
    CallBrief, CallRequest, CallResult, Charge, ControlAction, Decision, Input, InputError,
    LateDecision, MembershipChange, MemoryChange, PlanProposal, Proposal, ProposalKind,
    ProposedTask, ReasonerResult, Reconciliation, ReviewerResult, SpecialistResult,
};
use agentroom_domain::event::{Event, EventBody};
use agentroom_domain::ids::{CriterionId, MemoryEntryId, ObjectiveId, OperationId, RoomId};
use agentroom_domain::ledger::{BudgetLedger, LedgerEntry};
use agentroom_domain::memory::Provenance;
use agentroom_domain::objective::{Criterion, ObjectiveStatus, ObservedRevisions};
use agentroom_domain::policy::RoomPolicy;
use agentroom_domain::redaction::{REDACTED_TEXT, RedactionTarget};
use agentroom_domain::review::{
    Artifact, ContributionDraft, CriterionVerdict, ReportRef, ReviewOutcome, ReviewSubmission,
    SourceDraft, Verdict,
};
use agentroom_domain::room::Role;
use agentroom_domain::sim::{SimError, Simulation};
use agentroom_domain::state::{CallRole, OperationState, RoomState};
use common::*;
use proptest::prelude::*;

/// The Room's limit: small enough that budget refusals (B2) happen in many sequences.
const LIMIT: i64 = 12_000;

// ------------------------------------------------------------------------------------ moves

/// What a call is charged.
#[derive(Debug, Clone, Copy)]
enum ChargeMove {
    /// `Charge::Actual` of this many thousandths of the reservation (0..=1000).
    Share(u16),
    /// `Charge::NoUsage`: the whole reservation (B3).
    NoUsage,
    /// `Charge::Actual` this many micros above the reservation: an overrun (B5).
    Over(i64),
    /// `Charge::Actual` of a usage the ledger cannot take (above `MAX_CHARGE`, up to
    /// `i64::MAX`): decided once, the whole reservation charged (B3, B5).
    Unrepresentable(i64),
}

#[derive(Debug, Clone, Copy)]
enum ReasonerMove {
    /// `gather` (research) then `write` (report).
    TwoStep,
    /// A corrective plan that adds a fresh production task `more-N`.
    Corrective,
    Answer,
    Challenge,
    FormatError,
    /// A proposal claiming a revision it was not shown (O10).
    WrongRevision,
}

#[derive(Debug, Clone, Copy)]
enum SpecialistMove {
    /// A contribution with fresh content, citing the brief's `dep_contributions`.
    Contribute,
    /// A contribution whose content is always the same (an unchanged report, R3).
    ContributeSame,
    Failure,
    /// `Input::CallUncertain` (a contribution when the call is already uncertain).
    Uncertain,
}

#[derive(Debug, Clone, Copy)]
enum ReviewerMove {
    AllMet,
    OneUnmet,
    OneUnknown,
    /// A verdict list without the last criterion (R2).
    MissingCriterion,
    FormatError,
}

#[derive(Debug, Clone, Copy)]
enum Who {
    Olive,
    Oscar,
    /// A specialist, whose control is refused (T3).
    Sam,
}

impl Who {
    fn name(self) -> &'static str {
        match self {
            Who::Olive => "olive",
            Who::Oscar => "oscar",
            Who::Sam => "sam",
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum StaleMove {
    Settle,
    Uncertain,
    Reconcile,
    Return,
}

/// A member whose roles change.
#[derive(Debug, Clone, Copy)]
enum Member {
    Sam,
    Sue,
    Rita,
    Ray,
}

impl Member {
    fn name(self) -> &'static str {
        match self {
            Member::Sam => "sam",
            Member::Sue => "sue",
            Member::Rita => "rita",
            Member::Ray => "ray",
        }
    }
}

/// One move; each `pick` is taken modulo the length of the list it picks from.
#[derive(Debug, Clone, Copy)]
enum Move {
    /// Answer an open call with the move of its port.
    Answer {
        pick: usize,
        reasoner: ReasonerMove,
        specialist: SpecialistMove,
        reviewer: ReviewerMove,
        charge: ChargeMove,
    },
    /// End an open call without a result (`Input::CallSettled`).
    Settle { pick: usize, charge: ChargeMove },
    /// Lose an open call's receipt (`Input::CallUncertain`, D2).
    Uncertain { pick: usize },
    /// Reconcile an uncertain call (D2).
    Reconcile {
        pick: usize,
        executed: bool,
        charge: ChargeMove,
    },
    /// Pause, resume or cancel the last objective (D3).
    Control { who: Who, action: ControlAction },
    /// Readmit or discard a held result (D4), by olive.
    Late { pick: usize, decision: LateDecision },
    /// Oscar raises the limit (B4).
    Raise { amount: i64 },
    /// Oscar acknowledges an overrun (B5).
    Acknowledge,
    /// A new owner message from olive.
    OwnerMessage,
    /// An owner correction of the last objective, maybe with new criteria (R6).
    Correction { new_criteria: bool },
    /// A wait_ack by sam on a running task (O12).
    WaitAck { pick: usize },
    /// An input about a call a previous decision already closed: an `InputError`.
    Stale { pick: usize, kind: StaleMove },
    /// Olive grants or revokes the reviewer or specialist role (R1, T2, T3).
    Membership {
        who: Member,
        reviewer: bool,
        grant: bool,
    },
    /// An internal receipt about the last objective, from sam, who gathers for it (O9, O13).
    Receipt,
    /// A person records a review of an objective awaiting one (R1, R2; refused unless the
    /// policy asks for human reviews). `FormatError` gives a verdict on no criterion.
    HumanReview {
        pick: usize,
        who: Member,
        verdicts: ReviewerMove,
    },
    /// Someone adds (from the last objective's owner message), corrects or retracts a memory
    /// entry (M1; refused for sam).
    Memory { who: Who, pick: usize, kind: u8 },
}

fn charge_move() -> impl Strategy<Value = ChargeMove> {
    prop_oneof![
        16 => (0u16..=1000).prop_map(ChargeMove::Share),
        3 => Just(ChargeMove::NoUsage),
        1 => (1i64..=50).prop_map(ChargeMove::Over),
        1 => prop_oneof![Just(i64::MAX), (1_000_000_000_000_001i64..=i64::MAX)]
            .prop_map(ChargeMove::Unrepresentable),
    ]
}

fn reasoner_move() -> impl Strategy<Value = ReasonerMove> {
    prop_oneof![
        4 => Just(ReasonerMove::TwoStep),
        3 => Just(ReasonerMove::Corrective),
        1 => Just(ReasonerMove::Answer),
        1 => Just(ReasonerMove::Challenge),
        1 => Just(ReasonerMove::FormatError),
        1 => Just(ReasonerMove::WrongRevision),
    ]
}

fn specialist_move() -> impl Strategy<Value = SpecialistMove> {
    prop_oneof![
        6 => Just(SpecialistMove::Contribute),
        1 => Just(SpecialistMove::ContributeSame),
        1 => Just(SpecialistMove::Failure),
        1 => Just(SpecialistMove::Uncertain),
    ]
}

fn reviewer_move() -> impl Strategy<Value = ReviewerMove> {
    prop_oneof![
        3 => Just(ReviewerMove::AllMet),
        2 => Just(ReviewerMove::OneUnmet),
        1 => Just(ReviewerMove::OneUnknown),
        1 => Just(ReviewerMove::MissingCriterion),
        1 => Just(ReviewerMove::FormatError),
    ]
}

fn who() -> impl Strategy<Value = Who> {
    prop_oneof![2 => Just(Who::Olive), 2 => Just(Who::Oscar), 1 => Just(Who::Sam)]
}

fn action() -> impl Strategy<Value = ControlAction> {
    prop_oneof![
        2 => Just(ControlAction::Pause),
        2 => Just(ControlAction::Resume),
        1 => Just(ControlAction::Cancel),
    ]
}

fn late_decision() -> impl Strategy<Value = LateDecision> {
    prop_oneof![Just(LateDecision::Readmit), Just(LateDecision::Discard)]
}

fn stale_move() -> impl Strategy<Value = StaleMove> {
    prop_oneof![
        Just(StaleMove::Settle),
        Just(StaleMove::Uncertain),
        Just(StaleMove::Reconcile),
        Just(StaleMove::Return),
    ]
}

fn member() -> impl Strategy<Value = Member> {
    prop_oneof![
        Just(Member::Sam),
        Just(Member::Sue),
        Just(Member::Rita),
        Just(Member::Ray),
    ]
}

fn a_move() -> impl Strategy<Value = Move> {
    prop_oneof![
        12 => (any::<usize>(), reasoner_move(), specialist_move(), reviewer_move(), charge_move())
            .prop_map(|(pick, reasoner, specialist, reviewer, charge)| Move::Answer {
                pick,
                reasoner,
                specialist,
                reviewer,
                charge,
            }),
        3 => (any::<usize>(), charge_move()).prop_map(|(pick, charge)| Move::Settle { pick, charge }),
        1 => any::<usize>().prop_map(|pick| Move::Uncertain { pick }),
        2 => (any::<usize>(), any::<bool>(), charge_move())
            .prop_map(|(pick, executed, charge)| Move::Reconcile { pick, executed, charge }),
        3 => (who(), action()).prop_map(|(who, action)| Move::Control { who, action }),
        2 => (any::<usize>(), late_decision()).prop_map(|(pick, decision)| Move::Late { pick, decision }),
        1 => (1i64..=4_000).prop_map(|amount| Move::Raise { amount }),
        1 => Just(Move::Acknowledge),
        1 => Just(Move::OwnerMessage),
        1 => any::<bool>().prop_map(|new_criteria| Move::Correction { new_criteria }),
        1 => any::<usize>().prop_map(|pick| Move::WaitAck { pick }),
        1 => (any::<usize>(), stale_move()).prop_map(|(pick, kind)| Move::Stale { pick, kind }),
        1 => (member(), any::<bool>(), any::<bool>())
            .prop_map(|(who, reviewer, grant)| Move::Membership { who, reviewer, grant }),
        1 => Just(Move::Receipt),
        2 => (any::<usize>(), member(), reviewer_move())
            .prop_map(|(pick, who, verdicts)| Move::HumanReview { pick, who, verdicts }),
        1 => (who(), any::<usize>(), 0u8..4).prop_map(|(who, pick, kind)| Move::Memory { who, pick, kind }),
    ]
}

// ----------------------------------------------------------------------------------- driver

/// Drives a Room move by move, keeping the calls it was asked to make, and checks every
/// invariant after every step.
struct Driver {
    room: Room,
    /// Calls from `Effect::ReserveAndCall` whose operation is still open.
    open: Vec<CallRequest>,
    /// Calls whose operation a decision closed.
    closed: Vec<CallRequest>,
    /// A counter for fresh contribution contents and `more-N` keys.
    fresh: u32,
}

impl Driver {
    fn new(policy: RoomPolicy) -> Self {
        let mut driver = Self {
            room: Room::with_policy(policy, LIMIT),
            open: Vec::new(),
            closed: Vec::new(),
            fresh: 0,
        };
        check_state(&driver.room.sim);
        driver.play(Move::OwnerMessage);
        driver
    }

    fn run(policy: RoomPolicy, moves: &[Move]) -> Self {
        let mut driver = Self::new(policy);
        for m in moves {
            driver.play(*m);
        }
        driver
    }

    fn next(&mut self) -> u32 {
        self.fresh += 1;
        self.fresh
    }

    fn op_state(&self, op: OperationId) -> OperationState {
        self.room.sim.operation(op).unwrap().state()
    }

    fn last_objective(&self) -> Option<ObjectiveId> {
        self.room.state().objectives().last().map(|o| o.id())
    }

    fn event(&mut self, author: &str, body: EventBody) -> Input {
        Input::EventAccepted(Event {
            id: self.room.next_event_id(),
            room: RoomId::parse("local").unwrap(),
            author: p(author),
            body,
        })
    }

    /// Plays one move: builds its input (none when there is nothing to act on) and steps.
    fn play(&mut self, m: Move) {
        let input = match m {
            Move::Answer {
                pick,
                reasoner,
                specialist,
                reviewer,
                charge,
            } => {
                let Some(call) = pick_from(&self.open, pick).cloned() else {
                    return;
                };
                let charge = charge_of(&call, charge);
                match call.role {
                    CallRole::Reasoner => self.reasoner_answer(&call, reasoner, charge),
                    CallRole::Specialist => self.specialist_answer(&call, specialist, charge),
                    CallRole::Reviewer => reviewer_answer(&self.room, &call, reviewer, charge),
                }
            }
            Move::Settle { pick, charge } => {
                let Some(call) = pick_from(&self.open, pick) else {
                    return;
                };
                Input::CallSettled {
                    op: call.op,
                    charge: charge_of(call, charge),
                }
            }
            Move::Uncertain { pick } => {
                let known: Vec<CallRequest> = self
                    .open
                    .iter()
                    .filter(|c| self.op_state(c.op) != OperationState::Uncertain)
                    .cloned()
                    .collect();
                let Some(call) = pick_from(&known, pick) else {
                    return;
                };
                Input::CallUncertain {
                    op: call.op,
                    cause: None,
                }
            }
            Move::Reconcile {
                pick,
                executed,
                charge,
            } => {
                let uncertain: Vec<CallRequest> = self
                    .open
                    .iter()
                    .filter(|c| self.op_state(c.op) == OperationState::Uncertain)
                    .cloned()
                    .collect();
                let Some(call) = pick_from(&uncertain, pick) else {
                    return;
                };
                let outcome = if executed {
                    Reconciliation::ExecutedWithoutResult {
                        charge: charge_of(call, charge),
                    }
                } else {
                    Reconciliation::NotExecuted
                };
                Input::Reconciled {
                    op: call.op,
                    outcome,
                }
            }
            Move::Control { who, action } => {
                let Some(objective) = self.last_objective() else {
                    return;
                };
                Input::Control {
                    by: p(who.name()),
                    objective,
                    action,
                }
            }
            Move::Late { pick, decision } => {
                let held: Vec<OperationId> =
                    self.room.state().held_results().keys().copied().collect();
                let Some(op) = pick_from(&held, pick).copied() else {
                    return;
                };
                Input::DecideLateResult {
                    by: p("olive"),
                    op,
                    decision,
                }
            }
            Move::Raise { amount } => Input::RaiseLimit {
                by: p("oscar"),
                amount: micros(amount),
            },
            Move::Acknowledge => Input::AcknowledgeOverrun { by: p("oscar") },
            Move::OwnerMessage => {
                let n = self.next();
                self.event(
                    "olive",
                    EventBody::OwnerMessage {
                        text: format!("objective number {n}"),
                    },
                )
            }
            Move::Correction { new_criteria } => {
                let Some(objective) = self.last_objective() else {
                    return;
                };
                let criteria = new_criteria.then(|| {
                    let mut c = criteria();
                    c.push(Criterion {
                        id: CriterionId::parse("has-summary").unwrap(),
                        text: "opens with a summary".into(),
                    });
                    c
                });
                self.event(
                    "olive",
                    EventBody::OwnerCorrection {
                        objective,
                        text: "focus on 2026".into(),
                        criteria,
                    },
                )
            }
            Move::WaitAck { pick } => {
                let running: Vec<_> = self
                    .room
                    .state()
                    .objectives()
                    .iter()
                    .flat_map(|o| {
                        o.current_plan()
                            .into_iter()
                            .flat_map(|p| p.tasks())
                            .filter(|t| t.running_op().is_some())
                            .map(move |t| (o.id(), t.identity().clone()))
                    })
                    .collect();
                let Some((objective, task)) = pick_from(&running, pick).cloned() else {
                    return;
                };
                self.event(
                    "sam",
                    EventBody::WaitAck {
                        objective,
                        task,
                        reason: "waiting for a licence".into(),
                    },
                )
            }
            Move::Membership {
                who,
                reviewer,
                grant,
            } => Input::ChangeMembership {
                by: p("olive"),
                principal: p(who.name()),
                role: if reviewer {
                    Role::Reviewer
                } else {
                    Role::Specialist
                },
                change: if grant {
                    MembershipChange::Grant
                } else {
                    MembershipChange::Revoke
                },
            },
            Move::Receipt => {
                let objective = self.last_objective();
                self.event(
                    "sam",
                    EventBody::InternalReceipt {
                        objective,
                        note: "a source was updated".into(),
                    },
                )
            }
            Move::HumanReview {
                pick,
                who,
                verdicts,
            } => {
                let awaiting: Vec<_> = self
                    .room
                    .state()
                    .objectives()
                    .iter()
                    .filter_map(|o| {
                        let report = o.awaiting_review()?.report().clone();
                        Some((o.id(), o.observed(), report, o.criteria().to_vec()))
                    })
                    .collect();
                let Some((objective, observed, report, criteria)) =
                    pick_from(&awaiting, pick).cloned()
                else {
                    return;
                };
                Input::RecordReview {
                    by: p(who.name()),
                    objective,
                    review: ReviewSubmission {
                        model: None,
                        verdicts: verdicts_for(&self.room, &report, &criteria, verdicts),
                        report,
                        observed,
                    },
                }
            }
            Move::Memory { who, pick, kind } => {
                let entries: Vec<MemoryEntryId> = self
                    .room
                    .state()
                    .memory()
                    .entries()
                    .iter()
                    .map(|e| e.id())
                    .collect();
                if let (3, Some(entry)) = (kind, pick_from(&entries, pick).copied()) {
                    self.step(
                        Input::Redact {
                            by: p(who.name()),
                            target: RedactionTarget::Memory { entry },
                            reason: "a secret".into(),
                        },
                        None,
                    );
                    return;
                }
                let change = match (kind, pick_from(&entries, pick).copied()) {
                    (1, Some(entry)) => MemoryChange::Correct {
                        entry,
                        text: format!("corrected {}", self.next()),
                    },
                    (2, Some(entry)) => MemoryChange::Retract {
                        entry,
                        why: "superseded".into(),
                    },
                    _ => {
                        let Some(objective) = self.room.state().objectives().last() else {
                            return;
                        };
                        MemoryChange::Add {
                            text: "remember this".into(),
                            provenance: Provenance::OwnerMessage {
                                event: objective.origin(),
                            },
                        }
                    }
                };
                Input::Memory {
                    by: p(who.name()),
                    change,
                }
            }
            Move::Stale { pick, kind } => {
                let Some(call) = pick_from(&self.closed, pick).cloned() else {
                    return;
                };
                let input = stale_input(&call, kind);
                self.step(input, Some(call.op));
                return;
            }
        };
        self.step(input, None);
    }

    fn reasoner_answer(&mut self, call: &CallRequest, m: ReasonerMove, charge: Charge) -> Input {
        let CallBrief::Interpret { criteria: seen, .. } = &call.brief else {
            panic!("a reasoner call without an interpretation brief");
        };
        // A well-behaved reasoner proposes criteria with the first plan and keeps them after.
        let criteria = if seen.is_empty() {
            criteria()
        } else {
            seen.clone()
        };
        let plan = |tasks: Vec<ProposedTask>| {
            ProposalKind::Plan(PlanProposal {
                criteria: criteria.clone(),
                tasks,
                explanation: "random walk".into(),
            })
        };
        let mut observed = call.observed;
        let result = match m {
            ReasonerMove::TwoStep => Some(plan(two_step_plan().tasks)),
            ReasonerMove::Corrective => {
                let more = format!("more-{}", self.next());
                Some(plan(vec![
                    task("gather", "research", &[]),
                    task(&more, "research", &[]),
                    report("write", &["gather", &more]),
                ]))
            }
            ReasonerMove::Answer => Some(ProposalKind::Answer {
                text: "an answer".into(),
            }),
            ReasonerMove::Challenge => Some(ProposalKind::Challenge {
                question: "which year?".into(),
            }),
            ReasonerMove::FormatError => None,
            ReasonerMove::WrongRevision => {
                observed = ObservedRevisions {
                    objective: observed.objective + 1,
                    control: observed.control,
                };
                Some(plan(two_step_plan().tasks))
            }
        };
        let result = match result {
            Some(kind) => ReasonerResult::Proposal(Proposal { observed, kind }),
            None => ReasonerResult::FormatError {
                detail: "not JSON".into(),
            },
        };
        Input::CallReturned {
            op: call.op,
            charge,
            result: CallResult::Reasoner(result),
        }
    }

    fn specialist_answer(
        &mut self,
        call: &CallRequest,
        m: SpecialistMove,
        charge: Charge,
    ) -> Input {
        let CallBrief::Execute(brief) = &call.brief else {
            panic!("a specialist call without a task brief");
        };
        let content = match m {
            SpecialistMove::Uncertain if self.op_state(call.op) != OperationState::Uncertain => {
                return Input::CallUncertain {
                    op: call.op,
                    cause: None,
                };
            }
            SpecialistMove::Failure => {
                return Input::CallReturned {
                    op: call.op,
                    charge,
                    result: CallResult::Specialist(SpecialistResult::Failure {
                        reason: "source offline".into(),
                    }),
                };
            }
            SpecialistMove::ContributeSame => "always the same".to_owned(),
            SpecialistMove::Contribute | SpecialistMove::Uncertain => {
                format!("work {}", self.next())
            }
        };
        let id = self.room.next_contribution_id();
        Input::CallReturned {
            op: call.op,
            charge,
            result: CallResult::Specialist(SpecialistResult::Contribution(ContributionDraft {
                id,
                artifacts: vec![Artifact {
                    name: "body".into(),
                    content,
                }],
                sources: brief
                    .dep_contributions
                    .iter()
                    .map(|id| SourceDraft::Contribution { id: *id })
                    .collect(),
                body: None,
                outputs: serde_json::Map::new(),
            })),
        }
    }

    /// Decides `input`; `stale` names the closed operation the input is about, when it is one.
    fn step(&mut self, input: Input, stale: Option<OperationId>) {
        let before = self.room.state().clone();
        match self.room.sim.apply(input.clone()) {
            Err(err) => {
                let Some(op) = stale else {
                    panic!("an InputError ({err}) for an input that is not stale: {input:?}");
                };
                assert_eq!(
                    err,
                    SimError::Input(InputError::NotOpen(op)),
                    "a closed operation stays closed"
                );
                assert_eq!(
                    self.room.state(),
                    &before,
                    "an InputError must leave the state unchanged"
                );
            }
            Ok(decision) => {
                assert!(
                    stale.is_none(),
                    "an input about the closed operation {stale:?} was decided: {input:?}"
                );
                assert_eq!(&decision.state, self.room.state());
                if let Some(op) = receipt_of(&input) {
                    assert!(
                        decision.state.operation(op).is_none(),
                        "[10 B3] the receipt of {op} left it open (it would be redelivered): {input:?}\n{:#?}",
                        decision.log
                    );
                }
                check_decision(&before, &decision);
                self.track(&decision);
            }
        }
        check_state(&self.room.sim);
    }

    /// Keeps the decision's new calls and moves every call whose operation closed.
    fn track(&mut self, decision: &Decision) {
        self.open.extend(calls(decision));
        let state = self.room.state();
        let (open, closed): (Vec<_>, Vec<_>) = self
            .open
            .drain(..)
            .partition(|c| state.operation(c.op).is_some());
        self.open = open;
        self.closed.extend(closed);
    }
}

/// The operation whose receipt `input` carries, if it carries one (not an uncertain mark).
fn receipt_of(input: &Input) -> Option<OperationId> {
    match input {
        Input::CallReturned { op, .. }
        | Input::CallSettled { op, .. }
        | Input::CallFailed { op, .. }
        | Input::Reconciled { op, .. } => Some(*op),
        _ => None,
    }
}

fn pick_from<T>(list: &[T], pick: usize) -> Option<&T> {
    (!list.is_empty()).then(|| &list[pick % list.len()])
}

fn charge_of(call: &CallRequest, m: ChargeMove) -> Charge {
    let reservation = call.reservation.micros();
    match m {
        ChargeMove::Share(share) => Charge::Actual(micros(reservation * i64::from(share) / 1000)),
        ChargeMove::NoUsage => Charge::NoUsage,
        ChargeMove::Over(by) => Charge::Actual(micros(reservation + by)),
        ChargeMove::Unrepresentable(usage) => Charge::Actual(micros(usage)),
    }
}

/// The verdicts a reviewer gives `criteria`: all met, one unmet, one unknown, one missing,
/// or (for `FormatError`) one on something that is no criterion.
/// Each `met` carries the evidence R7 asks for (the report's first source, its body quoted).
fn verdicts_for(
    room: &Room,
    report: &ReportRef,
    criteria: &[Criterion],
    m: ReviewerMove,
) -> Vec<CriterionVerdict> {
    let ids: Vec<String> = criteria.iter().map(|c| c.id.to_string()).collect();
    let all_met: Vec<(&str, Verdict)> = ids.iter().map(|c| (c.as_str(), Verdict::Met)).collect();
    let mut verdicts = room.verdicts(report, &all_met);
    match m {
        ReviewerMove::AllMet => {}
        ReviewerMove::OneUnmet => {
            if let Some(v) = verdicts.last_mut() {
                v.verdict = Verdict::Unmet;
            }
        }
        ReviewerMove::OneUnknown => {
            if let Some(v) = verdicts.first_mut() {
                v.verdict = Verdict::Unknown;
            }
        }
        ReviewerMove::MissingCriterion => {
            verdicts.pop();
        }
        ReviewerMove::FormatError => verdicts.push(CriterionVerdict::new(
            CriterionId::parse("not-a-criterion").unwrap(),
            Verdict::Met,
            "made up",
        )),
    }
    verdicts
}

fn reviewer_answer(room: &Room, call: &CallRequest, m: ReviewerMove, charge: Charge) -> Input {
    let CallBrief::Review { report, criteria } = &call.brief else {
        panic!("a review call without a review brief");
    };
    let result = match m {
        ReviewerMove::FormatError => ReviewerResult::FormatError {
            detail: "not JSON".into(),
        },
        other => ReviewerResult::Review(ReviewSubmission {
            model: None,
            report: report.clone(),
            observed: call.observed,
            verdicts: verdicts_for(room, report, criteria, other),
        }),
    };
    Input::CallReturned {
        op: call.op,
        charge,
        result: CallResult::Reviewer(result),
    }
}

fn stale_input(call: &CallRequest, kind: StaleMove) -> Input {
    let op = call.op;
    match kind {
        StaleMove::Settle => Input::CallSettled {
            op,
            charge: Charge::NoUsage,
        },
        StaleMove::Uncertain => Input::CallUncertain { op, cause: None },
        StaleMove::Reconcile => Input::Reconciled {
            op,
            outcome: Reconciliation::NotExecuted,
        },
        StaleMove::Return => {
            let result = match call.role {
                CallRole::Reasoner => CallResult::Reasoner(ReasonerResult::FormatError {
                    detail: "late".into(),
                }),
                CallRole::Specialist => CallResult::Specialist(SpecialistResult::Failure {
                    reason: "late".into(),
                }),
                CallRole::Reviewer => CallResult::Reviewer(ReviewerResult::FormatError {
                    detail: "late".into(),
                }),
            };
            Input::CallReturned {
                op,
                charge: Charge::NoUsage,
                result,
            }
        }
    }
}

// ------------------------------------------------------------------------------- invariants

/// Invariants of one decision against the state it was decided on.
fn check_decision(before: &RoomState, decision: &Decision) {
    let after = &decision.state;
    let old = before.ledger();
    let new = after.ledger();

    // [1] The ledger log is append-only: a decision only appends its own entries.
    assert!(
        new.journal().is_empty(),
        "[1 ledger] the decision took its journal"
    );
    let appended = &decision.ledger[..];

    // [12] M1: the memory only grows, and only by an accepted memory input, which calls
    // nothing.
    let (was, is) = (before.memory().entries(), after.memory().entries());
    assert!(is.len() >= was.len(), "[12] a memory entry was removed");
    let (records_was, records_is) = (before.redactions().records(), after.redactions().records());
    assert!(
        records_is.starts_with(records_was),
        "[12] a redaction record was removed or rewritten"
    );
    let redacting = records_is.len() > records_was.len();
    for (old, new) in was.iter().zip(is) {
        assert_eq!(old.id(), new.id(), "[12] memory entries reordered");
        assert_eq!(
            old.provenance(),
            new.provenance(),
            "[12] provenance changed"
        );
        if redacting {
            assert_eq!(old.versions().len(), new.versions().len(), "[12] redaction");
            for (o, n) in old.versions().iter().zip(new.versions()) {
                assert!(
                    (n.by == o.by && n.at == o.at) && (n.text == o.text || n.text == REDACTED_TEXT),
                    "[12] a redaction rewrote more than a text: {o:?} -> {n:?}"
                );
            }
        } else {
            assert!(
                new.versions().starts_with(old.versions()),
                "[12] a text version was rewritten"
            );
        }
        assert!(
            !old.is_redacted() || new.is_redacted(),
            "[12] a redaction was undone"
        );
        assert!(
            !new.is_redacted() || !new.is_current(),
            "[12] a redacted entry is current"
        );
        assert!(
            old.retraction().is_none() || old.retraction() == new.retraction(),
            "[12] a retraction was undone or rewritten"
        );
    }
    if before.memory() != after.memory() {
        assert!(
            decision
                .log
                .iter()
                .all(|l| l.rule == Some(agentroom_domain::rules::Rule::M1)),
            "[12] the memory changed outside a memory decision: {:#?}",
            decision.log
        );
        assert!(
            decision.effects.is_empty(),
            "[12] a memory change called something"
        );
    }

    // [11] Money only in entries of a budget rule.
    for entry in &decision.log {
        let names_amount = entry
            .message
            .match_indices('$')
            .any(|(i, _)| entry.message[i + 1..].starts_with(|c: char| c.is_ascii_digit()));
        assert!(
            !names_amount || entry.rule.is_some_and(|r| r.is_budget()),
            "[11] an amount outside a budget rule's entry: {entry:?}"
        );
    }

    // [3 B2/B5] Walk the appended entries with a model of the balance kept here: every
    // reservation is admitted within the available balance at that moment, never while an
    // overrun stops admissions.
    let b = old.balances();
    let (mut limit, mut spent, mut available) =
        (b.limit.micros(), b.spent.micros(), b.available.micros());
    let mut stopped = old.overrun().is_some();
    let mut reserved_here = BTreeMap::new();
    for entry in appended {
        match *entry {
            LedgerEntry::Opened { .. } => panic!("[1 ledger] a second opening entry"),
            LedgerEntry::Reserved { op, amount } => {
                assert!(
                    !stopped,
                    "[3 B5] {op} reserved {amount} while an overrun stopped admissions"
                );
                assert!(
                    amount.micros() <= available,
                    "[3 B2] {op} reserved {amount} beyond the available {available}"
                );
                available -= amount.micros();
                reserved_here.insert(op, amount);
            }
            LedgerEntry::MarkedUncertain { .. } => {}
            LedgerEntry::Settled {
                reserved, charged, ..
            } => {
                available += reserved.micros() - charged.micros();
                spent += charged.micros();
                if charged > reserved || spent > limit {
                    stopped = true;
                }
            }
            LedgerEntry::SettlementRefused { reserved, .. } => {
                // The whole reservation is charged and admissions stop (B3, B5).
                spent = spent.saturating_add(reserved.micros());
                stopped = true;
            }
            LedgerEntry::Released { amount, .. } => available += amount.micros(),
            LedgerEntry::LimitRaised { by } => {
                limit += by.micros();
                available += by.micros();
                stopped = false;
            }
            LedgerEntry::OverrunAcknowledged => stopped = false,
        }
    }
    assert_eq!(
        available,
        new.available().micros(),
        "[3 B2] the balance model agrees with the ledger"
    );
    assert_eq!(
        stopped,
        new.overrun().is_some(),
        "[3 B5] the overrun model agrees with the ledger"
    );

    // [3 B1] A reservation for every call and a call for every reservation.
    let requested = calls(decision);
    assert_eq!(
        requested.len(),
        reserved_here.len(),
        "[3 B1] one ReserveAndCall per reservation: {:#?}",
        decision.log
    );
    let unlocked = appended.iter().any(|e| {
        matches!(
            e,
            LedgerEntry::LimitRaised { .. } | LedgerEntry::OverrunAcknowledged
        )
    });
    if old.overrun().is_some() && !unlocked {
        assert!(
            requested.is_empty(),
            "[3 B5] a call was reserved while an overrun stopped admissions"
        );
    }
    let mut new_reservations = 0;
    for call in &requested {
        assert!(
            before.operation(call.op).is_none(),
            "[3 B1] {} is not a new operation",
            call.op
        );
        assert_eq!(
            reserved_here.get(&call.op),
            Some(&call.reservation),
            "[3 B1] {} is called with the amount it reserved",
            call.op
        );
        assert_eq!(
            call.reservation,
            after.quotes().for_role(call.role),
            "[3 B6] the reservation is the role's quote"
        );
        let op = after.operation(call.op).unwrap();
        assert_eq!(
            (op.role(), op.objective(), op.reservation()),
            (call.role, call.objective, call.reservation),
            "[3 B1] the operation is persisted as called"
        );
        new_reservations += call.reservation.micros();

        // [8] A terminal objective never gets a new call; [9] nor does one that is paused,
        // stopped or waiting for its owner.
        if let Some(id) = call.objective {
            let status = after.objective(id).unwrap().status();
            assert!(
                !status.is_terminal(),
                "[8] a {} call for the {status} objective {id}: {:#?}",
                call.role.as_str(),
                decision.log
            );
            let open_now = after.operation(call.op).unwrap().state() == OperationState::InFlight;
            let fits = match call.role {
                CallRole::Reasoner => {
                    matches!(status, ObjectiveStatus::Planning | ObjectiveStatus::Running)
                }
                _ => status == ObjectiveStatus::Running,
            };
            assert!(
                !open_now || fits,
                "[9 D3/R5] a {} call for the {status} objective {id}: {:#?}",
                call.role.as_str(),
                decision.log
            );
        }
    }
    let released_or_raised: i64 = appended
        .iter()
        .map(|e| match *e {
            LedgerEntry::Settled {
                reserved, charged, ..
            } => (reserved.micros() - charged.micros()).max(0),
            LedgerEntry::Released { amount, .. } => amount.micros(),
            LedgerEntry::LimitRaised { by } => by.micros(),
            _ => 0,
        })
        .sum();
    assert!(
        new_reservations <= b.available.micros().max(0) + released_or_raised,
        "[3 B2] {new_reservations} reserved in one decision beyond what was available"
    );

    // [8] Terminal statuses are final; objectives and plan history are append-only (O2).
    for (idx, was) in before.objectives().iter().enumerate() {
        let now = &after.objectives()[idx];
        assert_eq!(was.id(), now.id(), "[4 O2] objectives are never removed");
        if was.status().is_terminal() {
            assert_eq!(was.status(), now.status(), "[8] a terminal status is final");
        }
        let n = was.plans().len();
        assert!(
            now.plans().len() >= n,
            "[4 O2] plan versions are append-only"
        );
        if n > 0 {
            assert_eq!(
                was.plans()[..n - 1],
                now.plans()[..n - 1],
                "[4 O2] superseded plan versions never change"
            );
            let (a, b) = (&was.plans()[n - 1], &now.plans()[n - 1]);
            assert_eq!(
                (a.id(), a.number(), a.predecessor(), a.trigger()),
                (b.id(), b.number(), b.predecessor(), b.trigger()),
                "[4 O2] a plan version keeps its identity"
            );
        }
    }

    // [2] An open operation stays in the state until a decision closes it, with its charge;
    // a closed one never comes back.
    for (id, was) in before.operations() {
        match (
            after.operation(*id),
            decision.closed.iter().find(|c| c.id() == *id),
        ) {
            (Some(_), None) => {}
            (None, Some(closed)) => {
                assert!(!closed.state().is_open(), "[2] {id} closed as open");
                assert_eq!(
                    closed.reservation(),
                    was.reservation(),
                    "[2] {id} kept its reservation"
                );
                assert!(closed.charged().is_some(), "[2] closed {id} has a charge");
            }
            other => panic!("[2] {id} is open and closed at once, or vanished: {other:?}"),
        }
    }
    for closed in &decision.closed {
        assert!(
            after.operation(closed.id()).is_none(),
            "[2] a closed operation leaves the state"
        );
    }
}

/// Invariants of every state.
fn check_state(sim: &Simulation<MemoryCatalog>) {
    let state = sim.state();
    let ledger = state.ledger();
    let b = ledger.balances();

    // [1] The ledger replays from its log.
    assert_eq!(
        BudgetLedger::replay(sim.ledger()).as_ref(),
        Ok(ledger),
        "[1 ledger] the log replays to the same ledger"
    );

    // [2] No micro lost or created: open operations are in the state, closed ones are the
    // record the decisions handed out.
    assert!(
        state.operations().values().all(|o| o.state().is_open()),
        "[2] the live state holds open operations only"
    );
    let ops = state.operations().values().chain(sim.closed().values());
    let open: i64 = ops
        .clone()
        .filter(|o| o.state().is_open())
        .map(|o| o.reservation().micros())
        .sum();
    let charged: i64 = ops
        .clone()
        .filter_map(|o| o.charged())
        .map(|c| c.micros())
        .sum();
    let uncertain: i64 = ops
        .clone()
        .filter(|o| o.state() == OperationState::Uncertain)
        .map(|o| o.reservation().micros())
        .sum();
    assert_eq!(
        b.reserved.micros(),
        open,
        "[2] reserved = open reservations"
    );
    assert_eq!(b.spent.micros(), charged, "[2] spent = sum of charges");
    assert_eq!(
        b.uncertain.micros(),
        uncertain,
        "[2] uncertain = reservations of uncertain operations"
    );
    assert_eq!(
        b.available.micros(),
        b.limit.micros() - b.spent.micros() - b.reserved.micros(),
        "[2 B2] available = limit - spent - reserved"
    );
    for o in ops {
        let held = ledger.held_by(o.id());
        if o.state().is_open() {
            assert_eq!(
                held,
                Some(o.reservation()),
                "[2] open {} holds its reservation",
                o.id()
            );
            assert_eq!(o.charged(), None, "[2] open {} is not charged yet", o.id());
        } else {
            assert_eq!(held, None, "[2] closed {} holds nothing", o.id());
            assert!(o.charged().is_some(), "[2] closed {} has a charge", o.id());
        }
    }

    let bounds = state.policy().bounds();
    for i in state.intake().values() {
        assert!(
            i.attempts() <= bounds.interpretations_per_event(),
            "[7 O11] {} interpretations of one event",
            i.attempts()
        );
    }

    let mut running = BTreeMap::new();
    for o in state.objectives() {
        let id = o.id();

        // [4 O2] At least one version, numbered 1..=n, each after its predecessor.
        assert!(!o.plans().is_empty(), "[4 O2] {id} has no plan version");
        for (i, plan) in o.plans().iter().enumerate() {
            assert_eq!(
                plan.number() as usize,
                i + 1,
                "[4 O2] plan numbers are 1..=n"
            );
            let predecessor = i.checked_sub(1).map(|j| o.plans()[j].id());
            assert_eq!(
                plan.predecessor(),
                predecessor,
                "[4 O2] a version's predecessor is the previous version"
            );
        }

        // [5] Running tasks of the current plan run open operations, one task per operation.
        for t in o.current_plan().unwrap().tasks() {
            if let Some(op) = t.running_op() {
                let operation = state
                    .operation(op)
                    .unwrap_or_else(|| panic!("[5] {} runs the unknown {op}", t.identity()));
                assert!(
                    operation.state().is_open(),
                    "[5] {} ({:?}) runs {op}, which is {:?}",
                    t.identity(),
                    t.state(),
                    operation.state()
                );
                if let Some(other) = running.insert(op, t.identity().clone()) {
                    panic!("[5] {op} is the running op of {other} and {}", t.identity());
                }
            }
        }

        // [6 R1] Every reviewer is distinct from every author of the objective's work.
        let authors: Vec<_> = o
            .contributions()
            .iter()
            .map(|c| state.contributions()[c].author().clone())
            .collect();
        for review in o.reviews() {
            assert!(
                !authors.contains(review.reviewer()),
                "[6 R1] {} reviewed work they authored",
                review.reviewer()
            );
        }
        // [6 R2] A completed objective's last review binds its last report and meets every
        // criterion exactly once.
        if o.status() == ObjectiveStatus::Completed {
            let last = o
                .reviews()
                .last()
                .expect("[6 R2] completed without a review");
            assert_eq!(last.outcome(), ReviewOutcome::AllMet, "[6 R2] all met");
            assert_eq!(
                Some(last.report()),
                o.reports().last(),
                "[6 R2] the last review binds the last report"
            );
            assert_eq!(
                last.verdicts().len(),
                o.criteria().len(),
                "[6 R2] one verdict per criterion"
            );
            for c in o.criteria() {
                let verdicts: Vec<_> = last
                    .verdicts()
                    .iter()
                    .filter(|v| v.criterion == c.id)
                    .map(|v| v.verdict)
                    .collect();
                assert_eq!(
                    verdicts,
                    vec![Verdict::Met],
                    "[6 R2] `{}` met exactly once",
                    c.id
                );
            }
        }

        // [7 O8/O11/R4] Counters never exceed their bounds.
        let counters = o.counters();
        assert!(
            counters.replans_without_progress <= bounds.replans_without_progress(),
            "[7 O8] {} replans without progress",
            counters.replans_without_progress
        );
        assert!(
            counters.failed_report_versions <= bounds.failed_report_versions(),
            "[7 R4] {} failed report versions",
            counters.failed_report_versions
        );
        assert!(
            counters.failed_reviews <= bounds.interpretations_per_event(),
            "[7 R2] {} failed reviews",
            counters.failed_reviews
        );
        if let Some(i) = o.interpretation() {
            assert!(
                i.attempts() <= bounds.interpretations_per_event(),
                "[7 O11] {} interpretations of one trigger",
                i.attempts()
            );
        }
    }
}

// ------------------------------------------------------------------------------- properties

fn human_reviews() -> RoomPolicy {
    RoomPolicy::from_toml("[review]\nsource = \"human\"\n").unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::with_cases(256)
    })]

    /// Invariants [1]–[9] hold after every step of any sequence, with model reviews.
    #[test]
    fn prop_invariants_hold_after_any_sequence_with_model_reviews(
        moves in prop::collection::vec(a_move(), 1..=60)
    ) {
        Driver::run(RoomPolicy::default(), &moves);
    }

    /// Invariants [1]–[9] hold after every step of any sequence, with human reviews.
    #[test]
    fn prop_invariants_hold_after_any_sequence_with_human_reviews(
        moves in prop::collection::vec(a_move(), 1..=60)
    ) {
        Driver::run(human_reviews(), &moves);
    }
}

fn answer(reasoner: ReasonerMove, reviewer: ReviewerMove) -> Move {
    Move::Answer {
        pick: 0,
        reasoner,
        specialist: SpecialistMove::Contribute,
        reviewer,
        charge: ChargeMove::Share(500),
    }
}

/// The driver itself: an objective is planned, worked, reported and completed by a distinct
/// reviewer, with every invariant checked on the way.
#[test]
fn the_driver_walks_an_objective_to_completion() {
    let all_met = answer(ReasonerMove::TwoStep, ReviewerMove::AllMet);
    let driver = Driver::run(RoomPolicy::default(), &[all_met; 4]);
    let o = driver.room.state().objectives().last().unwrap();
    assert_eq!(o.status(), ObjectiveStatus::Completed);
    assert_eq!(o.reviews()[0].reviewer(), &p("ray"));
    assert!(driver.open.is_empty());

    let unmet = answer(ReasonerMove::TwoStep, ReviewerMove::OneUnmet);
    let driver = Driver::run(RoomPolicy::default(), &[unmet; 4]);
    let o = driver.room.state().objectives().last().unwrap();
    assert_eq!(o.reviews().len(), 1);
    assert_eq!(o.status(), ObjectiveStatus::Planning);
}

/// The driver with human reviews: an author's review is refused (R1), a reviewer's counts.
#[test]
fn the_driver_records_human_reviews_from_distinct_reviewers_only() {
    let work = answer(ReasonerMove::TwoStep, ReviewerMove::AllMet);
    let review = |who| Move::HumanReview {
        pick: 0,
        who,
        verdicts: ReviewerMove::AllMet,
    };
    let grant = Move::Membership {
        who: Member::Sam,
        reviewer: true,
        grant: true,
    };
    let driver = Driver::run(
        human_reviews(),
        &[grant, work, work, work, review(Member::Sam)],
    );
    let o = driver.room.state().objectives().last().unwrap();
    assert!(o.reviews().is_empty());
    assert!(o.awaiting_review().is_some());
    let driver = Driver::run(
        human_reviews(),
        &[
            grant,
            work,
            work,
            work,
            review(Member::Sam),
            review(Member::Rita),
        ],
    );
    let o = driver.room.state().objectives().last().unwrap();
    assert_eq!(o.status(), ObjectiveStatus::Completed);
}

// ------------------------------------------------------------------------------ regressions
//
// Minimal sequences the properties found. Each fails on the labeled invariant while the bug
// is in the engine; the driver checks every invariant after every step.

/// [8] An internal receipt on a running objective starts an interpretation that outlives the
/// review completing the objective: the reasoner's plan is then admitted on the completed
/// objective, which runs again.
#[test]
fn regression_a_receipt_interpretation_revives_a_completed_objective() {
    let driver = Driver::run(
        RoomPolicy::default(),
        &[
            answer(ReasonerMove::TwoStep, ReviewerMove::AllMet), // plan v1; gather dispatched
            answer(ReasonerMove::TwoStep, ReviewerMove::AllMet), // gather done; write dispatched
            Move::Receipt,                                       // reasoner call, still running
            answer(ReasonerMove::TwoStep, ReviewerMove::AllMet), // write done; review dispatched
            Move::Answer {
                pick: 1, // the review: all met, completed
                reasoner: ReasonerMove::TwoStep,
                specialist: SpecialistMove::Contribute,
                reviewer: ReviewerMove::AllMet,
                charge: ChargeMove::Share(500),
            },
            answer(ReasonerMove::TwoStep, ReviewerMove::AllMet), // the receipt's plan
        ],
    );
    let o = driver.room.state().objectives().last().unwrap();
    assert_eq!(o.status(), ObjectiveStatus::Completed);
}

/// [9] The same receipt interpretation outlives an unknown verdict (R5): when its call ends
/// without a result, another reasoner call is reserved although the objective waits for the
/// owner.
#[test]
fn regression_a_receipt_interpretation_calls_the_reasoner_while_waiting_for_the_owner() {
    let driver = Driver::run(
        RoomPolicy::default(),
        &[
            answer(ReasonerMove::TwoStep, ReviewerMove::AllMet),
            answer(ReasonerMove::TwoStep, ReviewerMove::AllMet),
            Move::Receipt,
            answer(ReasonerMove::TwoStep, ReviewerMove::AllMet),
            Move::Answer {
                pick: 1, // the review: one unknown, waiting for the owner
                reasoner: ReasonerMove::TwoStep,
                specialist: SpecialistMove::Contribute,
                reviewer: ReviewerMove::OneUnknown,
                charge: ChargeMove::Share(500),
            },
            Move::Settle {
                pick: 0, // the receipt's reasoner call ends without a result
                charge: ChargeMove::Share(500),
            },
        ],
    );
    let o = driver.room.state().objectives().last().unwrap();
    assert_eq!(o.status(), ObjectiveStatus::WaitingForOwner);
}

/// [8] With human reviews, a report produced by a call dispatched before an owner correction
/// must not be reviewed while the correction is being planned (it once completed the
/// objective, which the correction's plan then revived): the review is fenced (R6) and the
/// correction's plan runs.
#[test]
fn regression_a_human_review_during_a_correction_is_revived_by_its_plan() {
    let driver = Driver::run(
        human_reviews(),
        &[
            answer(ReasonerMove::TwoStep, ReviewerMove::AllMet), // plan v1; gather dispatched
            answer(ReasonerMove::TwoStep, ReviewerMove::AllMet), // gather done; write dispatched
            Move::Correction {
                new_criteria: false,
            }, // planning; reasoner call
            answer(ReasonerMove::TwoStep, ReviewerMove::AllMet), // write done; report v1
            Move::HumanReview {
                pick: 0,
                who: Member::Rita,
                verdicts: ReviewerMove::AllMet,
            },
            answer(ReasonerMove::TwoStep, ReviewerMove::AllMet), // the correction's plan
        ],
    );
    let o = driver.room.state().objectives().last().unwrap();
    assert_eq!(o.status(), ObjectiveStatus::Running);
    assert!(o.reviews().is_empty());
    assert_eq!(o.plans().len(), 2);
}
