//! Reading and validating Capability and Binding resources from YAML text, one or many
//! documents per file. Every problem is collected (not only the first), each with its file,
//! document, line, column, field path and what was expected. No IO: callers hand in text.

use std::collections::BTreeMap;

use agentroom_domain::catalog::CapabilityEffect;
use agentroom_domain::ids::{ObjectiveId, PrincipalId, TaskKey};
use serde_json::{Map, Value as Json};

use crate::error::{ErrorKind, Location, ResourceError, ResourceErrors};
use crate::format::Format;
use crate::resource::{
    API_VERSION, Binding, BindingRule, Capability, CapabilityRef, CapabilitySpec, CapabilityStatus,
    DEFAULT_NAMESPACE, EFFECT_ANNOTATION, InputDef, Metadata, OutputDef, Phase, Requirement,
    Selector, is_dns_label, is_field_name,
};
use crate::schema::{ValueSchema, ValueType};
use crate::yaml::{self, Key, Node, Value};

/// Capabilities and bindings read from one or more files, validated one by one (the checks
/// across resources, such as duplicate names or conflicting rules, are
/// [`crate::Catalog::new`]'s).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Resources {
    capabilities: Vec<Capability>,
    bindings: Vec<Binding>,
}

impl Resources {
    /// No resources.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads every document of `text`; `file` names the text in errors.
    pub fn parse(file: &str, text: &str) -> Result<Self, ResourceErrors> {
        Self::parse_all([(file, text)])
    }

    /// Reads several files, reporting the problems of all of them together.
    pub fn parse_all<'a>(
        files: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, ResourceErrors> {
        let (resources, errors) = Self::read_all(files);
        ResourceErrors::check(errors, resources)
    }

    /// Reads several files: the resources that are valid, and the problems of the others.
    pub(crate) fn read_all<'a>(
        files: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> (Self, Vec<ResourceError>) {
        let mut resources = Self::new();
        let mut errors = Vec::new();
        for (file, text) in files {
            resources.read(file, text, &mut errors);
        }
        (resources, errors)
    }

    /// Adds the resources of `other`.
    pub fn extend(&mut self, other: Resources) {
        self.capabilities.extend(other.capabilities);
        self.bindings.extend(other.bindings);
    }

    /// The capabilities, in file order.
    pub fn capabilities(&self) -> &[Capability] {
        &self.capabilities
    }

    /// The bindings, in file order.
    pub fn bindings(&self) -> &[Binding] {
        &self.bindings
    }

    pub(crate) fn into_parts(self) -> (Vec<Capability>, Vec<Binding>) {
        (self.capabilities, self.bindings)
    }

    fn read(&mut self, file: &str, text: &str, errors: &mut Vec<ResourceError>) {
        let documents = match yaml::documents(text) {
            Ok(documents) => documents,
            Err(e) => {
                errors.push(ResourceError::new(
                    Location::new(file, e.document, e.line, e.column, ""),
                    ErrorKind::Syntax(e.message),
                ));
                return;
            }
        };
        for (i, node) in documents.iter().enumerate() {
            let Some(node) = node else { continue };
            let before = errors.len();
            let mut doc = Doc {
                file,
                document: i + 1,
                errors,
            };
            match doc.resource(node) {
                Some(Resource::Capability(c)) => self.capabilities.push(*c),
                Some(Resource::Binding(b)) => self.bindings.push(*b),
                // Every refusal pushes its error; this guards against one that would not.
                None if errors.len() == before => errors.push(ResourceError::new(
                    Location::new(file, i + 1, node.line, node.column, ""),
                    ErrorKind::Expected {
                        expected: "a valid resource".to_owned(),
                        found: "one that cannot be read".to_owned(),
                    },
                )),
                None => {}
            }
        }
    }
}

/// One resource read from a document.
enum Resource {
    Capability(Box<Capability>),
    Binding(Box<Binding>),
}

/// The fields of one mapping, read one by one; what is never read is kept as `extra`.
struct Fields<'n> {
    node: &'n Node,
    entries: &'n [(Key, Node)],
    path: String,
    read: Vec<&'static str>,
}

impl<'n> Fields<'n> {
    /// The value of `key`; `null` counts as absent.
    fn get(&mut self, key: &'static str) -> Option<&'n Node> {
        self.read.push(key);
        self.entries
            .iter()
            .find(|(k, _)| k.name == key)
            .map(|(_, v)| v)
            .filter(|v| v.value != Value::Null)
    }

    /// Whether `key` is present (even as `null`).
    fn has(&self, key: &str) -> bool {
        self.entries.iter().any(|(k, _)| k.name == key)
    }

    /// The path of field `key`.
    fn path_of(&self, key: &str) -> String {
        join(&self.path, key)
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// Reads one document, pushing its problems.
struct Doc<'a> {
    file: &'a str,
    document: usize,
    errors: &'a mut Vec<ResourceError>,
}

impl Doc<'_> {
    fn location(&self, node: &Node, path: &str) -> Location {
        Location::new(self.file, self.document, node.line, node.column, path)
    }

    fn fail(&mut self, node: &Node, path: &str, kind: ErrorKind) {
        let location = self.location(node, path);
        self.errors.push(ResourceError::new(location, kind));
    }

    fn expected(&mut self, node: &Node, path: &str, expected: impl Into<String>) {
        self.fail(
            node,
            path,
            ErrorKind::Expected {
                expected: expected.into(),
                found: node.describe(),
            },
        );
    }

    fn not_allowed(&mut self, node: &Node, path: &str, reason: impl Into<String>) {
        self.fail(
            node,
            path,
            ErrorKind::NotAllowed {
                reason: reason.into(),
            },
        );
    }

    /// A missing field, reported at the mapping that should hold it.
    fn missing(&mut self, fields: &Fields<'_>, key: &str, expected: impl Into<String>) {
        let path = fields.path_of(key);
        self.fail(
            fields.node,
            &path,
            ErrorKind::Missing {
                expected: expected.into(),
            },
        );
    }

    fn mapping<'n>(&mut self, node: &'n Node, path: &str) -> Option<Fields<'n>> {
        match &node.value {
            Value::Map(entries) => Some(Fields {
                node,
                entries,
                path: path.to_owned(),
                read: Vec::new(),
            }),
            _ => {
                self.expected(node, path, "a mapping");
                None
            }
        }
    }

    fn list<'n>(&mut self, node: &'n Node, path: &str) -> Option<&'n [Node]> {
        match &node.value {
            Value::Seq(items) => Some(items),
            _ => {
                self.expected(node, path, "a list");
                None
            }
        }
    }

    fn json(&mut self, node: &Node, path: &str) -> Option<Json> {
        match node.to_json() {
            Ok(json) => Some(json),
            Err(bad) => {
                self.expected(bad, path, "a finite number, string, list or mapping");
                None
            }
        }
    }

    /// Every field of `fields` that was not read, as JSON.
    fn extra(&mut self, fields: &Fields<'_>) -> Map<String, Json> {
        let mut extra = Map::new();
        for (key, value) in fields.entries {
            if fields.read.contains(&key.name.as_str()) {
                continue;
            }
            if let Some(json) = self.json(value, &fields.path_of(&key.name)) {
                extra.insert(key.name.clone(), json);
            }
        }
        extra
    }

    /// A non-empty string.
    fn string(&mut self, node: &Node, path: &str) -> Option<String> {
        match &node.value {
            Value::Str(s) if !s.trim().is_empty() => Some(s.clone()),
            _ => {
                self.expected(node, path, "a non-empty string");
                None
            }
        }
    }

    fn optional_string(&mut self, fields: &mut Fields<'_>, key: &'static str) -> Option<String> {
        let node = fields.get(key)?;
        self.string(node, &fields.path_of(key))
    }

    fn required_string(
        &mut self,
        fields: &mut Fields<'_>,
        key: &'static str,
        expected: &str,
    ) -> Option<String> {
        match fields.get(key) {
            Some(node) => self.string(node, &fields.path_of(key)),
            None => {
                self.missing(fields, key, expected);
                None
            }
        }
    }

    /// A string that must satisfy `valid`, which `expected` describes.
    fn checked_string(
        &mut self,
        node: &Node,
        path: &str,
        expected: &str,
        valid: impl Fn(&str) -> bool,
    ) -> Option<String> {
        match &node.value {
            Value::Str(s) if valid(s) => Some(s.clone()),
            _ => {
                self.expected(node, path, expected);
                None
            }
        }
    }

    fn dns_label(&mut self, node: &Node, path: &str) -> Option<String> {
        self.checked_string(
            node,
            path,
            "a DNS label (1 to 63 lower-case letters, digits or `-`, starting and ending with a letter or digit)",
            is_dns_label,
        )
    }

    fn field_name(&mut self, node: &Node, path: &str) -> Option<String> {
        self.checked_string(
            node,
            path,
            "a name of letters, digits, `_` or `-`, starting with a letter (camelCase allowed)",
            is_field_name,
        )
    }

    /// A boolean flag, `false` when absent; `None` (with the error pushed) when not a boolean.
    fn flag(&mut self, fields: &mut Fields<'_>, key: &'static str) -> Option<bool> {
        let Some(node) = fields.get(key) else {
            return Some(false);
        };
        match node.value {
            Value::Bool(b) => Some(b),
            _ => {
                self.expected(node, &fields.path_of(key), "`true` or `false`");
                None
            }
        }
    }

    fn string_map(
        &mut self,
        fields: &mut Fields<'_>,
        key: &'static str,
    ) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        let path = fields.path_of(key);
        let Some(node) = fields.get(key) else {
            return out;
        };
        let Some(map) = self.mapping(node, &path) else {
            return out;
        };
        for (k, v) in map.entries {
            let entry_path = join(&path, &k.name);
            match &v.value {
                Value::Str(s) => {
                    out.insert(k.name.clone(), s.clone());
                }
                _ => self.expected(v, &entry_path, "a string"),
            }
        }
        out
    }

    // -----------------------------------------------------------------------------------------
    // Documents
    // -----------------------------------------------------------------------------------------

    fn resource(&mut self, node: &Node) -> Option<Resource> {
        let mut root = self.mapping(node, "")?;
        match root.get("apiVersion") {
            Some(v) => match &v.value {
                Value::Str(s) if s == API_VERSION => {}
                _ => self.expected(v, "apiVersion", format!("`{API_VERSION}`")),
            },
            None => self.missing(&root, "apiVersion", format!("`{API_VERSION}`")),
        }
        let kind_expected = "`Capability` or `Binding`";
        let kind = match root.get("kind") {
            Some(v) => match &v.value {
                Value::Str(s) if s == "Capability" || s == "Binding" => s.clone(),
                _ => {
                    self.expected(v, "kind", kind_expected);
                    return None;
                }
            },
            None => {
                self.missing(&root, "kind", kind_expected);
                return None;
            }
        };
        let origin = self.location(node, "");
        let metadata = match root.get("metadata") {
            Some(m) => self.metadata(m),
            None => {
                self.missing(&root, "metadata", "a mapping with `name` and `namespace`");
                None
            }
        };
        if kind == "Capability" {
            self.capability(&mut root, metadata, origin)
                .map(|c| Resource::Capability(Box::new(c)))
        } else {
            self.binding(&mut root, metadata, origin)
                .map(|b| Resource::Binding(Box::new(b)))
        }
    }

    fn metadata(&mut self, node: &Node) -> Option<Metadata> {
        let mut fields = self.mapping(node, "metadata")?;
        let name = self.dns_name(&mut fields, "name");
        let namespace = self.dns_name(&mut fields, "namespace");
        let labels = self.string_map(&mut fields, "labels");
        let annotations = self.string_map(&mut fields, "annotations");
        let extra = self.extra(&fields);
        Some(Metadata {
            name: name?,
            namespace: namespace?,
            labels,
            annotations,
            extra,
        })
    }

    fn dns_name(&mut self, fields: &mut Fields<'_>, key: &'static str) -> Option<String> {
        match fields.get(key) {
            Some(node) => self.dns_label(node, &fields.path_of(key)),
            None => {
                self.missing(fields, key, "a DNS label");
                None
            }
        }
    }

    // -----------------------------------------------------------------------------------------
    // Capability
    // -----------------------------------------------------------------------------------------

    fn capability(
        &mut self,
        root: &mut Fields<'_>,
        metadata: Option<Metadata>,
        origin: Location,
    ) -> Option<Capability> {
        let namespace = metadata
            .as_ref()
            .map_or(DEFAULT_NAMESPACE, |m| m.namespace.as_str())
            .to_owned();
        let effect = metadata.as_ref().and_then(|m| self.effect(root, m));
        let spec = match root.get("spec") {
            Some(node) => self.capability_spec(node, &namespace),
            None => {
                self.missing(root, "spec", "a mapping with a `description`");
                None
            }
        };
        let status = match root.get("status") {
            Some(node) => self.status(node, &namespace),
            None => Some(CapabilityStatus::available()),
        };
        Some(Capability {
            metadata: metadata?,
            spec: spec?,
            status: status?,
            effect: effect?,
            origin,
        })
    }

    /// The T4 effect from the `agentroom.io/effect` annotation: a misspelt value is an error, so
    /// an external write is never mistaken for a read.
    fn effect(&mut self, root: &mut Fields<'_>, metadata: &Metadata) -> Option<CapabilityEffect> {
        let Some(value) = metadata.annotations.get(EFFECT_ANNOTATION) else {
            return Some(CapabilityEffect::ReadOrDraft);
        };
        match value.as_str() {
            "read" | "draft" => Some(CapabilityEffect::ReadOrDraft),
            "external-write" => Some(CapabilityEffect::ExternalWrite),
            _ => {
                let at = root
                    .get("metadata")
                    .and_then(|m| find(m, "annotations"))
                    .and_then(|a| find(a, EFFECT_ANNOTATION))
                    .unwrap_or(root.node);
                let path = format!("metadata.annotations.{EFFECT_ANNOTATION}");
                self.expected(at, &path, "`read`, `draft` or `external-write`");
                None
            }
        }
    }

    fn capability_spec(&mut self, node: &Node, namespace: &str) -> Option<CapabilitySpec> {
        let mut fields = self.mapping(node, "spec")?;
        let description = self.required_string(
            &mut fields,
            "description",
            "a non-empty string saying what the capability provides",
        );
        let display_name = self.optional_string(&mut fields, "displayName");
        let category = self.optional_string(&mut fields, "category");
        let inputs = self.inputs(&mut fields);
        let outputs = self.outputs(&mut fields);
        let requirements = self.requirements(&mut fields, namespace);
        let extra = self.extra(&fields);
        Some(CapabilitySpec {
            description: description?,
            display_name,
            category,
            inputs: inputs?,
            outputs: outputs?,
            requirements: requirements?,
            extra,
        })
    }

    /// Checks that the `name` fields of a list's items are unique.
    fn unique_names(&mut self, what: &'static str, named: &[(String, &Node, String)]) {
        let mut seen: BTreeMap<&str, Location> = BTreeMap::new();
        for (name, node, path) in named {
            if let Some(first) = seen.get(name.as_str()) {
                let first = Box::new(first.clone());
                self.fail(
                    node,
                    path,
                    ErrorKind::Duplicate {
                        what,
                        name: name.clone(),
                        first,
                    },
                );
            } else {
                seen.insert(name, self.location(node, path));
            }
        }
    }

    fn inputs(&mut self, spec: &mut Fields<'_>) -> Option<Vec<InputDef>> {
        let path = spec.path_of("inputs");
        let Some(node) = spec.get("inputs") else {
            return Some(Vec::new());
        };
        let items = self.list(node, &path)?;
        let mut inputs = Some(Vec::new());
        let mut named = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let item_path = format!("{path}[{i}]");
            let input = self.input(item, &item_path);
            if let Some(input) = &input {
                named.push((input.name.clone(), item, format!("{item_path}.name")));
            }
            match (input, inputs.as_mut()) {
                (Some(input), Some(all)) => all.push(input),
                _ => inputs = None,
            }
        }
        self.unique_names("input", &named);
        inputs
    }

    fn input(&mut self, node: &Node, path: &str) -> Option<InputDef> {
        let mut fields = self.mapping(node, path)?;
        let name = match fields.get("name") {
            Some(n) => self.field_name(n, &fields.path_of("name")),
            None => {
                self.missing(&fields, "name", "the input's name");
                None
            }
        };
        let schema = self.schema(&mut fields);
        Some(InputDef {
            name: name?,
            schema: schema?,
        })
    }

    fn value_type(&mut self, node: &Node, path: &str) -> Option<ValueType> {
        let found = match &node.value {
            Value::Str(s) => ValueType::parse(s),
            _ => None,
        };
        if found.is_none() {
            let names: Vec<&str> = ValueType::ALL.iter().map(|t| t.name()).collect();
            self.expected(node, path, format!("one of {}", names.join(", ")));
        }
        found
    }

    /// A value definition: `type` and everything that must agree with it.
    fn schema(&mut self, fields: &mut Fields<'_>) -> Option<ValueSchema> {
        let type_path = fields.path_of("type");
        let value_type = match fields.get("type") {
            Some(node) => self.value_type(node, &type_path),
            None => {
                self.missing(
                    fields,
                    "type",
                    "a type (string, number, integer, boolean, object or array)",
                );
                None
            }
        };
        let required = self.flag(fields, "required");
        let description = self.optional_string(fields, "description");
        let item_type = fields
            .get("itemType")
            .map(|node| (node, self.value_type(node, &fields.path_of("itemType"))));
        let format = fields.get("format").map(|node| {
            let path = fields.path_of("format");
            (node, self.string(node, &path).map(|f| Format::parse(&f)))
        });
        let properties = fields.get("objectProperties").map(|node| {
            let path = fields.path_of("objectProperties");
            (node, self.properties(node, &path))
        });
        let enum_node = fields.get("enum");
        let default_node = fields.get("default");
        let extra = self.extra(fields);
        let value_type = value_type?;

        let mut schema = ValueSchema::of(value_type);
        schema.required = required.unwrap_or(false);
        let mut ok = required.is_some();
        schema.description = description;
        schema.extra = extra;
        if let Some((node, item_type)) = item_type {
            if value_type == ValueType::Array {
                schema.item_type = item_type;
                ok &= item_type.is_some();
            } else {
                let path = fields.path_of("itemType");
                self.not_allowed(
                    node,
                    &path,
                    format!("`itemType` applies only to `type: array`, and this is `{value_type}`"),
                );
                ok = false;
            }
        }
        if let Some((node, format)) = format {
            let strings = value_type == ValueType::String
                || (value_type == ValueType::Array
                    && matches!(schema.item_type, None | Some(ValueType::String)));
            if strings {
                schema.format = format.clone();
                ok &= format.is_some();
            } else {
                let path = fields.path_of("format");
                self.not_allowed(node, &path, format!("`format` applies only to strings (or arrays of strings), and this is `{value_type}`"));
                ok = false;
            }
        }
        if let Some((node, properties)) = properties {
            if value_type == ValueType::Object {
                match properties {
                    Some(p) => schema.properties = p,
                    None => ok = false,
                }
            } else {
                let path = fields.path_of("objectProperties");
                self.not_allowed(node, &path, format!("`objectProperties` applies only to `type: object`, and this is `{value_type}`"));
                ok = false;
            }
        }
        if let Some(node) = enum_node {
            let path = fields.path_of("enum");
            match self.enum_values(node, &path, &schema) {
                Some(values) => schema.allowed = Some(values),
                None => ok = false,
            }
        }
        if let Some(node) = default_node {
            let path = fields.path_of("default");
            let default = self.json(node, &path);
            match default.map(|d| schema.check(&path, &d)) {
                Some(Ok(value)) => schema.default = Some(value),
                Some(Err(e)) => {
                    let expected = format!("a default that is {}", e.expected());
                    self.fail(
                        node,
                        e.path(),
                        ErrorKind::Expected {
                            expected,
                            found: e.found().to_owned(),
                        },
                    );
                    ok = false;
                }
                None => ok = false,
            }
        }
        ok.then_some(schema)
    }

    fn enum_values(&mut self, node: &Node, path: &str, schema: &ValueSchema) -> Option<Vec<Json>> {
        let items = self.list(node, path)?;
        if items.is_empty() {
            self.expected(node, path, "a non-empty list of allowed values");
            return None;
        }
        let mut values = Some(Vec::new());
        for (i, item) in items.iter().enumerate() {
            let item_path = format!("{path}[{i}]");
            let checked = self
                .json(item, &item_path)
                .map(|value| schema.check(&item_path, &value));
            match checked {
                Some(Ok(value)) => {
                    if let Some(all) = values.as_mut() {
                        all.push(value);
                    }
                }
                Some(Err(e)) => {
                    self.fail(
                        item,
                        e.path(),
                        ErrorKind::Expected {
                            expected: format!("allowed values that are {}", e.expected()),
                            found: e.found().to_owned(),
                        },
                    );
                    values = None;
                }
                None => values = None,
            }
        }
        values
    }

    /// `objectProperties`: a mapping from property name to its definition (whose `name`, when
    /// given, repeats the key).
    fn properties(&mut self, node: &Node, path: &str) -> Option<BTreeMap<String, ValueSchema>> {
        let map = self.mapping(node, path)?;
        let mut properties = Some(BTreeMap::new());
        for (key, value) in map.entries {
            let prop_path = join(path, &key.name);
            let key_node = Node {
                value: Value::Str(key.name.clone()),
                line: key.line,
                column: key.column,
            };
            let name_ok = self.field_name(&key_node, &prop_path).is_some();
            let schema = self.mapping(value, &prop_path).and_then(|mut fields| {
                let name_path = fields.path_of("name");
                let name_ok = match fields.get("name") {
                    Some(n) => match &n.value {
                        Value::Str(s) if *s == key.name => true,
                        _ => {
                            self.expected(
                                n,
                                &name_path,
                                format!("`{}`, the property's key", key.name),
                            );
                            false
                        }
                    },
                    None => true,
                };
                let schema = self.schema(&mut fields);
                schema.filter(|_| name_ok)
            });
            match (name_ok, schema, properties.as_mut()) {
                (true, Some(schema), Some(all)) => {
                    all.insert(key.name.clone(), schema);
                }
                _ => properties = None,
            }
        }
        properties
    }

    fn outputs(&mut self, spec: &mut Fields<'_>) -> Option<Vec<OutputDef>> {
        let path = spec.path_of("outputs");
        let Some(node) = spec.get("outputs") else {
            return Some(Vec::new());
        };
        let items = self.list(node, &path)?;
        let mut outputs = Some(Vec::new());
        let mut named = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let item_path = format!("{path}[{i}]");
            let output = self.output(item, &item_path);
            if let Some(output) = &output {
                named.push((output.name.clone(), item, format!("{item_path}.name")));
            }
            match (output, outputs.as_mut()) {
                (Some(output), Some(all)) => all.push(output),
                _ => outputs = None,
            }
        }
        self.unique_names("output", &named);
        outputs
    }

    fn output(&mut self, node: &Node, path: &str) -> Option<OutputDef> {
        let mut fields = self.mapping(node, path)?;
        let name = match fields.get("name") {
            Some(n) => self.field_name(n, &fields.path_of("name")),
            None => {
                self.missing(&fields, "name", "the output's name");
                None
            }
        };
        let value_type = match fields.get("type") {
            Some(t) => self.value_type(t, &fields.path_of("type")),
            None => {
                self.missing(
                    &fields,
                    "type",
                    "a type (string, number, integer, boolean, object or array)",
                );
                None
            }
        };
        let description = self.optional_string(&mut fields, "description");
        let extra = self.extra(&fields);
        Some(OutputDef {
            name: name?,
            value_type: value_type?,
            description,
            extra,
        })
    }

    fn requirements(&mut self, spec: &mut Fields<'_>, namespace: &str) -> Option<Vec<Requirement>> {
        let path = spec.path_of("requirements");
        let Some(node) = spec.get("requirements") else {
            return Some(Vec::new());
        };
        let items = self.list(node, &path)?;
        let mut requirements = Some(Vec::new());
        for (i, item) in items.iter().enumerate() {
            let item_path = format!("{path}[{i}]");
            let requirement = self.requirement(item, &item_path, namespace);
            match (requirement, requirements.as_mut()) {
                (Some(r), Some(all)) => all.push(r),
                _ => requirements = None,
            }
        }
        requirements
    }

    /// A requirement: `name:` or `capability:` (real files use both), an optional `namespace`
    /// (the capability's own by default) and `optional: true|false`; a bare string is a name.
    fn requirement(&mut self, node: &Node, path: &str, namespace: &str) -> Option<Requirement> {
        let origin = self.location(node, path);
        if let Value::Str(_) = node.value {
            let name = self.dns_label(node, path)?;
            return Some(Requirement {
                capability: CapabilityRef::new(namespace, name),
                optional: false,
                origin,
            });
        }
        let mut fields = self.mapping(node, path)?;
        let name = match (fields.get("name"), fields.get("capability")) {
            (Some(n), None) => self.dns_label(n, &fields.path_of("name")),
            (None, Some(c)) => self.dns_label(c, &fields.path_of("capability")),
            (Some(_), Some(c)) => {
                let path = fields.path_of("capability");
                self.not_allowed(
                    c,
                    &path,
                    "give the required capability as `name` or as `capability`, not both",
                );
                None
            }
            (None, None) => {
                self.missing(
                    &fields,
                    "name",
                    "the required capability's name (`name` or `capability`)",
                );
                None
            }
        };
        let own_namespace = match fields.get("namespace") {
            Some(n) => self.dns_label(n, &fields.path_of("namespace")),
            None => Some(namespace.to_owned()),
        };
        let optional = self.flag(&mut fields, "optional");
        let _kept = self.extra(&fields);
        Some(Requirement {
            capability: CapabilityRef::new(own_namespace?, name?),
            optional: optional?,
            origin,
        })
    }

    fn status(&mut self, node: &Node, namespace: &str) -> Option<CapabilityStatus> {
        let mut fields = self.mapping(node, "status")?;
        let phase = match fields.get("phase") {
            Some(p) => {
                let phase = match &p.value {
                    Value::Str(s) => Phase::parse(s),
                    _ => None,
                };
                if phase.is_none() {
                    self.expected(
                        p,
                        "status.phase",
                        "`Available`, `Unavailable` or `Deprecated`",
                    );
                }
                phase
            }
            None => Some(Phase::Available),
        };
        let replacement_origin = fields
            .get("replacement")
            .map(|r| self.location(r, "status.replacement"));
        let replacement = match fields.get("replacement") {
            Some(r) => {
                let replacement = self.reference(r, "status.replacement", namespace);
                if phase.is_some_and(|p| p != Phase::Deprecated) {
                    self.not_allowed(
                        r,
                        "status.replacement",
                        "a replacement applies only to `phase: Deprecated`",
                    );
                    None
                } else {
                    replacement.map(Some)
                }
            }
            None => Some(None),
        };
        let deprecation_message = self.optional_string(&mut fields, "deprecationMessage");
        let conditions = match fields.get("conditions") {
            Some(c) => self.list(c, "status.conditions").and_then(|items| {
                items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| self.json(item, &format!("status.conditions[{i}]")))
                    .collect::<Option<Vec<_>>>()
            }),
            None => Some(Vec::new()),
        };
        let observed_generation = match fields.get("observedGeneration") {
            Some(g) => match g.value {
                Value::Int(i) if i >= 0 => Some(u64::try_from(i).ok()),
                _ => {
                    self.expected(g, "status.observedGeneration", "a whole number, 0 or more");
                    None
                }
            },
            None => Some(None),
        };
        let extra = self.extra(&fields);
        Some(CapabilityStatus {
            phase: phase?,
            replacement: replacement?,
            replacement_origin,
            deprecation_message,
            conditions: conditions?,
            observed_generation: observed_generation?,
            extra,
        })
    }

    /// A reference to a capability: `{name, namespace}` (namespace defaulting to `namespace`),
    /// or a bare name.
    fn reference(&mut self, node: &Node, path: &str, namespace: &str) -> Option<CapabilityRef> {
        if let Value::Str(_) = node.value {
            let name = self.dns_label(node, path)?;
            return Some(CapabilityRef::new(namespace, name));
        }
        let mut fields = self.mapping(node, path)?;
        let name = self.dns_name(&mut fields, "name");
        let own_namespace = match fields.get("namespace") {
            Some(n) => self.dns_label(n, &fields.path_of("namespace")),
            None => Some(namespace.to_owned()),
        };
        Some(CapabilityRef::new(own_namespace?, name?))
    }

    // -----------------------------------------------------------------------------------------
    // Binding
    // -----------------------------------------------------------------------------------------

    fn binding(
        &mut self,
        root: &mut Fields<'_>,
        metadata: Option<Metadata>,
        origin: Location,
    ) -> Option<Binding> {
        let namespace = metadata
            .as_ref()
            .map_or(DEFAULT_NAMESPACE, |m| m.namespace.as_str())
            .to_owned();
        let Some(spec_node) = root.get("spec") else {
            self.missing(root, "spec", "a mapping with `rules`");
            return None;
        };
        let mut spec = self.mapping(spec_node, "spec")?;
        let rules = match spec.get("rules") {
            Some(node) => self.rules(node, &namespace),
            None => {
                self.missing(&spec, "rules", "a non-empty list of rules");
                None
            }
        };
        let extra = self.extra(&spec);
        Some(Binding {
            metadata: metadata?,
            rules: rules?,
            extra,
            origin,
        })
    }

    fn rules(&mut self, node: &Node, namespace: &str) -> Option<Vec<BindingRule>> {
        let items = self.list(node, "spec.rules")?;
        if items.is_empty() {
            self.expected(node, "spec.rules", "a non-empty list of rules");
            return None;
        }
        let mut rules = Some(Vec::new());
        for (i, item) in items.iter().enumerate() {
            let rule = self.rule(item, &format!("spec.rules[{i}]"), namespace);
            match (rule, rules.as_mut()) {
                (Some(rule), Some(all)) => all.push(rule),
                _ => rules = None,
            }
        }
        rules
    }

    /// A rule: a selector (under `selector:` or written on the rule itself) and a `target`.
    fn rule(&mut self, node: &Node, path: &str, namespace: &str) -> Option<BindingRule> {
        let origin = self.location(node, path);
        let mut rule = self.mapping(node, path)?;
        let selector = match rule.get("selector") {
            Some(s) => {
                let clash = ["capabilityRef", "planRef", "nodeId"]
                    .into_iter()
                    .find(|k| rule.has(k));
                if let Some(clash) = clash {
                    let at = find(node, clash).unwrap_or(node);
                    let clash_path = rule.path_of(clash);
                    self.not_allowed(
                        at,
                        &clash_path,
                        "the selector is under `selector:`; do not repeat its fields on the rule",
                    );
                    None
                } else {
                    let selector_path = rule.path_of("selector");
                    self.mapping(s, &selector_path).and_then(|mut fields| {
                        let selector = self.selector(&mut fields, namespace);
                        let _kept = self.extra(&fields);
                        selector
                    })
                }
            }
            None => self.selector(&mut rule, namespace),
        };
        let target = match rule.get("target") {
            Some(t) => self.target(t, &rule.path_of("target")),
            None => {
                self.missing(&rule, "target", "a mapping with the `provider`");
                None
            }
        };
        let _kept = self.extra(&rule);
        let (provider, config) = target?;
        Some(BindingRule {
            selector: selector?,
            provider,
            config,
            origin,
        })
    }

    fn selector(&mut self, fields: &mut Fields<'_>, namespace: &str) -> Option<Selector> {
        let capability = fields.get("capabilityRef");
        let plan = fields.get("planRef");
        let node_id = fields.get("nodeId");
        match (capability, plan, node_id) {
            (Some(c), None, None) => self
                .reference(c, &fields.path_of("capabilityRef"), namespace)
                .map(Selector::Capability),
            (None, Some(p), Some(n)) => {
                let plan = self.plan_ref(p, &fields.path_of("planRef"));
                let node = self.checked_string(
                    n,
                    &fields.path_of("nodeId"),
                    "a task key (1 to 64 lower-case letters, digits, `-` or `_`)",
                    |s| TaskKey::parse(s).is_ok(),
                );
                let node = node.and_then(|n| TaskKey::parse(&n).ok());
                Some(Selector::Node {
                    plan: plan?,
                    node: node?,
                })
            }
            (None, Some(_), None) => {
                self.missing(fields, "nodeId", "the task key that `planRef` selects");
                None
            }
            (None, None, Some(_)) => {
                self.missing(fields, "planRef", "the plan that `nodeId` belongs to");
                None
            }
            (Some(_), Some(extra), _) | (Some(_), None, Some(extra)) => {
                let path = if plan.is_some() {
                    fields.path_of("planRef")
                } else {
                    fields.path_of("nodeId")
                };
                self.not_allowed(
                    extra,
                    &path,
                    "a selector is `capabilityRef`, or `planRef` with `nodeId`, not both",
                );
                None
            }
            (None, None, None) => {
                self.missing(
                    fields,
                    "capabilityRef",
                    "a selector: `capabilityRef`, or `planRef` with `nodeId`",
                );
                None
            }
        }
    }

    /// `planRef`: `{name: <objective id>}` or the bare id. A plan is an objective here, so the
    /// name is the objective's id.
    fn plan_ref(&mut self, node: &Node, path: &str) -> Option<ObjectiveId> {
        let (name_node, name_path) = match &node.value {
            Value::Str(_) => (node, path.to_owned()),
            _ => {
                let mut fields = self.mapping(node, path)?;
                match fields.get("name") {
                    Some(n) => (n, fields.path_of("name")),
                    None => {
                        self.missing(&fields, "name", "the plan's objective id (a UUID)");
                        return None;
                    }
                }
            }
        };
        let text = self.checked_string(
            name_node,
            &name_path,
            "the plan's objective id (a UUID)",
            |s| s.parse::<ObjectiveId>().is_ok(),
        )?;
        text.parse().ok()
    }

    fn target(&mut self, node: &Node, path: &str) -> Option<(PrincipalId, Map<String, Json>)> {
        let mut fields = self.mapping(node, path)?;
        let provider = match fields.get("provider") {
            Some(p) => self
                .checked_string(
                    p,
                    &fields.path_of("provider"),
                    "a specialist's principal id (1 to 64 lower-case letters, digits, `-` or `_`)",
                    |s| PrincipalId::parse(s).is_ok(),
                )
                .and_then(|s| PrincipalId::parse(&s).ok()),
            None => {
                self.missing(&fields, "provider", "the specialist's principal id");
                None
            }
        };
        let config = match fields.get("config") {
            Some(c) => {
                let config_path = fields.path_of("config");
                match self.mapping(c, &config_path) {
                    Some(_) => match self.json(c, &config_path) {
                        Some(Json::Object(map)) => Some(map),
                        _ => None,
                    },
                    None => None,
                }
            }
            None => Some(Map::new()),
        };
        let _kept = self.extra(&fields);
        Some((provider?, config?))
    }
}

/// The value of `key` in mapping `node`.
fn find<'n>(node: &'n Node, key: &str) -> Option<&'n Node> {
    match &node.value {
        Value::Map(entries) => entries.iter().find(|(k, _)| k.name == key).map(|(_, v)| v),
        _ => None,
    }
}
