//! A capability as its `capability` data block describes it (JSON text), read leniently: a
//! field's type may be written `kind` or `type`, phase and replacement may sit under `status`,
//! camelCase or snake_case; and the outputs a contribution gives for the declared ones.

use serde_json::{Map, Value, json};

use crate::prompt::DataBlock;

/// A declared input or output: its name and type (`string`, `array`, …; empty when unsaid).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Field {
    pub(crate) name: String,
    pub(crate) kind: String,
}

/// What the test model knows of a capability.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Capability {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) inputs: Vec<Field>,
    pub(crate) outputs: Vec<Field>,
    /// Whether a provider is bound to it.
    pub(crate) has_provider: bool,
    /// Its effect is `external-write` (plan admission refuses it, T4).
    pub(crate) external_write: bool,
    /// Unavailable, deprecated, or replaced by another.
    pub(crate) retired: bool,
}

impl Capability {
    /// Reads a `capability` block: its name is the JSON's `name`, else the block's id. Each
    /// field is looked up at the top level, then under `spec`, `status`, `metadata`,
    /// `binding`, `resolution` and `metadata.annotations` (`agentroom.io/effect`), so both a
    /// flat description and the resource's own shape are read.
    pub(crate) fn from_block(block: &DataBlock) -> Self {
        let json: Value = serde_json::from_str(&block.text).unwrap_or(Value::Null);
        let layers: Vec<&Value> = std::iter::once(&json)
            .chain(
                ["spec", "status", "metadata", "binding", "resolution"]
                    .iter()
                    .filter_map(|name| json.get(*name))
                    .filter(|v| v.is_object()),
            )
            .chain(
                json.pointer("/metadata/annotations")
                    .filter(|v| v.is_object()),
            )
            .collect();
        let text = |names: &[&str]| {
            layers
                .iter()
                .find_map(|layer| field_str(layer, names))
                .unwrap_or_default()
        };
        let has = |names: &[&str]| layers.iter().any(|layer| present(layer, names));
        let list = |name: &str| {
            layers
                .iter()
                .find_map(|layer| layer.get(name).filter(|v| !v.is_null()))
        };
        let name = match text(&["name"]) {
            "" => block.id.clone(),
            name => name.to_owned(),
        };
        let phase = text(&["phase"]).to_ascii_lowercase();
        let effect: String = text(&["effect", "agentroom.io/effect"])
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .collect::<String>()
            .to_ascii_lowercase();
        Self {
            name,
            description: text(&["description"]).to_owned(),
            inputs: fields(list("inputs")),
            outputs: fields(list("outputs")),
            has_provider: has(&["provider", "providers"]),
            external_write: effect == "externalwrite",
            retired: phase == "unavailable"
                || phase == "deprecated"
                || has(&["replacement", "replaced_by", "replacedBy"])
                || has(&["deprecation_message", "deprecationMessage"]),
        }
    }

    /// Whether it mentions writing or a report in its name or description.
    pub(crate) fn writes_reports(&self) -> bool {
        let text = format!("{} {}", self.name, self.description).to_lowercase();
        text.contains("writ") || text.contains("report")
    }

    /// Whether it declares a string input `name` (or one of unsaid type).
    pub(crate) fn takes_string(&self, name: &str) -> bool {
        self.inputs
            .iter()
            .any(|f| f.name == name && (f.kind.is_empty() || f.kind == "string"))
    }

    /// The value of each declared output: a string is `body`, an array the `facts`, an object
    /// `{}`, a number or integer how many facts there are, a boolean `true`; a field of unsaid
    /// type gets the body.
    pub(crate) fn outputs(&self, body: &str, facts: &[String]) -> Map<String, Value> {
        self.outputs
            .iter()
            .map(|field| {
                let value = match field.kind.as_str() {
                    "array" => json!(facts),
                    "object" => json!({}),
                    "number" | "integer" => json!(facts.len()),
                    "boolean" => json!(true),
                    _ => json!(body),
                };
                (field.name.clone(), value)
            })
            .collect()
    }
}

/// The first of `names` that is a string field of `value`.
fn field_str<'a>(value: &'a Value, names: &[&str]) -> Option<&'a str> {
    names
        .iter()
        .find_map(|name| value.get(*name).and_then(Value::as_str))
}

/// Whether one of `names` is a field of `value` with something in it (not null, `""`, `[]`,
/// `{}` or `false`).
fn present(value: &Value, names: &[&str]) -> bool {
    names.iter().any(|name| match value.get(*name) {
        None | Some(Value::Null | Value::Bool(false)) => false,
        Some(Value::String(s)) => !s.trim().is_empty(),
        Some(Value::Array(a)) => !a.is_empty(),
        Some(Value::Object(o)) => !o.is_empty(),
        Some(_) => true,
    })
}

/// Inputs or outputs: an array of `{name, kind|type, …}` (the type may also sit under
/// `schema`), or an object from name to such a definition.
fn fields(value: Option<&Value>) -> Vec<Field> {
    let kind_of = |def: &Value| {
        field_str(def, &["kind", "type", "value_type", "valueType"])
            .or_else(|| {
                def.get("schema")
                    .and_then(|s| field_str(s, &["kind", "type"]))
            })
            .unwrap_or_default()
            .to_ascii_lowercase()
    };
    match value {
        Some(Value::Array(defs)) => defs
            .iter()
            .filter_map(|def| {
                let name = field_str(def, &["name"])?;
                Some(Field {
                    name: name.to_owned(),
                    kind: kind_of(def),
                })
            })
            .collect(),
        Some(Value::Object(defs)) => defs
            .iter()
            .map(|(name, def)| Field {
                name: name.clone(),
                kind: kind_of(def),
            })
            .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(id: &str, text: Value) -> DataBlock {
        let prompt = crate::prompt::Prompt::parse(&format!(
            "{{}}\n\nRoom content:\n<data kind=\"capability\" id=\"{id}\">\n{}\n</data>\n",
            text.to_string()
                .replace('&', "&amp;")
                .replace('"', "&quot;")
                .replace('<', "&lt;")
                .replace('>', "&gt;")
        ));
        prompt.data[0].clone()
    }

    #[test]
    fn fields_are_read_whether_written_kind_or_type() {
        let capability = Capability::from_block(&block(
            "research",
            json!({
                "description": "Find sources",
                "inputs": [{"name": "topic", "type": "string"}, {"name": "year", "kind": "integer"}],
                "outputs": [{"name": "findings", "kind": "array"}, {"name": "n", "type": "integer"}],
                "provider": "sam", "effect": "read", "phase": "Available",
                "deprecation_message": null, "replacement": null
            }),
        ));
        assert_eq!(capability.name, "research");
        assert!(capability.has_provider && !capability.retired && !capability.external_write);
        assert!(capability.takes_string("topic") && !capability.takes_string("year"));
        let outputs = capability.outputs("body", &["a".to_owned(), "b".to_owned()]);
        assert_eq!(
            Value::Object(outputs),
            json!({"findings": ["a", "b"], "n": 2})
        );
    }

    #[test]
    fn effect_phase_and_replacement_are_read_in_either_spelling() {
        let publish = Capability::from_block(&block(
            "publish",
            json!({"name": "publish", "effect": "external_write", "provider": null}),
        ));
        assert!(publish.external_write && !publish.has_provider);
        let old = Capability::from_block(&block(
            "old",
            json!({"status": {"phase": "Deprecated", "replacement": "new"}}),
        ));
        assert!(old.retired);
        let replaced = Capability::from_block(&block("r", json!({"replacement": "new"})));
        assert!(replaced.retired);
        // The resource's own shape: metadata, spec, annotations' effect, a binding.
        let resource = Capability::from_block(&block(
            "x",
            json!({"metadata": {"name": "writing",
                                "annotations": {"agentroom.io/effect": "external-write"}},
                   "spec": {"description": "Draft a report",
                            "outputs": [{"name": "report", "type": "string"}]},
                   "status": {"phase": "Available"},
                   "binding": {"provider": "sue"}}),
        ));
        assert_eq!(resource.name, "writing");
        assert!(resource.writes_reports() && resource.has_provider && !resource.retired);
        assert!(resource.external_write);
        assert_eq!(resource.outputs.len(), 1);
    }
}
