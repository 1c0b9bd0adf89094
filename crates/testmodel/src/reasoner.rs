//! The reasoner: a plan of a `gather` task with the Room's production capability and a
//! `write` task with its report capability, using only the capabilities given as data; after
//! an `unmet` review (R3), the same plan with one more production task per unmet criterion and
//! a report that depends on every production task.

use serde_json::{Map, Value, json};

use crate::capability::Capability;
use crate::owner::OwnerMessage;
use crate::prompt::Prompt;

/// The criterion planned when the owner's message lists none.
const DEFAULT_CRITERION: (&str, &str) = ("answers-the-request", "answers the request");

/// The reply to a reasoner prompt.
pub(crate) fn reply(prompt: &Prompt) -> Value {
    let message = prompt.brief_str("message").unwrap_or_default();
    // The owner's request: the message that made the objective when it is given as data (so
    // a corrective call plans the same topic), else the message interpreted now.
    let request = prompt
        .of_kind("owner_message")
        .next()
        .map_or(message, |block| block.text.as_str());
    let request = OwnerMessage::parse(request);

    let mut capabilities: Vec<Capability> = prompt
        .of_kind("capability")
        .map(Capability::from_block)
        .collect();
    if capabilities.is_empty() {
        return challenge("Which capabilities does this room have? None were given to me.");
    }
    capabilities.sort_by(|a, b| a.name.cmp(&b.name));
    let usable: Vec<&Capability> = capabilities
        .iter()
        .filter(|c| !c.external_write && !c.retired)
        .collect();
    let names = || {
        capabilities
            .iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let Some(report) = first_bound(usable.iter().copied().filter(|c| c.writes_reports())) else {
        return challenge(&format!(
            "Which capability writes the report? None of {} that I may use says it writes or \
             reports.",
            names()
        ));
    };
    let Some(production) = first_bound(usable.iter().copied().filter(|c| c.name != report.name))
    else {
        return challenge(&format!(
            "Which capability gathers the facts? Only {} writes, and nothing else of {} may be \
             used.",
            report.name,
            names()
        ));
    };

    let mut inputs = Map::new();
    if production.takes_string("topic") && !request.first_line.is_empty() {
        inputs.insert("topic".to_owned(), json!(request.first_line));
    }
    let gather_title = if request.first_line.is_empty() {
        "Gather facts".to_owned()
    } else {
        format!("Gather facts: {}", request.first_line)
    };
    let production_task = |key: &str, title: &str| {
        json!({"key": key, "title": title, "capability": production.name,
               "inputs": inputs, "deps": [], "kind": "production"})
    };

    let given_criteria = prompt.brief_array("criteria");
    let unmet = prompt.brief_array("unmet");
    let progress = prompt.brief_array("progress");
    let progress_title = |key: &str| {
        progress
            .iter()
            .find(|p| p.get("key").and_then(Value::as_str) == Some(key))
            .and_then(|p| p.get("title"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };

    let criteria: Vec<Value> = if given_criteria.is_empty() {
        let mut listed = request.criteria.clone();
        if listed.is_empty() {
            listed = OwnerMessage::parse(message).criteria;
        }
        if listed.is_empty() {
            listed.push((
                DEFAULT_CRITERION.0.to_owned(),
                DEFAULT_CRITERION.1.to_owned(),
            ));
        }
        listed
            .into_iter()
            .map(|(id, text)| json!({"id": id, "text": text}))
            .collect()
    } else {
        given_criteria.to_vec()
    };

    // `gather` keeps its spec (reused when completed, O3); so does every earlier corrective
    // task, by the title progress shows.
    let mut tasks = vec![production_task(
        "gather",
        &progress_title("gather").unwrap_or(gather_title),
    )];
    let mut keys = vec!["gather".to_owned()];
    if !unmet.is_empty() {
        for entry in progress {
            let (Some(key), Some(title)) = (
                entry.get("key").and_then(Value::as_str),
                entry.get("title").and_then(Value::as_str),
            ) else {
                continue;
            };
            if key.starts_with("gather-") && !keys.iter().any(|k| k == key) {
                tasks.push(production_task(key, title));
                keys.push(key.to_owned());
            }
        }
        let taken = |key: &str, keys: &[String]| {
            keys.iter().any(|k| k == key)
                || progress
                    .iter()
                    .any(|p| p.get("key").and_then(Value::as_str) == Some(key))
        };
        let mut n = progress.len() + 1;
        for entry in unmet {
            let criterion = entry
                .get("criterion")
                .and_then(Value::as_str)
                .unwrap_or("a criterion");
            let evidence = entry
                .get("evidence")
                .and_then(Value::as_str)
                .unwrap_or("unmet");
            let mut key = format!("gather-{n}");
            while taken(&key, &keys) {
                n += 1;
                key = format!("gather-{n}");
            }
            n += 1;
            tasks.push(production_task(
                &key,
                &format!("Find evidence for {criterion}: {evidence}"),
            ));
            keys.push(key);
        }
    }
    tasks.push(json!({"key": "write", "title": "Write the report",
                      "capability": report.name, "deps": keys, "kind": "report"}));

    let explanation = if unmet.is_empty() {
        format!(
            "Gather the facts the owner supplied with {}, then write the report from them with {}.",
            production.name, report.name
        )
    } else {
        let which: Vec<&str> = unmet
            .iter()
            .filter_map(|u| u.get("criterion").and_then(Value::as_str))
            .collect();
        format!(
            "The review found {} unmet: gather evidence for it with {}, then write a new report \
             with {}.",
            which.join(", "),
            production.name,
            report.name
        )
    };
    json!({"kind": "plan", "explanation": explanation, "criteria": criteria, "tasks": tasks})
}

/// The first (by name) of `candidates` that has a provider, else the first.
fn first_bound<'a>(
    candidates: impl Iterator<Item = &'a Capability> + Clone,
) -> Option<&'a Capability> {
    candidates
        .clone()
        .find(|c| c.has_provider)
        .or_else(|| candidates.into_iter().next())
}

fn challenge(question: &str) -> Value {
    json!({"kind": "challenge", "question": question})
}
