//! The policy files a host runs under, loaded and validated together at start:
//! `room.toml` and `access.toml` (parsed by the domain), `prices.toml` (parsed by
//! `agentroom_agents::PriceTable`). A bad file is refused naming the file, line, column and
//! field; `agentroom policies check` and `agentroom serve` both go through [`load`].
//!
//! The shipped policies are built into the binary ([`PolicyFiles`]), so an installed
//! `agentroom` works from any directory; a policy folder overrides them file by file.

use std::fmt;
use std::path::PathBuf;

use agentroom_agents::prices::{PriceTable, PriceTableError};
use agentroom_domain::policy::{AccessPolicy, PolicyError, RoomPolicy};
use clap::Subcommand;

/// The files, in the order they are checked.
pub(crate) const ROOM: &str = "room.toml";
pub(crate) const ACCESS: &str = "access.toml";
pub(crate) const PRICES: &str = "prices.toml";

/// `agentroom policies …`
#[derive(Subcommand)]
pub(crate) enum Command {
    /// Check `room.toml`, `access.toml` and `prices.toml`: prints `ok` or the first problem
    /// (file, line, column, field) and exits non-zero.
    Check {
        /// The folder holding the policy files (default: `./policies` if it exists, else the
        /// built-in shipped policies).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
}

/// The shipped policy files, built in: the defaults every file of a policy folder overrides.
const SHIPPED: &[(&str, &str)] = &[
    (ROOM, include_str!("../../../policies/room.toml")),
    (ACCESS, include_str!("../../../policies/access.toml")),
    (PRICES, include_str!("../../../policies/prices.toml")),
    (
        "bindings.yaml",
        include_str!("../../../policies/bindings.yaml"),
    ),
    (
        "capabilities/research.yaml",
        include_str!("../../../policies/capabilities/research.yaml"),
    ),
    (
        "capabilities/writing.yaml",
        include_str!("../../../policies/capabilities/writing.yaml"),
    ),
];

/// The folder used when none is given, if it exists.
const DEFAULT_DIR: &str = "policies";

/// Where the policy files come from: a folder whose files override the built-in shipped ones
/// of the same name (a file it lacks is the shipped one), or the shipped ones alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PolicyFiles {
    dir: Option<PathBuf>,
}

impl PolicyFiles {
    /// The files of `dir`, which must be a folder; without one, `./policies` when it is a
    /// folder, else the shipped policies alone.
    pub(crate) fn new(dir: Option<PathBuf>) -> Result<Self, LoadError> {
        match dir {
            Some(dir) if dir.is_dir() => Ok(Self { dir: Some(dir) }),
            Some(dir) => Err(LoadError::NoFolder(dir)),
            None => {
                let default = PathBuf::from(DEFAULT_DIR);
                Ok(Self {
                    dir: default.is_dir().then_some(default),
                })
            }
        }
    }

    /// What to call these files in messages.
    pub(crate) fn describe(&self) -> String {
        match &self.dir {
            Some(dir) => format!("{} (over the built-in policies)", dir.display()),
            None => "the built-in policies".to_owned(),
        }
    }

    /// The file `name` (a path relative to the folder): its name for messages and its text.
    pub(crate) fn read(&self, name: &str) -> Result<(PathBuf, String), LoadError> {
        if let Some(dir) = &self.dir {
            let file = dir.join(name);
            match std::fs::read_to_string(&file) {
                Ok(text) => return Ok((file, text)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => return Err(LoadError::Read { file, source }),
            }
        }
        match SHIPPED.iter().find(|(shipped, _)| *shipped == name) {
            Some((_, text)) => Ok((
                PathBuf::from(format!("(built-in) {name}")),
                (*text).to_owned(),
            )),
            None => {
                let file = self
                    .dir
                    .as_ref()
                    .map_or_else(|| PathBuf::from(name), |dir| dir.join(name));
                Err(LoadError::Read {
                    file,
                    source: std::io::Error::new(
                        std::io::ErrorKind::NotFound,
                        "no such file, and none of that name is built in",
                    ),
                })
            }
        }
    }
}

/// Every policy, validated.
#[derive(Debug)]
pub(crate) struct Policies {
    /// `room.toml`.
    pub(crate) room: RoomPolicy,
    /// `access.toml`.
    pub(crate) access: AccessPolicy,
    /// `prices.toml`.
    pub(crate) prices: PriceTable,
}

/// A policy file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LoadError {
    /// The file cannot be read.
    #[error("{}: cannot read: {source}", file.display())]
    Read {
        /// The file.
        file: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a valid policy.
    #[error("{0}")]
    Invalid(FileError),
    /// The policy folder given does not exist.
    #[error("{}: no such folder of policy files", .0.display())]
    NoFolder(PathBuf),
}

/// Where a policy file is wrong and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileError {
    pub(crate) file: PathBuf,
    pub(crate) line: usize,
    pub(crate) column: usize,
    pub(crate) field: String,
    pub(crate) message: String,
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: line {}, column {}, field `{}`: {}",
            self.file.display(),
            self.line,
            self.column,
            self.field,
            self.message
        )
    }
}

/// `agentroom policies check`.
pub(crate) fn run(command: Command) -> Result<String, LoadError> {
    match command {
        Command::Check { dir } => {
            let files = PolicyFiles::new(dir)?;
            load(&files)?;
            Ok(format!(
                "ok: {} ({ROOM}, {ACCESS}, {PRICES})\n",
                files.describe()
            ))
        }
    }
}

/// Reads and validates the three files of `dir`; the first bad one is the error.
pub(crate) fn load(dir: &PolicyFiles) -> Result<Policies, LoadError> {
    let room = parse(dir, ROOM, |text| {
        RoomPolicy::from_toml(text).map_err(|e| from_policy(&e))
    })?;
    let access = parse(dir, ACCESS, |text| {
        AccessPolicy::from_toml(text).map_err(|e| from_policy(&e))
    })?;
    let prices = parse(dir, PRICES, |text| {
        PriceTable::parse(text).map_err(|e| from_prices(text, e))
    })?;
    Ok(Policies {
        room,
        access,
        prices,
    })
}

/// Where and why, without the file name (added by [`parse`]).
struct Located {
    line: usize,
    column: usize,
    field: String,
    message: String,
}

fn parse<T>(
    dir: &PolicyFiles,
    name: &str,
    parse: impl FnOnce(&str) -> Result<T, Located>,
) -> Result<T, LoadError> {
    let (file, text) = dir.read(name)?;
    parse(&text).map_err(|l| {
        LoadError::Invalid(FileError {
            file,
            line: l.line,
            column: l.column,
            field: l.field,
            message: l.message,
        })
    })
}

fn from_policy(error: &PolicyError) -> Located {
    Located {
        line: error.line(),
        column: error.column(),
        field: error.field().to_owned(),
        message: error.message().to_owned(),
    }
}

/// A price table error with its position: the TOML parser's for a parse error (read from
/// its message, which starts `TOML parse error at line L, column C`), the field's span for a
/// value the table refuses.
fn from_prices(text: &str, error: PriceTableError) -> Located {
    match error {
        PriceTableError::Parse(message) => {
            let (line, column) = parse_position(&message).unwrap_or((1, 1));
            // The parser's own message is its last line (after the caret excerpt).
            let what = message
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or(&message)
                .trim()
                .trim_end_matches('.')
                .to_owned();
            Located {
                line,
                column,
                field: field_on_line(text, line),
                message: what,
            }
        }
        PriceTableError::Invalid { field, problem } => {
            let (line, column) = span_of(text, &field).unwrap_or((1, 1));
            Located {
                line,
                column,
                field,
                message: problem,
            }
        }
        other => Located {
            line: 1,
            column: 1,
            field: "(document)".to_owned(),
            message: other.to_string(),
        },
    }
}

/// `(line, column)` from `… at line L, column C…`.
fn parse_position(message: &str) -> Option<(usize, usize)> {
    let rest = message.split_once("at line ")?.1;
    let (line, rest) = rest.split_once(", column ")?;
    let column: String = rest.chars().take_while(char::is_ascii_digit).collect();
    Some((line.trim().parse().ok()?, column.parse().ok()?))
}

/// Splits a dotted field path, keeping quoted segments whole: `models."gpt-4o".x`.
fn segments(path: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut quoted = false;
    for c in path.chars() {
        match c {
            '"' => quoted = !quoted,
            '.' if !quoted => out.push(std::mem::take(&mut current)),
            c => current.push(c),
        }
    }
    out.push(current);
    out
}

/// The 1-based line and column of the value at the dotted `path` in `text`.
fn span_of(text: &str, path: &str) -> Option<(usize, usize)> {
    use toml::de::{DeTable, DeValue};
    let root = DeTable::parse(text).ok()?;
    let mut table = root.get_ref();
    let mut span = None;
    for segment in segments(path) {
        let (key, value) = table.iter().find(|(k, _)| k.get_ref() == &segment)?;
        span = Some(key.span());
        match value.get_ref() {
            DeValue::Table(inner) => table = inner,
            _ => span = Some(value.span()),
        }
    }
    span.map(|s| position(text, s.start))
}

/// The 1-based line and column (in characters) of byte `offset` in `text`.
fn position(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
    (line, column)
}

/// The dotted field a line of TOML concerns: the last `[table]` header above it, and the key
/// on it if it has one (`bounds.reasoner.max_input_tokens`).
fn field_on_line(text: &str, line: usize) -> String {
    let mut table = String::new();
    let mut key = None;
    for (n, content) in text.lines().enumerate().take(line) {
        let trimmed = content.trim();
        if trimmed.starts_with('[') {
            table = trimmed
                .trim_start_matches('[')
                .split(']')
                .next()
                .unwrap_or("")
                .trim()
                .to_owned();
            key = None;
        } else if n + 1 == line {
            key = trimmed
                .split_once('=')
                .map(|(k, _)| k.trim().to_owned())
                .filter(|k| !k.is_empty() && !k.starts_with('#'));
        }
    }
    match (table.is_empty(), key) {
        (true, None) => "(document)".to_owned(),
        (true, Some(key)) => key,
        (false, None) => table,
        (false, Some(key)) => format!("{table}.{key}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_read_from_lines() {
        let text = "a = 1\n[models.\"x\"]\ninput = 2\n\n[bounds.reasoner]\nmax = 0\n";
        assert_eq!(field_on_line(text, 1), "a");
        assert_eq!(field_on_line(text, 3), "models.\"x\".input");
        assert_eq!(field_on_line(text, 5), "bounds.reasoner");
        assert_eq!(field_on_line(text, 6), "bounds.reasoner.max");
        assert_eq!(span_of(text, "models.\"x\".input"), Some((3, 9)));
        assert_eq!(span_of(text, "bounds.reasoner.max"), Some((6, 7)));
    }
}
