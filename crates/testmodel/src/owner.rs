//! The conventions the test model understands in an owner's message: the first line says what
//! the owner wants, a `Criteria:` section lists `- id: text` lines, a `Corpus:` section lists
//! `[id] uri | title | fact sentence` lines (the only facts the model knows).

/// One line of the `Corpus:` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CorpusLine {
    /// The source id (`s1`).
    pub(crate) id: String,
    /// Where the fact comes from.
    pub(crate) uri: String,
    /// The source's title.
    pub(crate) title: String,
    /// The fact sentence, the excerpt a contribution cites word for word.
    pub(crate) fact: String,
}

/// An owner's message, read by the conventions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct OwnerMessage {
    /// The first non-empty line before any section, trimmed.
    pub(crate) first_line: String,
    /// The `Criteria:` lines as (id, text).
    pub(crate) criteria: Vec<(String, String)>,
    /// The `Corpus:` lines.
    pub(crate) corpus: Vec<CorpusLine>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Section {
    None,
    Criteria,
    Corpus,
}

impl OwnerMessage {
    /// Reads `text`. A section ends at the first non-empty line that is not one of its items;
    /// an item that does not have its section's shape is skipped.
    pub(crate) fn parse(text: &str) -> Self {
        let mut message = Self::default();
        let mut section = Section::None;
        let mut seen_section = false;
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            if line.eq_ignore_ascii_case("criteria:") {
                section = Section::Criteria;
                seen_section = true;
                continue;
            }
            if line.eq_ignore_ascii_case("corpus:") {
                section = Section::Corpus;
                seen_section = true;
                continue;
            }
            match section {
                Section::Criteria => match criterion(line) {
                    Some(item) => message.criteria.push(item),
                    None if is_item(line) => {}
                    None => section = Section::None,
                },
                Section::Corpus => match corpus_line(line) {
                    Some(item) => message.corpus.push(item),
                    None if line.starts_with('[') => {}
                    None => section = Section::None,
                },
                Section::None => {
                    if message.first_line.is_empty() && !seen_section {
                        line.clone_into(&mut message.first_line);
                    }
                }
            }
        }
        message
    }
}

fn is_item(line: &str) -> bool {
    line.starts_with("- ") || line.starts_with("* ")
}

/// `- id: text`.
fn criterion(line: &str) -> Option<(String, String)> {
    if !is_item(line) {
        return None;
    }
    let (id, text) = line[2..].split_once(':')?;
    let (id, text) = (id.trim(), text.trim());
    (!id.is_empty() && !text.is_empty()).then(|| (id.to_owned(), text.to_owned()))
}

/// `[id] uri | title | fact sentence` (the fact may itself hold `|`).
fn corpus_line(line: &str) -> Option<CorpusLine> {
    let rest = line.strip_prefix('[')?;
    let (id, rest) = rest.split_once(']')?;
    let mut parts = rest.splitn(3, '|').map(str::trim);
    let (uri, title, fact) = (parts.next()?, parts.next()?, parts.next()?);
    let id = id.trim();
    if id.is_empty() || uri.is_empty() || title.is_empty() || fact.is_empty() {
        return None;
    }
    Some(CorpusLine {
        id: id.to_owned(),
        uri: uri.to_owned(),
        title: title.to_owned(),
        fact: fact.to_owned(),
    })
}

/// The corpus of several messages, in the order given: a later line with an id already seen
/// replaces the earlier one in its place (an owner's correction may fix a fact).
pub(crate) fn merged_corpus<'a>(messages: impl IntoIterator<Item = &'a str>) -> Vec<CorpusLine> {
    let mut corpus: Vec<CorpusLine> = Vec::new();
    for text in messages {
        for line in OwnerMessage::parse(text).corpus {
            match corpus.iter_mut().find(|known| known.id == line.id) {
                Some(known) => *known = line,
                None => corpus.push(line),
            }
        }
    }
    corpus
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sections_are_read_by_their_conventions() {
        let text = "\nSummarise how leases fence writers\n\
            Please be brief.\n\
            Criteria:\n\
            - cites-fencing: the report says \"leases fence stale writers\"\n\
            - not an item\n\
            \n\
            Corpus:\n\
            [s1] https://example.org/a | Leases | Leases fence stale writers.\n\
            [s2] https://example.org/b | Pipes | A | in a fact is kept.\n\
            [s3] missing parts\n\
            Thanks.\n\
            [s4] https://example.org/c | Late | Not in the corpus any more.\n";
        let message = OwnerMessage::parse(text);
        assert_eq!(message.first_line, "Summarise how leases fence writers");
        assert_eq!(
            message.criteria,
            [(
                "cites-fencing".to_owned(),
                "the report says \"leases fence stale writers\"".to_owned()
            )]
        );
        let facts: Vec<(&str, &str)> = message
            .corpus
            .iter()
            .map(|c| (c.id.as_str(), c.fact.as_str()))
            .collect();
        assert_eq!(
            facts,
            [
                ("s1", "Leases fence stale writers."),
                ("s2", "A | in a fact is kept.")
            ]
        );
        assert_eq!(message.corpus[1].title, "Pipes");
    }

    #[test]
    fn a_later_corpus_line_replaces_one_with_its_id() {
        let corpus = merged_corpus([
            "Ask\nCorpus:\n[s1] u | t | old\n[s2] u | t | two",
            "Fix\nCorpus:\n[s1] u | t | new\n[s3] u | t | three",
        ]);
        let facts: Vec<&str> = corpus.iter().map(|c| c.fact.as_str()).collect();
        assert_eq!(facts, ["new", "two", "three"]);
    }
}
