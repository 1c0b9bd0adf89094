//! Room and access policies: the bounds, task identities, review source and capability files a
//! Room runs under (`policies/room.toml`), and which permissions each role holds
//! (`policies/access.toml`).
//!
//! Both are parsed from TOML text handed in by the caller; this module does no IO. Every key is
//! optional (a missing key takes its default) and unknown keys are refused. Every refusal is a
//! [`PolicyError`] naming the 1-based line and column and the dotted field it concerns.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::ops::Range;

use serde::{Deserialize, Serialize};
use toml::Spanned;

use crate::room::{Permission, Role};

/// The field named when an error cannot be tied to any key or table.
const DOCUMENT: &str = "(document)";

/// The longest prefix allowed for objective-scoped task identities.
const PREFIX_MAX_LEN: usize = 8;

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/// A policy file that cannot be used, with where and why.
///
/// Displays as ``line {line}, column {column}, field `{field}`: {message}``.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}, column {column}, field `{field}`: {message}")]
pub struct PolicyError {
    line: usize,
    column: usize,
    field: String,
    message: String,
}

impl PolicyError {
    /// The 1-based line the error concerns.
    pub fn line(&self) -> usize {
        self.line
    }

    /// The 1-based column (counted in characters) the error concerns.
    pub fn column(&self) -> usize {
        self.column
    }

    /// The dotted path of the field the error concerns, e.g. `bounds.replans_without_progress`
    /// or `roles.owner.permissions`; a table path when no key can be read, and `(document)` when
    /// not even a table can.
    pub fn field(&self) -> &str {
        &self.field
    }

    /// What is wrong, in lower case and without a trailing period.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// An error at the start of `span` in `text`, for a field whose path is known.
    fn at(
        text: &str,
        span: &Range<usize>,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        let (line, column) = position(text, span.start);
        Self {
            line,
            column,
            field: field.into(),
            message: message.into(),
        }
    }

    /// Converts an error from the TOML parser or deserializer, reading the field from `text`
    /// at the error's position.
    fn from_toml(text: &str, error: &toml::de::Error) -> Self {
        let message = error.message().trim().trim_end_matches('.').to_owned();
        match error.span() {
            Some(span) => {
                let (line, column) = position(text, span.start);
                Self {
                    line,
                    column,
                    field: field_at(text, span.start),
                    message,
                }
            }
            None => Self {
                line: 1,
                column: 1,
                field: DOCUMENT.to_owned(),
                message,
            },
        }
    }
}

/// Problems found while validating a deserialized policy; the one earliest in the document is
/// reported.
struct Problems<'t> {
    text: &'t str,
    found: Vec<PolicyError>,
}

impl<'t> Problems<'t> {
    fn new(text: &'t str) -> Self {
        Self {
            text,
            found: Vec::new(),
        }
    }

    fn add(&mut self, span: &Range<usize>, field: impl Into<String>, message: impl Into<String>) {
        self.found
            .push(PolicyError::at(self.text, span, field, message));
    }

    /// `Ok(value)` when nothing was found, else the earliest problem.
    fn finish<T>(self, value: T) -> Result<T, PolicyError> {
        match self.found.into_iter().min_by_key(|e| (e.line, e.column)) {
            Some(error) => Err(error),
            None => Ok(value),
        }
    }
}

/// The 1-based line and column (in characters) of byte `offset` in `text`.
fn position(text: &str, offset: usize) -> (usize, usize) {
    let bytes = text.as_bytes();
    let before = bytes.get(..offset).unwrap_or(bytes);
    let line_start = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let column = before
        .get(line_start..)
        .unwrap_or_default()
        .iter()
        .filter(|&&b| b & 0xC0 != 0x80)
        .count()
        + 1;
    (line, column)
}

// ---------------------------------------------------------------------------------------------
// Reading the field at a position
// ---------------------------------------------------------------------------------------------

/// The dotted path of the field at byte `offset` of the TOML `text`, read from the text itself
/// (the document may not even parse).
///
/// Walks the document's statements in order: a position inside a `key = value` statement
/// (including a value spanning several lines) names the key, prefixed by the nearest preceding
/// `[table]` header path; a position on a header line, or on a line where no key can be read,
/// names that nearest header path; with no header either, the field is `(document)`.
fn field_at(text: &str, offset: usize) -> String {
    let bytes = text.as_bytes();
    let mut table: Vec<String> = Vec::new();
    let mut pos = 0;
    loop {
        pos = skip_blank(bytes, pos);
        if pos >= bytes.len() || pos > offset {
            break;
        }
        if bytes.get(pos) == Some(&b'[') {
            let (path, end) = read_header(bytes, pos);
            table = path;
            if offset <= end {
                break;
            }
            pos = end;
            continue;
        }
        match read_key(bytes, pos) {
            (Some(key), equals) => {
                let end = skip_value(bytes, equals + 1);
                if offset <= end {
                    return join_path(table.iter().chain(key.iter()));
                }
                pos = end;
            }
            (None, end) => {
                if offset <= end {
                    break;
                }
                pos = end;
            }
        }
    }
    join_path(table.iter())
}

/// Joins path segments with dots; `(document)` for no segments.
fn join_path<'a>(segments: impl Iterator<Item = &'a String>) -> String {
    let joined = segments.map(String::as_str).collect::<Vec<_>>().join(".");
    if joined.is_empty() {
        DOCUMENT.to_owned()
    } else {
        joined
    }
}

/// Skips whitespace, line ends and comments between statements.
fn skip_blank(bytes: &[u8], mut pos: usize) -> usize {
    while let Some(&b) = bytes.get(pos) {
        match b {
            b' ' | b'\t' | b'\r' | b'\n' => pos += 1,
            b'#' => pos = line_end(bytes, pos),
            _ => break,
        }
    }
    pos
}

/// The index of the newline ending the line containing `pos`, or the length of the text.
fn line_end(bytes: &[u8], pos: usize) -> usize {
    bytes
        .get(pos..)
        .and_then(|rest| rest.iter().position(|&b| b == b'\n'))
        .map_or(bytes.len(), |i| pos + i)
}

/// Reads a `[table]` or `[[array]]` header starting at `pos`: its path, and the end of its line.
fn read_header(bytes: &[u8], pos: usize) -> (Vec<String>, usize) {
    let end = line_end(bytes, pos);
    let line = bytes.get(pos..end).unwrap_or_default();
    let inner = line.iter().position(|&b| b != b'[').unwrap_or(line.len());
    let close = find_unquoted(line, inner, |b| b == b']').unwrap_or(line.len());
    let path = line.get(inner..close).map(split_key).unwrap_or_default();
    (path, end)
}

/// Reads the key of a `key = value` statement starting at `pos`: the key's segments and the
/// index of the `=`, or `None` and the end of the line when the line has no `=`.
fn read_key(bytes: &[u8], pos: usize) -> (Option<Vec<String>>, usize) {
    let end = line_end(bytes, pos);
    let line = bytes.get(pos..end).unwrap_or_default();
    match find_unquoted(line, 0, |b| b == b'=' || b == b'#') {
        Some(equals) if line.get(equals) == Some(&b'=') => {
            let key = line.get(..equals).map(split_key).unwrap_or_default();
            if key.is_empty() {
                (None, end)
            } else {
                (Some(key), pos + equals)
            }
        }
        _ => (None, end),
    }
}

/// The index in `line` (from `from`) of the first byte outside quotes matching `wanted`.
fn find_unquoted(line: &[u8], from: usize, wanted: impl Fn(u8) -> bool) -> Option<usize> {
    let mut quote: Option<u8> = None;
    let mut i = from;
    while let Some(&b) = line.get(i) {
        match quote {
            Some(q) if b == q => quote = None,
            Some(b'"') if b == b'\\' => i += 1,
            Some(_) => {}
            None if b == b'"' || b == b'\'' => quote = Some(b),
            None if wanted(b) => return Some(i),
            None => {}
        }
        i += 1;
    }
    None
}

/// Splits a raw (possibly dotted, possibly quoted) key into its segments, without quotes.
fn split_key(raw: &[u8]) -> Vec<String> {
    let mut segments = Vec::new();
    let mut start = 0;
    loop {
        let dot = find_unquoted(raw, start, |b| b == b'.');
        let piece = raw.get(start..dot.unwrap_or(raw.len())).unwrap_or_default();
        let piece = String::from_utf8_lossy(piece);
        let piece = piece.trim();
        let unquoted = piece
            .strip_prefix('"')
            .and_then(|p| p.strip_suffix('"'))
            .or_else(|| piece.strip_prefix('\'').and_then(|p| p.strip_suffix('\'')))
            .unwrap_or(piece);
        if !unquoted.is_empty() {
            segments.push(unquoted.to_owned());
        }
        match dot {
            Some(d) => start = d + 1,
            None => return segments,
        }
    }
}

/// Skips a value starting at `pos` (after the `=`), across strings, comments and nested
/// arrays or inline tables spanning lines; returns the index of the newline ending it, or the
/// length of the text.
fn skip_value(bytes: &[u8], mut pos: usize) -> usize {
    let mut depth: usize = 0;
    while let Some(&b) = bytes.get(pos) {
        match b {
            b'\n' if depth == 0 => return pos,
            b'#' => {
                pos = line_end(bytes, pos);
                continue;
            }
            b'[' | b'{' => depth += 1,
            b']' | b'}' => depth = depth.saturating_sub(1),
            b'"' | b'\'' => {
                pos = skip_string(bytes, pos);
                continue;
            }
            _ => {}
        }
        pos += 1;
    }
    bytes.len()
}

/// Skips a string starting at the quote at `pos`; returns the index just after it (a
/// single-line string left open stops at its line's end).
fn skip_string(bytes: &[u8], pos: usize) -> usize {
    let quote = bytes.get(pos).copied().unwrap_or(b'"');
    let triple = [quote; 3];
    let escapes = quote == b'"';
    let multi_line = bytes.get(pos..pos + 3) == Some(&triple[..]);
    let mut i = if multi_line { pos + 3 } else { pos + 1 };
    while let Some(&b) = bytes.get(i) {
        if escapes && b == b'\\' {
            i += 2;
            continue;
        }
        if multi_line {
            if bytes.get(i..i + 3) == Some(&triple[..]) {
                return i + 3;
            }
        } else if b == quote {
            return i + 1;
        } else if b == b'\n' {
            return i;
        }
        i += 1;
    }
    bytes.len()
}

// ---------------------------------------------------------------------------------------------
// Room policy
// ---------------------------------------------------------------------------------------------

/// How many times the Room tries before it stops and asks for help.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub struct Bounds {
    replans_without_progress: u32,
    interpretations_per_event: u32,
    failed_report_versions: u32,
}

impl Bounds {
    /// The smallest value a bound may take.
    pub const MIN: u32 = 1;
    /// The largest value a bound may take.
    pub const MAX: u32 = 100;
    /// The value a bound takes when the policy does not set it.
    pub const DEFAULT: u32 = 3;

    /// How many replans in a row may make no progress before the objective stops.
    pub const fn replans_without_progress(self) -> u32 {
        self.replans_without_progress
    }

    /// How many interpretations one event may get.
    pub const fn interpretations_per_event(self) -> u32 {
        self.interpretations_per_event
    }

    /// How many report versions may fail review before the task stops.
    pub const fn failed_report_versions(self) -> u32 {
        self.failed_report_versions
    }
}

impl Default for Bounds {
    fn default() -> Self {
        Self {
            replans_without_progress: Self::DEFAULT,
            interpretations_per_event: Self::DEFAULT,
            failed_report_versions: Self::DEFAULT,
        }
    }
}

/// How much content a contribution may carry (DESIGN.md "Artifact and source"): one piece
/// (its body, a source's excerpt, its outputs) and all of it together, in bytes.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub struct ContentBounds {
    max_artifact_bytes: u64,
    max_contribution_bytes: u64,
}

impl ContentBounds {
    /// The smallest value either bound may take.
    pub const MIN: u64 = 1;
    /// The largest value either bound may take: 64 MiB.
    pub const MAX: u64 = 64 * 1024 * 1024;
    /// The default bound of one piece: 256 KiB.
    pub const DEFAULT_ARTIFACT: u64 = 256 * 1024;
    /// The default bound of a whole contribution: 1 MiB.
    pub const DEFAULT_CONTRIBUTION: u64 = 1024 * 1024;

    /// Bounds of `artifact` bytes per piece and `contribution` bytes in all (each clamped to
    /// `MIN..=MAX`).
    pub fn new(artifact: u64, contribution: u64) -> Self {
        Self {
            max_artifact_bytes: artifact.clamp(Self::MIN, Self::MAX),
            max_contribution_bytes: contribution.clamp(Self::MIN, Self::MAX),
        }
    }

    /// The most bytes one piece of content may have.
    pub const fn max_artifact_bytes(self) -> u64 {
        self.max_artifact_bytes
    }

    /// The most bytes a contribution's content may have in all.
    pub const fn max_contribution_bytes(self) -> u64 {
        self.max_contribution_bytes
    }
}

impl Default for ContentBounds {
    fn default() -> Self {
        Self {
            max_artifact_bytes: Self::DEFAULT_ARTIFACT,
            max_contribution_bytes: Self::DEFAULT_CONTRIBUTION,
        }
    }
}

/// Who reviews source-bound reports.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReviewSource {
    /// A model reviews reports (the default).
    #[default]
    Model,
    /// A human holding the reviewer role reviews reports.
    Human,
}

impl ReviewSource {
    /// Every review source, in a fixed order.
    pub const ALL: [ReviewSource; 2] = [ReviewSource::Model, ReviewSource::Human];

    /// The source's name as written in `policies/room.toml`.
    pub const fn as_str(self) -> &'static str {
        match self {
            ReviewSource::Model => "model",
            ReviewSource::Human => "human",
        }
    }
}

impl fmt::Display for ReviewSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How the Room coordinates its agents (issue 19's qualification compares the three with the
/// same agents, permissions and budget). The baselines switch planning and the review gate
/// off; every call still goes through the store, the ledger and the runner.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Coordination {
    /// agentroom as designed: the reasoner plans versioned tasks, specialists work, a reviewer
    /// distinct from every author checks the report against every criterion (the default).
    #[default]
    Planner,
    /// Selective routing: the reasoner names the one capability the answer needs and the
    /// message goes to the specialist bound to it; one task, no dependencies, no review gate.
    Routing,
    /// Legacy sessions: no reasoner; every specialist's session sees the owner's message and
    /// works alone; the objective ends when one of them declares its work done.
    Sessions,
}

impl Coordination {
    /// Every mode, in a fixed order.
    pub const ALL: [Coordination; 3] = [
        Coordination::Planner,
        Coordination::Routing,
        Coordination::Sessions,
    ];

    /// The mode's name as written in `policies/room.toml`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Coordination::Planner => "planner",
            Coordination::Routing => "routing",
            Coordination::Sessions => "sessions",
        }
    }

    /// Whether this is the planner (the state of a planner Room serializes without the mode,
    /// exactly as before the modes existed).
    pub fn is_planner(&self) -> bool {
        *self == Coordination::Planner
    }
}

impl fmt::Display for Coordination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The settings a Room runs under, read from `policies/room.toml`.
///
/// The serde derives are for persisting a Room's state; a policy file is read with
/// [`RoomPolicy::from_toml`], which validates it.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub struct RoomPolicy {
    bounds: Bounds,
    task_identity_prefix: Option<String>,
    review_source: ReviewSource,
    capability_files: Vec<String>,
    binding_files: Vec<String>,
    /// Absent from the state of Rooms made before content bounds existed: the defaults.
    #[serde(default)]
    content: ContentBounds,
    /// Absent from the state of planner Rooms (the default), so their state is unchanged.
    #[serde(default, skip_serializing_if = "Coordination::is_planner")]
    coordination: Coordination,
}

impl RoomPolicy {
    /// Parses and validates a room policy. Every key is optional (see [`RoomPolicy::default`]);
    /// unknown keys, bounds outside 1..=100, a prefix that is not 1 to 8 ASCII upper-case
    /// letters, a review source other than `model` or `human`, and empty file paths are refused.
    pub fn from_toml(text: &str) -> Result<Self, PolicyError> {
        let file: RoomFile = toml::from_str(text).map_err(|e| PolicyError::from_toml(text, &e))?;
        let mut problems = Problems::new(text);

        let task_identity_prefix = match file.task_identity_prefix {
            Some(prefix) if !prefix.get_ref().is_empty() => {
                if !is_valid_prefix(prefix.get_ref()) {
                    problems.add(
                        &prefix.span(),
                        "task_identity_prefix",
                        format!(
                            "must be empty or 1 to {PREFIX_MAX_LEN} ASCII upper-case letters, \
                             got `{}`",
                            prefix.get_ref().escape_debug()
                        ),
                    );
                }
                Some(prefix.into_inner())
            }
            _ => None,
        };

        let bounds_file = file.bounds.unwrap_or_default();
        let mut bound = |value: Option<Spanned<WholeNumber>>, name: &str| -> u32 {
            let Some(value) = value else {
                return Bounds::DEFAULT;
            };
            match u32::try_from(value.get_ref().0) {
                Ok(n) if (Bounds::MIN..=Bounds::MAX).contains(&n) => n,
                _ => {
                    problems.add(
                        &value.span(),
                        format!("bounds.{name}"),
                        format!(
                            "must be a whole number from {} to {}, got {}",
                            Bounds::MIN,
                            Bounds::MAX,
                            value.get_ref().0
                        ),
                    );
                    Bounds::DEFAULT
                }
            }
        };
        let bounds = Bounds {
            replans_without_progress: bound(
                bounds_file.replans_without_progress,
                "replans_without_progress",
            ),
            interpretations_per_event: bound(
                bounds_file.interpretations_per_event,
                "interpretations_per_event",
            ),
            failed_report_versions: bound(
                bounds_file.failed_report_versions,
                "failed_report_versions",
            ),
        };

        let review_source = match file.review.and_then(|r| r.source) {
            None => ReviewSource::default(),
            Some(source) => ReviewSource::ALL
                .into_iter()
                .find(|s| s.as_str() == source.get_ref())
                .unwrap_or_else(|| {
                    problems.add(
                        &source.span(),
                        "review.source",
                        format!(
                            "must be `model` or `human`, got `{}`",
                            source.get_ref().escape_debug()
                        ),
                    );
                    ReviewSource::default()
                }),
        };

        let coordination = match file.coordination.and_then(|c| c.mode) {
            None => Coordination::default(),
            Some(mode) => Coordination::ALL
                .into_iter()
                .find(|c| c.as_str() == mode.get_ref())
                .unwrap_or_else(|| {
                    problems.add(
                        &mode.span(),
                        "coordination.mode",
                        format!(
                            "must be `planner`, `routing` or `sessions`, got `{}`",
                            mode.get_ref().escape_debug()
                        ),
                    );
                    Coordination::default()
                }),
        };

        let capabilities = file.capabilities.unwrap_or_default();
        let mut paths = |list: Option<Vec<Spanned<String>>>, field: &str| -> Vec<String> {
            let list = list.unwrap_or_default();
            for path in &list {
                if path.get_ref().trim().is_empty() {
                    problems.add(
                        &path.span(),
                        format!("capabilities.{field}"),
                        "a file path must not be empty",
                    );
                }
            }
            list.into_iter().map(Spanned::into_inner).collect()
        };
        let capability_files = paths(capabilities.files, "files");
        let binding_files = paths(capabilities.bindings, "bindings");

        let content_file = file.content.unwrap_or_default();
        let mut bytes = |value: Option<Spanned<WholeNumber>>, name: &str, default: u64| -> u64 {
            let Some(value) = value else {
                return default;
            };
            match u64::try_from(value.get_ref().0) {
                Ok(n) if (ContentBounds::MIN..=ContentBounds::MAX).contains(&n) => n,
                _ => {
                    problems.add(
                        &value.span(),
                        format!("content.{name}"),
                        format!(
                            "must be a whole number of bytes from {} to {}, got {}",
                            ContentBounds::MIN,
                            ContentBounds::MAX,
                            value.get_ref().0
                        ),
                    );
                    default
                }
            }
        };
        let content = ContentBounds {
            max_artifact_bytes: bytes(
                content_file.max_artifact_bytes,
                "max_artifact_bytes",
                ContentBounds::DEFAULT_ARTIFACT,
            ),
            max_contribution_bytes: bytes(
                content_file.max_contribution_bytes,
                "max_contribution_bytes",
                ContentBounds::DEFAULT_CONTRIBUTION,
            ),
        };

        problems.finish(Self {
            bounds,
            task_identity_prefix,
            review_source,
            capability_files,
            binding_files,
            content,
            coordination,
        })
    }

    /// How much content a contribution may carry.
    pub fn content(&self) -> ContentBounds {
        self.content
    }

    /// The same policy with content bounds `content`.
    #[must_use]
    pub fn with_content(mut self, content: ContentBounds) -> Self {
        self.content = content;
        self
    }

    /// How the Room coordinates its agents; [`Coordination::Planner`] by default.
    pub fn coordination(&self) -> Coordination {
        self.coordination
    }

    /// The same policy coordinating its agents by `coordination`.
    #[must_use]
    pub fn with_coordination(mut self, coordination: Coordination) -> Self {
        self.coordination = coordination;
        self
    }

    /// How many times the Room tries before it stops and asks for help.
    pub fn bounds(&self) -> &Bounds {
        &self.bounds
    }

    /// The prefix of objective-scoped task identities (1 to 8 ASCII upper-case letters, e.g.
    /// `P`), or `None` for plan-scoped task identities (the default).
    pub fn task_identity_prefix(&self) -> Option<&str> {
        self.task_identity_prefix.as_deref()
    }

    /// Who reviews source-bound reports; [`ReviewSource::Model`] by default.
    pub fn review_source(&self) -> ReviewSource {
        self.review_source
    }

    /// The capability catalog files the policy names, as written (empty by default).
    pub fn capability_files(&self) -> &[String] {
        &self.capability_files
    }

    /// The capability binding files the policy names, as written (empty by default).
    pub fn binding_files(&self) -> &[String] {
        &self.binding_files
    }
}

/// Whether `prefix` is 1 to 8 ASCII upper-case letters.
fn is_valid_prefix(prefix: &str) -> bool {
    (1..=PREFIX_MAX_LEN).contains(&prefix.len()) && prefix.bytes().all(|b| b.is_ascii_uppercase())
}

/// `policies/room.toml` as written, before validation.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a room policy")]
struct RoomFile {
    task_identity_prefix: Option<Spanned<String>>,
    bounds: Option<BoundsFile>,
    review: Option<ReviewFile>,
    capabilities: Option<CapabilitiesFile>,
    content: Option<ContentFile>,
    coordination: Option<CoordinationFile>,
}

/// The `[coordination]` table as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a `[coordination]` table")]
struct CoordinationFile {
    mode: Option<Spanned<String>>,
}

/// The `[content]` table as written.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a `[content]` table")]
struct ContentFile {
    max_artifact_bytes: Option<Spanned<WholeNumber>>,
    max_contribution_bytes: Option<Spanned<WholeNumber>>,
}

/// The `[bounds]` table as written.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a `[bounds]` table")]
struct BoundsFile {
    replans_without_progress: Option<Spanned<WholeNumber>>,
    interpretations_per_event: Option<Spanned<WholeNumber>>,
    failed_report_versions: Option<Spanned<WholeNumber>>,
}

/// A bound as written: any TOML integer, so that one out of range is refused by validation
/// with the bound's range rather than by the deserializer with a Rust type name.
struct WholeNumber(i128);

impl<'de> Deserialize<'de> for WholeNumber {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;

        impl serde::de::Visitor<'_> for Visitor {
            type Value = WholeNumber;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "a whole number from {} to {}", Bounds::MIN, Bounds::MAX)
            }

            fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<WholeNumber, E> {
                Ok(WholeNumber(n.into()))
            }

            fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<WholeNumber, E> {
                Ok(WholeNumber(n.into()))
            }

            fn visit_i128<E: serde::de::Error>(self, n: i128) -> Result<WholeNumber, E> {
                Ok(WholeNumber(n))
            }
        }

        deserializer.deserialize_i64(Visitor)
    }
}

/// The `[review]` table as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a `[review]` table")]
struct ReviewFile {
    source: Option<Spanned<String>>,
}

/// The `[capabilities]` table as written.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a `[capabilities]` table")]
struct CapabilitiesFile {
    files: Option<Vec<Spanned<String>>>,
    bindings: Option<Vec<Spanned<String>>>,
}

// ---------------------------------------------------------------------------------------------
// Access policy
// ---------------------------------------------------------------------------------------------

/// Which permissions each role holds, read from `policies/access.toml`.
///
/// [`AccessPolicy::default`] is the shipped `policies/access.toml`.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct AccessPolicy {
    /// Only roles holding at least one permission have an entry.
    roles: BTreeMap<Role, BTreeSet<Permission>>,
}

impl AccessPolicy {
    /// Parses an access policy: one optional `[roles.<role>]` table per role with an optional
    /// `permissions` list (a missing role or list grants nothing). Unknown keys, unknown roles,
    /// unknown permissions and a permission listed twice for one role are refused.
    pub fn from_toml(text: &str) -> Result<Self, PolicyError> {
        let file: AccessFile =
            toml::from_str(text).map_err(|e| PolicyError::from_toml(text, &e))?;
        let mut problems = Problems::new(text);
        let mut roles: BTreeMap<Role, BTreeSet<Permission>> = BTreeMap::new();

        for (name, table) in file.roles.unwrap_or_default() {
            let role = match name.get_ref().parse::<Role>() {
                Ok(role) => Some(role),
                Err(e) => {
                    problems.add(
                        &name.span(),
                        format!("roles.{}", name.get_ref()),
                        e.to_string(),
                    );
                    None
                }
            };
            let field = format!("roles.{}.permissions", name.get_ref());
            let mut granted = BTreeSet::new();
            for permission in table.permissions.unwrap_or_default() {
                match permission.get_ref().parse::<Permission>() {
                    Ok(p) => {
                        if !granted.insert(p) {
                            problems.add(
                                &permission.span(),
                                field.clone(),
                                format!("`{p}` is listed more than once"),
                            );
                        }
                    }
                    Err(e) => problems.add(&permission.span(), field.clone(), e.to_string()),
                }
            }
            if let Some(role) = role
                && !granted.is_empty()
            {
                roles.insert(role, granted);
            }
        }

        problems.finish(Self { roles })
    }

    /// Whether `role` holds `permission`.
    pub fn allows(&self, role: Role, permission: Permission) -> bool {
        self.roles
            .get(&role)
            .is_some_and(|granted| granted.contains(&permission))
    }

    /// The permissions `role` holds, in [`Permission`] order (empty when it holds none).
    pub fn permissions(&self, role: Role) -> impl Iterator<Item = Permission> + '_ {
        self.roles.get(&role).into_iter().flatten().copied()
    }
}

impl Default for AccessPolicy {
    /// The shipped `policies/access.toml`.
    fn default() -> Self {
        use Permission as P;
        let grants: [(Role, &[Permission]); 5] = [
            (
                Role::Owner,
                &[
                    P::EventPost,
                    P::ObjectiveRead,
                    P::ObjectiveControl,
                    P::LateResultDecide,
                    P::BudgetRead,
                    P::ReportRead,
                    P::PlanningUse,
                    P::MembershipManage,
                    P::MemoryManage,
                    P::ContentRedact,
                ],
            ),
            (
                Role::Operator,
                &[
                    P::EventPost,
                    P::ObjectiveRead,
                    P::ObjectiveControl,
                    P::LateResultDecide,
                    P::BudgetRead,
                    P::BudgetRaise,
                    P::BudgetAcknowledge,
                    P::OperationResolve,
                    P::ReportRead,
                    P::PlanningUse,
                    P::MemoryManage,
                ],
            ),
            (
                Role::Reviewer,
                &[
                    P::EventPost,
                    P::ObjectiveRead,
                    P::ReportRead,
                    P::ReviewRecord,
                    P::PlanningUse,
                ],
            ),
            (
                Role::Specialist,
                &[
                    P::EventPost,
                    P::ObjectiveRead,
                    P::TaskUpdateOwn,
                    P::PlanningUse,
                ],
            ),
            (
                Role::AgentHost,
                &[
                    P::EventPost,
                    P::ObjectiveRead,
                    P::TaskUpdateOwn,
                    P::PlanningUse,
                ],
            ),
        ];
        Self {
            roles: grants
                .into_iter()
                .map(|(role, granted)| (role, granted.iter().copied().collect()))
                .collect(),
        }
    }
}

/// `policies/access.toml` as written, before validation.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "an access policy")]
struct AccessFile {
    roles: Option<BTreeMap<Spanned<String>, RoleFile>>,
}

/// One `[roles.<role>]` table as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a `[roles.<role>]` table")]
struct RoleFile {
    permissions: Option<Vec<Spanned<String>>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHIPPED_ROOM: &str = include_str!("../../../policies/room.toml");
    const SHIPPED_ACCESS: &str = include_str!("../../../policies/access.toml");

    fn room_error(text: &str) -> PolicyError {
        RoomPolicy::from_toml(text).unwrap_err()
    }

    fn access_error(text: &str) -> PolicyError {
        AccessPolicy::from_toml(text).unwrap_err()
    }

    #[track_caller]
    fn assert_at(error: &PolicyError, line: usize, column: usize, field: &str) {
        assert_eq!(
            (error.line(), error.column(), error.field()),
            (line, column, field),
            "{error}"
        );
    }

    // --- defaults and shipped files ----------------------------------------------------------

    #[test]
    fn room_policy_default_has_bounds_of_three_plan_scoped_ids_model_review_and_no_files() {
        let policy = RoomPolicy::default();
        assert_eq!(policy.bounds().replans_without_progress(), 3);
        assert_eq!(policy.bounds().interpretations_per_event(), 3);
        assert_eq!(policy.bounds().failed_report_versions(), 3);
        assert_eq!(policy.task_identity_prefix(), None);
        assert_eq!(policy.review_source(), ReviewSource::Model);
        assert!(policy.capability_files().is_empty());
        assert!(policy.binding_files().is_empty());
    }

    #[test]
    fn shipped_room_policy_is_the_default_with_the_sample_capability_files() {
        let shipped = RoomPolicy::from_toml(SHIPPED_ROOM).unwrap();
        assert_eq!(shipped.bounds(), RoomPolicy::default().bounds());
        assert_eq!(shipped.task_identity_prefix(), None);
        assert_eq!(shipped.review_source(), ReviewSource::Model);
        assert_eq!(
            shipped.capability_files(),
            ["capabilities/research.yaml", "capabilities/writing.yaml"]
        );
        assert_eq!(shipped.binding_files(), ["bindings.yaml"]);
    }

    #[test]
    fn shipped_access_policy_parses_to_the_default() {
        assert_eq!(
            AccessPolicy::from_toml(SHIPPED_ACCESS).unwrap(),
            AccessPolicy::default()
        );
    }

    #[test]
    fn empty_room_policy_text_gives_the_defaults() {
        assert_eq!(RoomPolicy::from_toml("").unwrap(), RoomPolicy::default());
    }

    #[test]
    fn empty_access_policy_text_grants_nothing() {
        let policy = AccessPolicy::from_toml("").unwrap();
        for role in Role::ALL {
            assert_eq!(policy.permissions(role).count(), 0, "{role}");
        }
    }

    #[test]
    fn default_access_policy_grants_each_role_its_listed_permissions_only() {
        use Permission as P;
        let policy = AccessPolicy::default();
        let expected: [(Role, &[Permission]); 5] = [
            (
                Role::Owner,
                &[
                    P::EventPost,
                    P::ObjectiveRead,
                    P::ObjectiveControl,
                    P::LateResultDecide,
                    P::BudgetRead,
                    P::ReportRead,
                    P::PlanningUse,
                    P::MembershipManage,
                    P::MemoryManage,
                    P::ContentRedact,
                ],
            ),
            (
                Role::Operator,
                &[
                    P::EventPost,
                    P::ObjectiveRead,
                    P::ObjectiveControl,
                    P::LateResultDecide,
                    P::BudgetRead,
                    P::BudgetRaise,
                    P::BudgetAcknowledge,
                    P::OperationResolve,
                    P::ReportRead,
                    P::PlanningUse,
                    P::MemoryManage,
                ],
            ),
            (
                Role::Reviewer,
                &[
                    P::EventPost,
                    P::ObjectiveRead,
                    P::ReportRead,
                    P::ReviewRecord,
                    P::PlanningUse,
                ],
            ),
            (
                Role::Specialist,
                &[
                    P::EventPost,
                    P::ObjectiveRead,
                    P::TaskUpdateOwn,
                    P::PlanningUse,
                ],
            ),
            (
                Role::AgentHost,
                &[
                    P::EventPost,
                    P::ObjectiveRead,
                    P::TaskUpdateOwn,
                    P::PlanningUse,
                ],
            ),
        ];
        for (role, granted) in expected {
            for permission in Permission::ALL {
                assert_eq!(
                    policy.allows(role, permission),
                    granted.contains(&permission),
                    "{role} {permission}"
                );
            }
            let listed: Vec<Permission> = policy.permissions(role).collect();
            let mut sorted = granted.to_vec();
            sorted.sort();
            assert_eq!(listed, sorted, "{role}");
        }
        assert!(!policy.allows(Role::Owner, Permission::BudgetRaise));
        assert!(policy.allows(Role::Operator, Permission::BudgetRaise));
    }

    // --- valid room policies -----------------------------------------------------------------

    #[test]
    fn room_policy_reads_every_setting() {
        let policy = RoomPolicy::from_toml(
            r#"
task_identity_prefix = "P"

[bounds]
replans_without_progress = 1
interpretations_per_event = 100
failed_report_versions = 7

[review]
source = "human"

[capabilities]
files = ["capabilities/web.toml", "capabilities/code.toml"]
bindings = ["bindings/local.toml"]
"#,
        )
        .unwrap();
        assert_eq!(policy.task_identity_prefix(), Some("P"));
        assert_eq!(policy.bounds().replans_without_progress(), 1);
        assert_eq!(policy.bounds().interpretations_per_event(), 100);
        assert_eq!(policy.bounds().failed_report_versions(), 7);
        assert_eq!(policy.review_source(), ReviewSource::Human);
        assert_eq!(
            policy.capability_files(),
            ["capabilities/web.toml", "capabilities/code.toml"]
        );
        assert_eq!(policy.binding_files(), ["bindings/local.toml"]);
    }

    #[test]
    fn missing_keys_in_a_present_table_take_their_defaults() {
        let policy = RoomPolicy::from_toml("[bounds]\nfailed_report_versions = 5\n").unwrap();
        assert_eq!(policy.bounds().replans_without_progress(), 3);
        assert_eq!(policy.bounds().interpretations_per_event(), 3);
        assert_eq!(policy.bounds().failed_report_versions(), 5);
    }

    #[test]
    fn empty_task_identity_prefix_means_plan_scoped_identities() {
        let policy = RoomPolicy::from_toml("task_identity_prefix = \"\"\n").unwrap();
        assert_eq!(policy.task_identity_prefix(), None);
        assert_eq!(policy, RoomPolicy::default());
    }

    #[test]
    fn eight_letter_task_identity_prefix_is_accepted() {
        let policy = RoomPolicy::from_toml("task_identity_prefix = \"ABCDEFGH\"\n").unwrap();
        assert_eq!(policy.task_identity_prefix(), Some("ABCDEFGH"));
    }

    #[test]
    fn room_policy_survives_a_serde_round_trip() {
        let policy = RoomPolicy::from_toml(
            "task_identity_prefix = \"OBJ\"\n[review]\nsource = \"human\"\n[capabilities]\nfiles = [\"a.toml\"]\n",
        )
        .unwrap();
        let json = serde_json::to_string(&policy).unwrap();
        assert_eq!(serde_json::from_str::<RoomPolicy>(&json).unwrap(), policy);
    }

    #[test]
    fn access_policy_role_without_permissions_list_grants_nothing() {
        let policy = AccessPolicy::from_toml("[roles.owner]\n").unwrap();
        assert_eq!(policy.permissions(Role::Owner).count(), 0);
        assert_eq!(policy, AccessPolicy::from_toml("").unwrap());
    }

    // --- room policy validation --------------------------------------------------------------

    #[test]
    fn bound_of_zero_is_refused_naming_the_bound_and_its_line() {
        let error = room_error("[bounds]\nreplans_without_progress = 0\n");
        assert_at(&error, 2, 28, "bounds.replans_without_progress");
        assert_eq!(
            error.message(),
            "must be a whole number from 1 to 100, got 0"
        );
    }

    #[test]
    fn bound_above_one_hundred_is_refused() {
        let error = room_error("[bounds]\n\ninterpretations_per_event = 101\n");
        assert_at(&error, 3, 29, "bounds.interpretations_per_event");
    }

    #[test]
    fn negative_bound_is_refused() {
        let error = room_error("[bounds]\nfailed_report_versions = -1\n");
        assert_at(&error, 2, 26, "bounds.failed_report_versions");
        assert_eq!(
            error.message(),
            "must be a whole number from 1 to 100, got -1"
        );
    }

    #[test]
    fn bound_in_dotted_key_or_inline_table_is_refused_with_its_full_path() {
        let error = room_error("bounds.replans_without_progress = 0\n");
        assert_at(&error, 1, 35, "bounds.replans_without_progress");
        let error = room_error("bounds = { failed_report_versions = 0 }\n");
        assert_at(&error, 1, 37, "bounds.failed_report_versions");
    }

    #[test]
    fn lower_case_task_identity_prefix_with_digit_is_refused() {
        let error = room_error("\ntask_identity_prefix = \"p1\"\n");
        assert_at(&error, 2, 24, "task_identity_prefix");
        assert_eq!(
            error.message(),
            "must be empty or 1 to 8 ASCII upper-case letters, got `p1`"
        );
    }

    #[test]
    fn task_identity_prefix_longer_than_eight_letters_is_refused() {
        let error = room_error("task_identity_prefix = \"ABCDEFGHI\"\n");
        assert_at(&error, 1, 24, "task_identity_prefix");
    }

    #[test]
    fn unknown_review_source_is_refused() {
        let error = room_error("[review]\nsource = \"robot\"\n");
        assert_at(&error, 2, 10, "review.source");
        assert_eq!(error.message(), "must be `model` or `human`, got `robot`");
    }

    #[test]
    fn empty_capability_or_binding_path_is_refused() {
        let error = room_error("[capabilities]\nfiles = [\n  \"a.toml\",\n  \"\",\n]\n");
        assert_at(&error, 4, 3, "capabilities.files");
        assert_eq!(error.message(), "a file path must not be empty");
        let error = room_error("[capabilities]\nbindings = [\"  \"]\n");
        assert_at(&error, 2, 13, "capabilities.bindings");
    }

    #[test]
    fn earliest_problem_in_the_document_is_reported() {
        let error =
            room_error("[review]\nsource = \"robot\"\n[bounds]\nreplans_without_progress = 0\n");
        assert_at(&error, 2, 10, "review.source");
    }

    // --- TOML errors -------------------------------------------------------------------------

    #[test]
    fn syntax_error_names_the_key_on_its_line() {
        let error = room_error("[bounds]\nreplans_without_progress = = 3\n");
        assert_eq!(error.line(), 2);
        assert_eq!(error.field(), "bounds.replans_without_progress");
    }

    #[test]
    fn syntax_error_without_a_key_names_the_nearest_table() {
        let error = room_error("[bounds]\nreplans_without_progress = 3\nwhat is this\n");
        assert_eq!(error.line(), 3);
        assert_eq!(error.field(), "bounds");
    }

    #[test]
    fn syntax_error_outside_any_key_or_table_names_the_document() {
        let error = room_error("# a comment\n!!!\n");
        assert_eq!(error.line(), 2);
        assert_eq!(error.field(), "(document)");
    }

    #[test]
    fn unclosed_table_header_names_the_header() {
        let error = room_error("task_identity_prefix = \"P\"\n[review\nsource = \"human\"\n");
        assert_eq!(error.line(), 2);
        assert_eq!(error.field(), "review");
    }

    #[test]
    fn duplicate_key_is_refused_naming_it() {
        let error =
            room_error("[bounds]\nreplans_without_progress = 3\nreplans_without_progress = 4\n");
        assert_eq!(error.line(), 3);
        assert_eq!(error.field(), "bounds.replans_without_progress");
    }

    #[test]
    fn wrong_type_names_the_key_and_table_of_the_value() {
        let error = room_error("[bounds]\n# three tries\nfailed_report_versions = \"three\"\n");
        assert_at(&error, 3, 26, "bounds.failed_report_versions");
        assert_eq!(
            error.message(),
            "invalid type: string \"three\", expected a whole number from 1 to 100"
        );
    }

    #[test]
    fn fractional_or_huge_bound_is_refused() {
        let error = room_error("[bounds]\nreplans_without_progress = 2.5\n");
        assert_at(&error, 2, 28, "bounds.replans_without_progress");
        let error = room_error("[bounds]\nreplans_without_progress = 99999999999999999999\n");
        assert_at(&error, 2, 28, "bounds.replans_without_progress");
        assert_eq!(
            error.message(),
            "must be a whole number from 1 to 100, got 99999999999999999999"
        );
    }

    #[test]
    fn refused_text_with_a_line_break_is_quoted_escaped() {
        let error = room_error("[review]\nsource = \"\"\"robot\n\"\"\"\n");
        assert_at(&error, 2, 10, "review.source");
        assert_eq!(
            error.message(),
            "must be `model` or `human`, got `robot\\n`"
        );
    }

    #[test]
    fn wrong_type_for_a_top_level_key_names_it() {
        let error = room_error("task_identity_prefix = 7\n");
        assert_at(&error, 1, 24, "task_identity_prefix");
    }

    #[test]
    fn wrong_type_for_a_table_names_the_table_key() {
        let error = room_error("review = \"human\"\n");
        assert_at(&error, 1, 10, "review");
        assert!(error.message().contains("`[review]` table"), "{error}");
    }

    #[test]
    fn wrong_type_inside_a_multi_line_array_names_the_array_key() {
        let error = room_error("[capabilities]\nfiles = [\n  \"a.toml\",\n  42,\n]\n");
        assert_at(&error, 4, 3, "capabilities.files");
    }

    #[test]
    fn wrong_type_under_a_dotted_key_names_the_full_path() {
        let error = room_error("bounds.replans_without_progress = \"x\"\n");
        assert_at(&error, 1, 35, "bounds.replans_without_progress");
    }

    #[test]
    fn unknown_key_in_a_table_is_refused_naming_it() {
        let error = room_error("[review]\nsorce = \"human\"\n");
        assert_at(&error, 2, 1, "review.sorce");
        assert!(
            error.message().starts_with("unknown field `sorce`"),
            "{error}"
        );
    }

    #[test]
    fn unknown_top_level_key_is_refused_naming_it() {
        let error = room_error("review_source = \"human\"\n");
        assert_at(&error, 1, 1, "review_source");
        assert!(
            error.message().starts_with("unknown field `review_source`"),
            "{error}"
        );
    }

    #[test]
    fn unknown_table_is_refused_naming_it() {
        let error = room_error("[bounds]\nreplans_without_progress = 3\n\n[extras]\ncolour = 1\n");
        assert_eq!(error.line(), 4);
        assert_eq!(error.field(), "extras");
        assert!(
            error.message().starts_with("unknown field `extras`"),
            "{error}"
        );
    }

    // --- access policy validation ------------------------------------------------------------

    #[test]
    fn unknown_role_table_is_refused_naming_the_role() {
        let error = access_error(
            "[roles.owner]\npermissions = [\"event.post\"]\n\n[roles.admin]\npermissions = []\n",
        );
        assert_at(&error, 4, 8, "roles.admin");
        assert_eq!(
            error.message(),
            "`admin` is not a role (owner, operator, reviewer, specialist, agent_host)"
        );
    }

    #[test]
    fn unknown_permission_is_refused_at_its_string() {
        let error = access_error(
            "[roles.reviewer]\npermissions = [\n  \"event.post\",\n  \"review.write\",\n]\n",
        );
        assert_at(&error, 4, 3, "roles.reviewer.permissions");
        assert_eq!(error.message(), "`review.write` is not a permission");
    }

    #[test]
    fn permission_listed_twice_is_refused_at_the_second_listing() {
        let error = access_error(
            "[roles.operator]\npermissions = [\"budget.raise\", \"event.post\", \"budget.raise\"]\n",
        );
        assert_at(&error, 2, 46, "roles.operator.permissions");
        assert_eq!(error.message(), "`budget.raise` is listed more than once");
    }

    #[test]
    fn unknown_key_in_a_role_table_is_refused_naming_it() {
        let error = access_error("[roles.owner]\npermission = [\"event.post\"]\n");
        assert_at(&error, 2, 1, "roles.owner.permission");
        assert!(
            error.message().starts_with("unknown field `permission`"),
            "{error}"
        );
    }

    #[test]
    fn unknown_top_level_key_in_access_policy_is_refused() {
        let error = access_error("[groups.owner]\npermissions = []\n");
        assert_eq!(error.line(), 1);
        assert_eq!(error.field(), "groups.owner");
        assert!(
            error.message().starts_with("unknown field `groups`"),
            "{error}"
        );
    }

    #[test]
    fn permissions_of_the_wrong_type_are_refused_naming_the_list() {
        let error = access_error("[roles.specialist]\npermissions = \"event.post\"\n");
        assert_at(&error, 2, 15, "roles.specialist.permissions");
        assert!(error.message().contains("invalid type"), "{error}");
    }

    // --- error shape -------------------------------------------------------------------------

    #[test]
    fn error_displays_line_column_field_and_message() {
        let error = room_error("[bounds]\nreplans_without_progress = 0\n");
        assert_eq!(
            error.to_string(),
            "line 2, column 28, field `bounds.replans_without_progress`: \
             must be a whole number from 1 to 100, got 0"
        );
    }

    #[test]
    fn column_counts_characters_not_bytes() {
        let error = room_error("# é é\n[review] # ünïcode\nsource = \"rébot\"\n");
        assert_at(&error, 3, 10, "review.source");
        assert_eq!(position("é = 1", 4), (1, 4));
    }

    #[test]
    fn toml_messages_are_kept_without_trailing_period() {
        let error = room_error("[bounds\n");
        assert!(!error.message().ends_with('.'), "{error}");
        assert!(!error.message().is_empty());
    }
}
