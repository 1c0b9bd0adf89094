//! The specialist: a production task copies the owner's corpus (from the `owner_message` and
//! `owner_correction` data) as facts citing their source ids; a report task copies the fact
//! lines of its `dependency` data and re-cites the documents given as `source` data and each
//! dependency. With nothing to copy it fails, saying what its prompt lacked.

use serde_json::{Value, json};

use crate::capability::Capability;
use crate::owner::merged_corpus;
use crate::prompt::{Prompt, cited_ids};

/// The reply to a specialist prompt.
pub(crate) fn reply(prompt: &Prompt) -> Value {
    let task = prompt.brief.get("task").unwrap_or(&Value::Null);
    let field = |name: &str| task.get(name).and_then(Value::as_str).unwrap_or_default();
    let capability = prompt
        .of_kind("capability")
        .map(Capability::from_block)
        .find(|c| c.name == field("capability"));
    if field("kind") == "report" {
        report(prompt, field("title"), capability.as_ref())
    } else {
        production(prompt, capability.as_ref())
    }
}

fn production(prompt: &Prompt, capability: Option<&Capability>) -> Value {
    let corpus = merged_corpus(
        prompt
            .data
            .iter()
            .filter(|b| b.kind == "owner_message" || b.kind == "owner_correction")
            .map(|b| b.text.as_str()),
    );
    if corpus.is_empty() {
        return failure("no corpus in my prompt");
    }
    let mut body = String::from("## Facts\n\n");
    for line in &corpus {
        body.push_str(&format!("- {} [{}]\n", line.fact, line.id));
    }
    let facts: Vec<String> = corpus.iter().map(|c| c.fact.clone()).collect();
    let sources: Vec<Value> = corpus
        .iter()
        .map(|c| {
            json!({"kind": "document", "id": c.id, "uri": c.uri, "title": c.title,
                   "excerpt": c.fact})
        })
        .collect();
    contribution(&body, sources, capability, &facts)
}

fn report(prompt: &Prompt, task_title: &str, capability: Option<&Capability>) -> Value {
    let dependencies: Vec<_> = prompt.of_kind("dependency").collect();
    if dependencies.is_empty() {
        return failure("no dependency content in my prompt");
    }
    // The objective's first line: its title may be the owner's whole message, criteria and
    // corpus included, which a report does not repeat.
    let title = prompt
        .of_kind("objective")
        .next()
        .and_then(|b| b.text.lines().map(str::trim).find(|l| !l.is_empty()))
        .unwrap_or(task_title);
    let mut lines: Vec<&str> = Vec::new();
    for dependency in &dependencies {
        for line in dependency.text.lines() {
            let line = line.trim();
            if line.starts_with("- ") && !cited_ids(line).is_empty() && !lines.contains(&line) {
                lines.push(line);
            }
        }
    }
    let mut body = format!("# Report: {title}\n\n");
    for line in &lines {
        body.push_str(line);
        body.push('\n');
    }
    let facts: Vec<String> = lines.iter().map(|line| sentence(line)).collect();

    let mut sources: Vec<Value> = Vec::new();
    let mut cited: Vec<&str> = Vec::new();
    for source in prompt.of_kind("source") {
        if source.attr("kind_of_source") == Some("contribution") || cited.contains(&&*source.id) {
            continue;
        }
        let mut document = json!({"kind": "document", "id": source.id,
            "uri": source.attr("uri").unwrap_or_default(),
            "title": source.attr("title").unwrap_or_default(),
            "excerpt": source.text});
        if let Some(at) = source
            .attr("retrieved_at")
            .and_then(|t| t.parse::<i64>().ok())
        {
            document["retrieved_at"] = json!(at);
        }
        if let Some(digest) = source.attr("content_digest") {
            document["content_digest"] = json!(digest);
        }
        sources.push(document);
        cited.push(&source.id);
    }
    let mut contributions: Vec<&str> = Vec::new();
    for dependency in &dependencies {
        if !dependency.id.is_empty() && !contributions.contains(&&*dependency.id) {
            contributions.push(&dependency.id);
            sources.push(json!({"kind": "contribution", "id": dependency.id}));
        }
    }
    contribution(&body, sources, capability, &facts)
}

/// A fact line's sentence: without its leading `- ` and trailing `[id]` markers.
fn sentence(line: &str) -> String {
    let mut text = line.strip_prefix("- ").unwrap_or(line).trim_end();
    while text.ends_with(']') {
        match text.rfind('[') {
            Some(open) => text = text[..open].trim_end(),
            None => break,
        }
    }
    text.to_owned()
}

fn contribution(
    body: &str,
    sources: Vec<Value>,
    capability: Option<&Capability>,
    facts: &[String],
) -> Value {
    let outputs = capability
        .map(|c| c.outputs(body, facts))
        .unwrap_or_default();
    json!({"result": "contribution", "body": body, "sources": sources, "outputs": outputs})
}

fn failure(reason: &str) -> Value {
    json!({"result": "failure", "reason": reason})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fact_lines_sentence_drops_the_bullet_and_markers() {
        assert_eq!(
            sentence("- Leases fence writers. [s1] [s2]"),
            "Leases fence writers."
        );
        assert_eq!(sentence("- No marker"), "No marker");
    }
}
