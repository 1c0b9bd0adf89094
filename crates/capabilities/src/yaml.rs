//! YAML text to a small tree that keeps the line and column of every node, on top of saphyr
//! (YAML 1.2: `yes`, `no` and `on` are strings, not booleans). No IO: it reads the text it is
//! handed.

use saphyr::{LoadableYamlNode, MarkedYaml, Scalar, YamlData};

/// A YAML node and where it starts (1-based line and column).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Node {
    pub(crate) value: Value,
    pub(crate) line: usize,
    pub(crate) column: usize,
}

/// A mapping key and where it starts.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Key {
    pub(crate) name: String,
    pub(crate) line: usize,
    pub(crate) column: usize,
}

/// The value of a node.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Seq(Vec<Node>),
    /// In document order.
    Map(Vec<(Key, Node)>),
    /// A node the loader could not make sense of (a scalar contradicting its tag, a complex
    /// mapping key); the string says what.
    Bad(String),
}

impl Node {
    /// How this node reads in an error message: `a string `x``, `a list`, ...
    pub(crate) fn describe(&self) -> String {
        match &self.value {
            Value::Null => "nothing (null)".to_owned(),
            Value::Bool(b) => format!("a boolean `{b}`"),
            Value::Int(i) => format!("a number `{i}`"),
            Value::Float(x) => format!("a number `{x}`"),
            Value::Str(s) => format!("a string `{}`", s.escape_debug()),
            Value::Seq(_) => "a list".to_owned(),
            Value::Map(_) => "a mapping".to_owned(),
            Value::Bad(why) => format!("an unreadable value ({why})"),
        }
    }

    /// The node as JSON, or the node that has no JSON form (a non-finite number, a bad value).
    pub(crate) fn to_json(&self) -> Result<serde_json::Value, &Node> {
        use serde_json::Value as J;
        Ok(match &self.value {
            Value::Null => J::Null,
            Value::Bool(b) => J::Bool(*b),
            Value::Int(i) => J::from(*i),
            Value::Float(x) => J::Number(serde_json::Number::from_f64(*x).ok_or(self)?),
            Value::Str(s) => J::String(s.clone()),
            Value::Seq(items) => J::Array(
                items
                    .iter()
                    .map(Node::to_json)
                    .collect::<Result<Vec<_>, _>>()?,
            ),
            Value::Map(entries) => J::Object(
                entries
                    .iter()
                    .map(|(k, v)| v.to_json().map(|v| (k.name.clone(), v)))
                    .collect::<Result<serde_json::Map<_, _>, _>>()?,
            ),
            Value::Bad(_) => return Err(self),
        })
    }
}

/// A YAML syntax error: where, and the parser's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SyntaxError {
    pub(crate) document: usize,
    pub(crate) line: usize,
    pub(crate) column: usize,
    pub(crate) message: String,
}

/// The deepest nesting of lists and mappings a resource file may have, counting what its
/// aliases expand to. Resources need about a dozen levels. Without a bound, a few kilobytes of
/// `[[[[…` made building, converting and dropping the tree overflow the stack and abort the
/// process (issue 17, found by fuzzing).
pub(crate) const MAX_DEPTH: usize = 64;

/// Refuses `text` when its nesting goes deeper than [`MAX_DEPTH`], from saphyr's event
/// stream, before any tree is built (iteratively: the stream is flat). An alias counts as
/// deep as the node its anchor names. Syntax errors are left to the loader, which reports
/// them.
fn check_depth(text: &str) -> Result<(), SyntaxError> {
    use saphyr_parser::{Event, Parser};
    // Per open list or mapping: its anchor and the height of its tallest child so far.
    let mut open: Vec<(usize, usize)> = Vec::new();
    let mut heights: std::collections::HashMap<usize, usize> = std::collections::HashMap::new();
    for event in Parser::new_from_str(text) {
        let Ok((event, span)) = event else {
            return Ok(());
        };
        let (anchor, height) = match event {
            Event::SequenceStart(anchor, _) | Event::MappingStart(anchor, _) => {
                open.push((anchor, 0));
                (0, 0)
            }
            Event::SequenceEnd | Event::MappingEnd => match open.pop() {
                Some((anchor, tallest)) => (anchor, tallest + 1),
                None => (0, 0),
            },
            Event::Scalar(_, _, anchor, _) => (anchor, 1),
            Event::Alias(id) => (0, heights.get(&id).copied().unwrap_or(1)),
            _ => (0, 0),
        };
        if open.len() + height > MAX_DEPTH + 1 || open.len() > MAX_DEPTH {
            let line = span.start.line();
            return Err(SyntaxError {
                document: document_at_line(text, line),
                line,
                column: span.start.col() + 1,
                message: format!("lists and mappings nest deeper than {MAX_DEPTH} levels"),
            });
        }
        if anchor > 0 {
            heights.insert(anchor, height);
        }
        if let Some((_, tallest)) = open.last_mut() {
            *tallest = (*tallest).max(height);
        }
    }
    Ok(())
}

/// Every document of `text`, in order; an empty document is `None`.
pub(crate) fn documents(text: &str) -> Result<Vec<Option<Node>>, SyntaxError> {
    check_depth(text)?;
    let docs = MarkedYaml::load_from_str(text).map_err(|e| {
        let line = e.marker().line();
        SyntaxError {
            document: document_at_line(text, line),
            line,
            column: e.marker().col() + 1,
            message: e.info().to_owned(),
        }
    })?;
    Ok(docs
        .iter()
        .map(convert)
        .map(|n| (n.value != Value::Null).then_some(n))
        .collect())
}

/// The 1-based document that line `line` belongs to, read from the `---` markers before it (used
/// only for syntax errors, when the parser gives no documents).
fn document_at_line(text: &str, line: usize) -> usize {
    let mut document = 1;
    let mut opened = false;
    for l in text.lines().take(line.saturating_sub(1)) {
        let starts = l == "---" || l.starts_with("--- ") || l.starts_with("---\t");
        if starts {
            if opened {
                document += 1;
            }
            opened = true;
        } else if !l.trim().is_empty() && !l.trim_start().starts_with('#') {
            opened = true;
        }
    }
    document
}

fn convert(node: &MarkedYaml<'_>) -> Node {
    let value = match &node.data {
        YamlData::Value(scalar) => scalar_value(scalar),
        YamlData::Representation(text, _, _) => Value::Str(text.to_string()),
        YamlData::Sequence(items) => Value::Seq(items.iter().map(convert).collect()),
        YamlData::Mapping(entries) => Value::Map(
            entries
                .iter()
                .map(|(k, v)| {
                    let key = convert(k);
                    let name = match key.value {
                        Value::Str(s) => s,
                        Value::Int(i) => i.to_string(),
                        Value::Bool(b) => b.to_string(),
                        Value::Float(x) => x.to_string(),
                        Value::Null => "null".to_owned(),
                        Value::Seq(_) | Value::Map(_) | Value::Bad(_) => String::new(),
                    };
                    let value = if name.is_empty() {
                        Node {
                            value: Value::Bad("a mapping key must be a plain name".to_owned()),
                            line: key.line,
                            column: key.column,
                        }
                    } else {
                        convert(v)
                    };
                    (
                        Key {
                            name,
                            line: key.line,
                            column: key.column,
                        },
                        value,
                    )
                })
                .collect(),
        ),
        YamlData::Tagged(_, inner) => return convert(inner),
        YamlData::Alias(_) => Value::Bad("an unresolved alias".to_owned()),
        YamlData::BadValue => Value::Bad("a scalar that contradicts its tag".to_owned()),
    };
    Node {
        value,
        line: node.span.start.line(),
        column: node.span.start.col() + 1,
    }
}

fn scalar_value(scalar: &Scalar<'_>) -> Value {
    match scalar {
        Scalar::Null => Value::Null,
        Scalar::Boolean(b) => Value::Bool(*b),
        Scalar::Integer(i) => Value::Int(*i),
        Scalar::FloatingPoint(x) => Value::Float(x.into_inner()),
        Scalar::String(s) => Value::Str(s.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_keep_their_line_and_column() {
        let docs = documents("a: 1\nb:\n  - x: 'y'\n").unwrap();
        let Some(Node {
            value: Value::Map(entries),
            ..
        }) = &docs[0]
        else {
            panic!("{docs:?}")
        };
        let (key, list) = &entries[1];
        assert_eq!((key.name.as_str(), key.line, key.column), ("b", 2, 1));
        let Value::Seq(items) = &list.value else {
            panic!()
        };
        assert_eq!((items[0].line, items[0].column), (3, 5));
    }

    #[test]
    fn empty_documents_are_none_and_keep_their_number() {
        let docs = documents("---\na: 1\n---\n---\nb: 2\n").unwrap();
        assert_eq!(docs.len(), 3);
        assert!(docs[0].is_some() && docs[1].is_none() && docs[2].is_some());
    }

    #[test]
    fn yaml_1_2_reads_yes_and_no_as_strings() {
        let docs = documents("a: no\nb: true\n").unwrap();
        let json = docs[0].as_ref().unwrap().to_json().unwrap();
        assert_eq!(json, serde_json::json!({"a": "no", "b": true}));
    }

    #[test]
    fn a_syntax_error_names_its_document_and_line() {
        let error = documents("a: 1\n---\nb: 2\n---\nc: [1,\n").unwrap_err();
        assert_eq!(error.document, 3);
        assert_eq!(error.line, 6);
        let error = documents("---\na: 1\n---\nb: : :\n").unwrap_err();
        assert_eq!(error.document, 2);
    }

    #[test]
    fn a_duplicate_key_is_a_syntax_error() {
        let error = documents("a: 1\na: 2\n").unwrap_err();
        assert_eq!(error.line, 2);
        assert!(error.message.contains("duplicate"), "{error:?}");
    }

    #[test]
    fn nesting_is_bounded_counting_what_aliases_expand_to() {
        let deep = |n: usize| format!("a: {}{}\n", "[".repeat(n), "]".repeat(n));
        assert!(documents(&deep(MAX_DEPTH - 1)).is_ok());
        for text in [
            deep(MAX_DEPTH + 1),
            deep(100_000),
            "- ".repeat(100_000),
            "{a: ".repeat(100_000),
            // Each anchor is 40 deep; each alias adds its anchor's height.
            format!(
                "a: &a {open}{close}\nb: &b {open}*a{close}\nc: {open}*b{close}\n",
                open = "[".repeat(40),
                close = "]".repeat(40)
            ),
        ] {
            let error = documents(&text).unwrap_err();
            // Very deep flow collections stop saphyr's own parser first.
            let said = ["deeper than 64", "recursion limit exceeded"];
            assert!(said.iter().any(|s| error.message.contains(s)), "{error:?}");
            assert_eq!(error.document, 1, "{error:?}");
            assert!(error.line >= 1, "{error:?}");
        }
    }

    #[test]
    fn anchors_and_aliases_are_expanded() {
        let docs = documents("a: &x {q: 1}\nb: *x\n").unwrap();
        let json = docs[0].as_ref().unwrap().to_json().unwrap();
        assert_eq!(json, serde_json::json!({"a": {"q": 1}, "b": {"q": 1}}));
    }
}
