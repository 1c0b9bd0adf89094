//! Redaction (issue 18): the owner (`content.redact`) removes an artifact's content or a
//! memory entry's text that holds a secret or personal data. The state keeps a redaction
//! record (what, who, when, why, the digest of what was removed) in its place; a redacted
//! memory entry keeps its id and provenance, every text it had becomes
//! [`REDACTED_TEXT`], and it never reaches a model again (M1, C1). The stores remove the
//! content and scrub the texts in the same commit ([`Scrubs`](crate::redaction::Scrubs)).
//!
//! Refused, each with nothing changed: a principal without `content.redact` (T3 for content,
//! M1 for memory), content no contribution of the Room names (T2), an unknown memory entry
//! (M1), something redacted already, a blank or over-long reason. Content a review's evidence
//! quotes may be redacted: R7 checks quotes only when a review is recorded.

use super::Ctx;
use crate::artifact::ContentDigest;
use crate::ids::PrincipalId;
use crate::redaction::{REDACTED_TEXT, Redaction, RedactionTarget, reason_problem};
use crate::room::Permission;
use crate::rules::Rule;

impl Ctx<'_, '_> {
    /// Redacts `target` for `reason`, one decision.
    pub(super) fn redact(&mut self, by: &PrincipalId, target: RedactionTarget, reason: String) {
        // The rule a refusal of this target names: M1 for the Room's memory, T2 for the
        // content its contributions name.
        let rule = match target {
            RedactionTarget::Artifact { .. } => Rule::T2,
            RedactionTarget::Memory { .. } => Rule::M1,
        };
        if !self.state.may(by, Permission::ContentRedact) {
            let rule = match target {
                RedactionTarget::Artifact { .. } => Rule::T3,
                RedactionTarget::Memory { .. } => Rule::M1,
            };
            self.reject(
                None,
                rule,
                format!(
                    "{by} lacks the permission {}: only the owner redacts {target}",
                    Permission::ContentRedact
                ),
            );
            return;
        }
        let old_digest = match self.redaction_problem(&target, &reason) {
            Ok(digest) => digest,
            Err(problem) => {
                self.reject(None, rule, format!("{target} not redacted: {problem}"));
                return;
            }
        };
        if let RedactionTarget::Memory { entry } = &target {
            self.state.memory.redact(*entry, REDACTED_TEXT);
        }
        let at = self.env.now;
        self.accept(
            None,
            Some(rule),
            format!(
                "{by} redacted {target} (it held content {old_digest}): its content is removed \
                 from the store and never reaches a model; the redaction record keeps who, when \
                 and why"
            ),
        );
        self.state.redactions.push(Redaction {
            target,
            by: by.clone(),
            at,
            why: reason,
            old_digest,
        });
    }

    /// The digest of what `target` holds, or why it cannot be redacted for `reason`.
    fn redaction_problem(
        &self,
        target: &RedactionTarget,
        reason: &str,
    ) -> Result<ContentDigest, String> {
        if let Some(record) = self.state.redactions.of(target) {
            return Err(format!(
                "it was redacted already, by {} at {}",
                record.by, record.at
            ));
        }
        let digest = match target {
            RedactionTarget::Artifact { digest } => {
                let named = self.state.names_content(digest) || self.env.archive.names(digest);
                if !named {
                    return Err("no contribution of this room names that content".to_owned());
                }
                digest.clone()
            }
            RedactionTarget::Memory { entry } => {
                let current = self
                    .state
                    .memory
                    .get(*entry)
                    .and_then(|e| e.current())
                    .ok_or_else(|| "there is no such memory entry in this room".to_owned())?;
                ContentDigest::of(current.text.as_bytes())
            }
        };
        match reason_problem(reason) {
            Some(problem) => Err(problem),
            None => Ok(digest),
        }
    }
}
