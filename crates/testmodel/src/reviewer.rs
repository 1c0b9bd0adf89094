//! The reviewer: one verdict per criterion of the brief, resting only on the `report` data
//! and the documents given as `source` data. A criterion with a "quoted phrase" is `met` when
//! the phrase is in a source's excerpt (quoting that sentence) or in the report (quoting that
//! line), else `unmet`; one without is `met` when a report line cites a given source. With no
//! report in the prompt every verdict is `unknown`.

use serde_json::{Value, json};

use crate::prompt::{DataBlock, Prompt, cited_ids, normalize};

/// The reply to a reviewer prompt.
pub(crate) fn reply(prompt: &Prompt) -> Value {
    let criteria = criteria(prompt);
    let Some(report) = prompt.of_kind("report").next() else {
        let verdicts: Vec<Value> = criteria
            .iter()
            .map(|(id, _)| verdict(id, "unknown", "the report text is not in my prompt"))
            .collect();
        return json!({ "verdicts": verdicts });
    };
    let sources: Vec<&DataBlock> = prompt
        .of_kind("source")
        .filter(|s| s.attr("kind_of_source") != Some("contribution") && !s.id.is_empty())
        .collect();
    let verdicts: Vec<Value> = criteria
        .iter()
        .map(|(id, text)| match quoted_phrase(text) {
            Some(phrase) => by_phrase(id, &phrase, &report.text, &sources),
            None => by_citation(id, &report.text, &sources),
        })
        .collect();
    json!({ "verdicts": verdicts })
}

/// The brief's criteria, else the `criteria` data's `id: text` lines.
fn criteria(prompt: &Prompt) -> Vec<(String, String)> {
    let given: Vec<(String, String)> = prompt
        .brief_array("criteria")
        .iter()
        .filter_map(|c| {
            let id = c.get("id").and_then(Value::as_str)?;
            let text = c.get("text").and_then(Value::as_str).unwrap_or_default();
            Some((id.to_owned(), text.to_owned()))
        })
        .collect();
    if !given.is_empty() {
        return given;
    }
    prompt
        .of_kind("criteria")
        .flat_map(|b| b.text.lines())
        .filter_map(|line| {
            let (id, text) = line.split_once(':')?;
            Some((id.trim().to_owned(), text.trim().to_owned()))
        })
        .filter(|(id, _)| !id.is_empty())
        .collect()
}

/// The first phrase between double quotes (straight or curly), whitespace-normalized.
fn quoted_phrase(text: &str) -> Option<String> {
    [('"', '"'), ('\u{201c}', '\u{201d}')]
        .into_iter()
        .find_map(|(open, close)| {
            let (_, rest) = text.split_once(open)?;
            let (phrase, _) = rest.split_once(close)?;
            let phrase = normalize(phrase);
            (!phrase.is_empty()).then_some(phrase)
        })
}

fn by_phrase(id: &str, phrase: &str, report: &str, sources: &[&DataBlock]) -> Value {
    for source in sources {
        let excerpt = normalize(&source.text);
        if let Some(at) = excerpt.find(phrase) {
            let quote = sentence_around(&excerpt, at, at + phrase.len());
            return met(
                id,
                &format!("source {} says \"{phrase}\"", source.id),
                &[source.id.as_str()],
                quote,
            );
        }
    }
    let given: Vec<&str> = sources.iter().map(|s| s.id.as_str()).collect();
    for line in report.lines() {
        if normalize(line).contains(phrase) {
            let mut cited: Vec<String> = cited_ids(line)
                .into_iter()
                .filter(|c| given.contains(&c.as_str()))
                .collect();
            if cited.is_empty() {
                cited.extend(given.first().map(|s| (*s).to_owned()));
            }
            let cited: Vec<&str> = cited.iter().map(String::as_str).collect();
            return met(
                id,
                &format!("the report says \"{phrase}\""),
                &cited,
                without_bullet(line),
            );
        }
    }
    if normalize(report).contains(phrase) {
        // Across a line break: the phrase itself is the quote.
        return met(
            id,
            &format!("the report says \"{phrase}\""),
            &given[..given.len().min(1)],
            phrase,
        );
    }
    verdict(
        id,
        "unmet",
        &format!("neither the report nor its sources show \"{phrase}\""),
    )
}

fn by_citation(id: &str, report: &str, sources: &[&DataBlock]) -> Value {
    for line in report.lines() {
        let cited = cited_ids(line);
        if let Some(source) = cited.iter().find(|c| sources.iter().any(|s| s.id == **c)) {
            return met(
                id,
                &format!("the report cites source {source}"),
                &[source.as_str()],
                without_bullet(line),
            );
        }
    }
    verdict(
        id,
        "unmet",
        "no line of the report cites a source given to me",
    )
}

/// The sentence of `text` holding `start..end`: from after the previous `. `, `! ` or `? `
/// to the next one's punctuation (or the text's ends).
fn sentence_around(text: &str, start: usize, end: usize) -> &str {
    let stops = [". ", "! ", "? "];
    let from = stops
        .iter()
        .filter_map(|stop| text[..start].rfind(stop).map(|at| at + stop.len()))
        .max()
        .unwrap_or(0);
    let to = stops
        .iter()
        .filter_map(|stop| text[end..].find(stop).map(|at| end + at + 1))
        .min()
        .unwrap_or(text.len());
    &text[from..to]
}

fn without_bullet(line: &str) -> &str {
    let line = line.trim();
    line.strip_prefix("- ").unwrap_or(line)
}

fn met(id: &str, evidence: &str, sources: &[&str], quote: &str) -> Value {
    json!({"criterion": id, "verdict": "met", "evidence": evidence, "sources": sources,
           "quote": quote})
}

fn verdict(id: &str, verdict: &str, evidence: &str) -> Value {
    json!({"criterion": id, "verdict": verdict, "evidence": evidence, "sources": []})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_quote_is_the_sentence_that_holds_the_phrase() {
        let text = "First one. Leases fence stale writers. Last one";
        let at = text.find("fence").unwrap();
        assert_eq!(
            sentence_around(text, at, at + 5),
            "Leases fence stale writers."
        );
        assert_eq!(sentence_around("Only one", 0, 4), "Only one");
    }

    #[test]
    fn phrases_are_read_between_straight_or_curly_quotes() {
        assert_eq!(
            quoted_phrase("says \"leases  fence\" today").as_deref(),
            Some("leases fence")
        );
        assert_eq!(
            quoted_phrase("says \u{201c}x y\u{201d}").as_deref(),
            Some("x y")
        );
        assert_eq!(quoted_phrase("no phrase"), None);
        assert_eq!(quoted_phrase("empty \"\" phrase"), None);
    }
}
