//! Injected faults, for the money-safety tests of agentroom's OpenAI adapter (issue 16): a
//! fault `[ROLE:]N=FAULT` replaces the answer to the N-th request (1-based), counted over the
//! requests of ROLE when one is named, else over every chat-completion request received.
//! Faults given at start (`--fault`) count from the first request; faults armed at run time
//! (`POST /_faults`) count from the moment they are armed. Each fault fires once; when several
//! target one request, the first armed is applied and the others are spent with it.
//!
//! This module only parses specs and decides which request gets which fault; `http` turns a
//! fault into a response.

use std::fmt;
use std::str::FromStr;

use crate::prompt::Role;

/// The roles a spec may name, in the order of the per-role counters.
const ROLES: [Role; 3] = [Role::Reasoner, Role::Specialist, Role::Reviewer];

/// The error statuses a fault may answer.
const STATUSES: [u16; 6] = [408, 429, 500, 502, 503, 504];

/// What a faulted request gets instead of the normal answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    /// This status with an OpenAI-style error body (a 429 also carries `retry-after: 1`).
    Status(u16),
    /// Status 200 and part of the body, then the connection is dropped mid-response.
    Reset,
    /// The normal answer with usage `{prompt_tokens: 0, completion_tokens: 0, total_tokens: 0}`.
    ZeroUsage,
    /// The normal answer without a `usage` field.
    NoUsage,
}

impl Fault {
    /// Every fault's name, for error messages and `--help`.
    pub(crate) const NAMES: &'static str =
        "408, 429, 500, 502, 503, 504, reset, zero-usage or no-usage";
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Status(status) => write!(f, "{status}"),
            Self::Reset => f.write_str("reset"),
            Self::ZeroUsage => f.write_str("zero-usage"),
            Self::NoUsage => f.write_str("no-usage"),
        }
    }
}

impl FromStr for Fault {
    type Err = ();

    fn from_str(name: &str) -> Result<Self, ()> {
        match name {
            "reset" => Ok(Self::Reset),
            "zero-usage" => Ok(Self::ZeroUsage),
            "no-usage" => Ok(Self::NoUsage),
            status => status
                .parse::<u16>()
                .ok()
                .filter(|s| STATUSES.contains(s))
                .map(Self::Status)
                .ok_or(()),
        }
    }
}

/// One `[ROLE:]N=FAULT`, as given: `n` counts from when it is armed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FaultSpec {
    /// The role whose requests are counted; `None`: every request.
    pub(crate) role: Option<Role>,
    /// Which request (1 is the first).
    pub(crate) n: u64,
    /// What it gets.
    pub(crate) fault: Fault,
}

impl fmt::Display for FaultSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(role) = self.role {
            write!(f, "{}:", role.name())?;
        }
        write!(f, "{}={}", self.n, self.fault)
    }
}

impl FromStr for FaultSpec {
    type Err = String;

    fn from_str(spec: &str) -> Result<Self, String> {
        let bad = |why: String| format!("fault `{spec}`: {why}");
        let Some((target, fault)) = spec.trim().split_once('=') else {
            return Err(bad(
                "a fault is [ROLE:]N=FAULT, e.g. specialist:1=503 or 2=reset".to_owned(),
            ));
        };
        let (role, n) = match target.split_once(':') {
            Some((role, n)) => {
                let role = role.trim();
                let Some(role) = ROLES.into_iter().find(|r| r.name() == role) else {
                    return Err(bad(format!(
                        "unknown role `{role}` (reasoner, specialist or reviewer)"
                    )));
                };
                (Some(role), n)
            }
            None => (None, target),
        };
        let n = match n.trim().parse::<u64>() {
            Ok(n) if n > 0 => n,
            _ => {
                return Err(bad(format!(
                    "N must be a request number from 1 (the first request), not `{}`",
                    n.trim()
                )));
            }
        };
        let fault = fault.trim();
        let Ok(fault) = fault.parse() else {
            return Err(bad(format!("unknown fault `{fault}` ({})", Fault::NAMES)));
        };
        Ok(Self { role, n, fault })
    }
}

/// A fault waiting for its request: `at` is the count (of its role's requests, or of all) that
/// the request will have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Armed {
    role: Option<Role>,
    at: u64,
    fault: Fault,
}

/// The request counters and the faults not fired yet.
#[derive(Debug, Default)]
pub(crate) struct Faults {
    /// Chat-completion requests received.
    received: u64,
    /// Requests received per role, in the order of [`ROLES`].
    by_role: [u64; 3],
    /// In the order armed.
    pending: Vec<Armed>,
}

impl Faults {
    /// The faults of `specs`, counted from the first request.
    pub(crate) fn new(specs: &[FaultSpec]) -> Self {
        let mut faults = Self::default();
        faults.arm(specs);
        faults
    }

    fn count(&self, role: Option<Role>) -> u64 {
        match role.and_then(index) {
            Some(i) => self.by_role[i],
            None => self.received,
        }
    }

    /// Arms `specs`, each counted from now: `specialist:1=503` hits the next specialist
    /// request.
    pub(crate) fn arm(&mut self, specs: &[FaultSpec]) {
        for spec in specs {
            let at = self.count(spec.role).saturating_add(spec.n);
            self.pending.push(Armed {
                role: spec.role,
                at,
                fault: spec.fault,
            });
        }
    }

    /// Counts a request of `role` (`None`: a role the system prompt does not name) and
    /// returns its number among all requests and the fault it gets, if any.
    pub(crate) fn next(&mut self, role: Option<Role>) -> (u64, Option<Fault>) {
        self.received += 1;
        if let Some(i) = role.and_then(index) {
            self.by_role[i] += 1;
        }
        let (received, by_role) = (self.received, self.by_role);
        let hits = |armed: &Armed| match armed.role {
            None => armed.at == received,
            Some(of) => role == Some(of) && index(of).map(|i| by_role[i]) == Some(armed.at),
        };
        let fault = self.pending.iter().find(|a| hits(a)).map(|a| a.fault);
        self.pending.retain(|a| !hits(a));
        (received, fault)
    }

    /// The faults not fired yet, as specs counted from now.
    pub(crate) fn pending(&self) -> Vec<FaultSpec> {
        self.pending
            .iter()
            .map(|a| FaultSpec {
                role: a.role,
                n: a.at.saturating_sub(self.count(a.role)),
                fault: a.fault,
            })
            .collect()
    }
}

fn index(role: Role) -> Option<usize> {
    ROLES.iter().position(|r| *r == role)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(text: &str) -> FaultSpec {
        text.parse().unwrap()
    }

    #[test]
    fn specs_read_a_role_a_request_number_and_a_fault() {
        assert_eq!(
            spec("specialist:1=503"),
            FaultSpec {
                role: Some(Role::Specialist),
                n: 1,
                fault: Fault::Status(503)
            }
        );
        assert_eq!(
            spec("3=reset"),
            FaultSpec {
                role: None,
                n: 3,
                fault: Fault::Reset
            }
        );
        assert_eq!(spec(" reviewer : 2 = zero-usage ").fault, Fault::ZeroUsage);
        assert_eq!(spec("reasoner:10=no-usage").n, 10);
        for status in STATUSES {
            assert_eq!(spec(&format!("1={status}")).fault, Fault::Status(status));
        }
        for text in [
            "specialist:1=503",
            "2=reset",
            "reviewer:4=zero-usage",
            "7=no-usage",
            "reasoner:1=429",
        ] {
            assert_eq!(spec(text).to_string(), text);
        }
    }

    #[test]
    fn bad_specs_say_what_is_wrong() {
        let error = |text: &str| text.parse::<FaultSpec>().unwrap_err();
        assert_eq!(
            error("writer:1=503"),
            "fault `writer:1=503`: unknown role `writer` (reasoner, specialist or reviewer)"
        );
        assert_eq!(
            error("specialist:0=503"),
            "fault `specialist:0=503`: N must be a request number from 1 (the first request), \
             not `0`"
        );
        assert_eq!(
            error("x=503"),
            "fault `x=503`: N must be a request number from 1 (the first request), not `x`"
        );
        assert_eq!(
            error("1=418"),
            "fault `1=418`: unknown fault `418` (408, 429, 500, 502, 503, 504, reset, \
             zero-usage or no-usage)"
        );
        assert_eq!(
            error("1=Reset"),
            "fault `1=Reset`: unknown fault `Reset` (408, 429, 500, 502, 503, 504, reset, \
             zero-usage or no-usage)"
        );
        assert_eq!(
            error("specialist:1"),
            "fault `specialist:1`: a fault is [ROLE:]N=FAULT, e.g. specialist:1=503 or 2=reset"
        );
        assert!(error("-1=503").contains("N must be a request number"));
        assert!(error("specialist:=503").contains("not ``"));
    }

    #[test]
    fn a_role_fault_counts_that_roles_requests_and_a_plain_one_counts_all() {
        let mut faults = Faults::new(&[spec("specialist:2=502"), spec("3=reset")]);
        let (r, s, v) = (
            Some(Role::Reasoner),
            Some(Role::Specialist),
            Some(Role::Reviewer),
        );
        assert_eq!(faults.next(r), (1, None));
        assert_eq!(faults.next(s), (2, None), "the first specialist request");
        assert_eq!(faults.next(v), (3, Some(Fault::Reset)), "the third of all");
        assert_eq!(
            faults.next(None),
            (4, None),
            "an unknown role counts in all"
        );
        assert_eq!(
            faults.next(s),
            (5, Some(Fault::Status(502))),
            "the second specialist request"
        );
        assert_eq!(faults.next(s), (6, None), "each fault fires once");
        assert!(faults.pending().is_empty());
    }

    #[test]
    fn faults_armed_at_run_time_count_from_then() {
        let mut faults = Faults::new(&[]);
        let s = Some(Role::Specialist);
        for _ in 0..3 {
            assert_eq!(faults.next(s).1, None);
        }
        faults.arm(&[
            spec("specialist:1=503"),
            spec("2=429"),
            spec("reviewer:1=504"),
        ]);
        assert_eq!(
            faults
                .pending()
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            ["specialist:1=503", "2=429", "reviewer:1=504"]
        );
        assert_eq!(faults.next(s), (4, Some(Fault::Status(503))));
        assert_eq!(
            faults
                .pending()
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            ["1=429", "reviewer:1=504"],
            "pending faults are shown counted from now"
        );
        assert_eq!(faults.next(s), (5, Some(Fault::Status(429))));
        assert_eq!(
            faults.next(Some(Role::Reviewer)),
            (6, Some(Fault::Status(504)))
        );
    }

    #[test]
    fn when_two_faults_hit_one_request_the_first_armed_wins_and_both_are_spent() {
        let mut faults = Faults::new(&[spec("reasoner:1=429"), spec("1=503")]);
        assert_eq!(
            faults.next(Some(Role::Reasoner)),
            (1, Some(Fault::Status(429)))
        );
        assert!(faults.pending().is_empty());
        assert_eq!(faults.next(Some(Role::Reasoner)), (2, None));
    }

    #[test]
    fn a_role_fault_never_hits_another_roles_request() {
        let mut faults = Faults::new(&[spec("reviewer:1=503")]);
        assert_eq!(faults.next(Some(Role::Reasoner)).1, None);
        assert_eq!(faults.next(Some(Role::Specialist)).1, None);
        assert_eq!(faults.next(None).1, None);
        assert_eq!(
            faults.next(Some(Role::Reviewer)).1,
            Some(Fault::Status(503))
        );
    }
}
