//! Size limits on what a planning message may carry. A value above its limit is a
//! `schema_violation`, and nothing is stored.

/// A task title, in UTF-8 bytes.
pub const MAX_TITLE_BYTES: usize = 1024;
/// A task or plan description, in UTF-8 bytes.
pub const MAX_DESCRIPTION_BYTES: usize = 64 * 1024;
/// Task metadata, as compact JSON, in bytes.
pub const MAX_METADATA_BYTES: usize = 64 * 1024;
/// A plan name, in UTF-8 bytes.
pub const MAX_NAME_BYTES: usize = 1024;
/// A column name, a status, an assignee or an id, in UTF-8 bytes.
pub const MAX_LABEL_BYTES: usize = 256;
/// Columns in one plan.
pub const MAX_COLUMNS: usize = 64;
/// Dependencies of one task.
pub const MAX_DEPS: usize = 1024;
/// One message (one stdio line or one HTTP body), in bytes.
pub const MAX_MESSAGE_BYTES: usize = 1024 * 1024;
