//! Errors in Capability and Binding files: where (file, document, line, column, field path) and
//! what was expected instead.

use std::fmt;

/// Where in a set of YAML files something is.
///
/// Documents are numbered from 1 in the order of the file's YAML stream; lines and columns are
/// 1-based, columns counted in characters. The field path is dotted with list indices in
/// brackets (`spec.inputs[2].enum[0]`); it is empty for a whole document.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Location {
    file: String,
    document: usize,
    line: usize,
    column: usize,
    path: String,
}

impl Location {
    pub(crate) fn new(
        file: &str,
        document: usize,
        line: usize,
        column: usize,
        path: impl Into<String>,
    ) -> Self {
        Self {
            file: file.to_owned(),
            document,
            line,
            column,
            path: path.into(),
        }
    }

    /// The same place, naming the field at `path`.
    pub(crate) fn with_path(&self, path: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            ..self.clone()
        }
    }

    /// The file, as its caller named it.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// The 1-based index of the YAML document within the file; 0 for the whole file.
    pub fn document(&self) -> usize {
        self.document
    }

    /// The 1-based line.
    pub fn line(&self) -> usize {
        self.line
    }

    /// The 1-based column, in characters.
    pub fn column(&self) -> usize {
        self.column
    }

    /// The field path within the document (`spec.inputs[0].type`), empty for the document.
    pub fn path(&self) -> &str {
        &self.path
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.file)?;
        // Document 0 is the whole file (one that could not be read).
        if self.document > 0 {
            write!(
                f,
                ": document {}, line {}, column {}",
                self.document, self.line, self.column
            )?;
        }
        if !self.path.is_empty() {
            write!(f, ", field `{}`", self.path)?;
        }
        Ok(())
    }
}

/// What is wrong with a resource.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ErrorKind {
    /// The text is not YAML.
    #[error("not valid YAML: {0}")]
    Syntax(String),
    /// A required field is absent.
    #[error("missing: expected {expected}")]
    Missing {
        /// What the field should hold.
        expected: String,
    },
    /// A field holds something else than what it should.
    #[error("expected {expected}, found {found}")]
    Expected {
        /// What the field should hold.
        expected: String,
        /// What it holds.
        found: String,
    },
    /// A field that the rest of its definition rules out.
    #[error("not allowed: {reason}")]
    NotAllowed {
        /// Why.
        reason: String,
    },
    /// A name given twice where names must be unique.
    #[error("{what} `{name}` is defined twice (first at {first})")]
    Duplicate {
        /// What kind of thing (`Capability`, `Binding`, `input`, `output`).
        what: &'static str,
        /// The repeated name.
        name: String,
        /// Where it was first defined.
        first: Box<Location>,
    },
    /// Two binding rules for the same selector: never a silent choice.
    #[error("conflicting binding rules: {selector} is already bound at {first}")]
    Conflict {
        /// The selector both rules name.
        selector: String,
        /// The first rule.
        first: Box<Location>,
    },
    /// Deprecated capabilities whose replacements lead back to themselves.
    #[error("replacement cycle: {}", .0.join(" -> "))]
    ReplacementCycle(Vec<String>),
    /// Capabilities that require themselves, directly or not.
    #[error("requirement cycle: {}", .0.join(" -> "))]
    RequirementCycle(Vec<String>),
    /// A file that cannot be read (reported by the caller that reads files).
    #[error("cannot read: {0}")]
    Unreadable(String),
}

/// One problem in a resource file: where and what.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{location}: {kind}")]
pub struct ResourceError {
    location: Location,
    kind: ErrorKind,
}

impl ResourceError {
    pub(crate) fn new(location: Location, kind: ErrorKind) -> Self {
        Self { location, kind }
    }

    /// A file its caller could not read; `reason` says why.
    pub fn unreadable(file: &str, reason: impl Into<String>) -> Self {
        Self::new(
            Location::new(file, 0, 0, 0, ""),
            ErrorKind::Unreadable(reason.into()),
        )
    }

    /// Where.
    pub fn location(&self) -> &Location {
        &self.location
    }

    /// What.
    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }
}

/// Every problem found in a set of resource files, in file and position order.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ResourceErrors(Vec<ResourceError>);

impl ResourceErrors {
    /// `Ok(value)` when `errors` is empty, else the sorted errors.
    pub(crate) fn check<T>(errors: Vec<ResourceError>, value: T) -> Result<T, Self> {
        if errors.is_empty() {
            Ok(value)
        } else {
            Err(Self::from_errors(errors))
        }
    }

    /// `errors` in file and position order, without repeats (e.g. a caller's unreadable files
    /// merged with the problems of the files it could read).
    pub fn from_errors(mut errors: Vec<ResourceError>) -> Self {
        errors.sort_by(|a, b| a.location.cmp(&b.location));
        errors.dedup();
        Self(errors)
    }

    /// The errors, in file and position order.
    pub fn errors(&self) -> &[ResourceError] {
        &self.0
    }

    /// The errors, owned.
    pub fn into_errors(self) -> Vec<ResourceError> {
        self.0
    }
}

impl fmt::Display for ResourceErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, error) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}
