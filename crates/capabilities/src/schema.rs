//! Value definitions (a capability's inputs and their object properties) and the check of a
//! value against one: type, `enum`, `format`, `itemType`, `objectProperties`, with defaults
//! applied to absent inputs and properties.

use std::collections::BTreeMap;
use std::fmt;

use agentroom_domain::catalog::OutputType;
use serde_json::{Map, Value};

use crate::format::Format;

/// The type of a value: the seed's five, plus `integer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ValueType {
    /// A JSON string.
    String,
    /// Any JSON number.
    Number,
    /// A whole JSON number.
    Integer,
    /// `true` or `false`.
    Boolean,
    /// A JSON object.
    Object,
    /// A JSON array.
    Array,
}

impl ValueType {
    /// Every type, in the order error messages list them.
    pub const ALL: [ValueType; 6] = [
        Self::String,
        Self::Number,
        Self::Integer,
        Self::Boolean,
        Self::Object,
        Self::Array,
    ];

    /// Reads a type name as written in a resource.
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.name() == text)
    }

    /// The name as written in a resource.
    pub fn name(self) -> &'static str {
        match self {
            Self::String => "string",
            Self::Number => "number",
            Self::Integer => "integer",
            Self::Boolean => "boolean",
            Self::Object => "object",
            Self::Array => "array",
        }
    }

    /// Whether `value` is of this type.
    pub fn admits(self, value: &Value) -> bool {
        match self {
            Self::String => value.is_string(),
            Self::Number => value.is_number(),
            Self::Integer => value.is_i64() || value.is_u64() || is_whole_float(value),
            Self::Boolean => value.is_boolean(),
            Self::Object => value.is_object(),
            Self::Array => value.is_array(),
        }
    }

    /// `a string`, `an integer`, ...: how error messages name a value of this type.
    pub(crate) fn article(self) -> &'static str {
        match self {
            Self::String => "a string",
            Self::Number => "a number",
            Self::Integer => "an integer",
            Self::Boolean => "a boolean",
            Self::Object => "an object",
            Self::Array => "an array",
        }
    }
}

impl fmt::Display for ValueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The domain's name for the same type, for declared outputs (the two lists are the same six).
impl From<ValueType> for OutputType {
    fn from(value_type: ValueType) -> Self {
        match value_type {
            ValueType::String => OutputType::String,
            ValueType::Number => OutputType::Number,
            ValueType::Integer => OutputType::Integer,
            ValueType::Boolean => OutputType::Boolean,
            ValueType::Object => OutputType::Object,
            ValueType::Array => OutputType::Array,
        }
    }
}

fn is_whole_float(value: &Value) -> bool {
    value
        .as_f64()
        .is_some_and(|x| x.is_finite() && x.fract() == 0.0)
}

/// Whether two JSON values are equal, numbers compared by value (`1` equals `1.0`).
pub(crate) fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(x), Some(y)) => x == y,
            _ => match (x.as_u64(), y.as_u64()) {
                (Some(x), Some(y)) => x == y,
                _ => x.as_f64() == y.as_f64(),
            },
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same_value(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_value(v, w)))
        }
        _ => a == b,
    }
}

/// The definition of one value: an input, or a property of an object input.
#[derive(Debug, Clone, PartialEq)]
pub struct ValueSchema {
    pub(crate) value_type: ValueType,
    pub(crate) required: bool,
    pub(crate) description: Option<String>,
    pub(crate) default: Option<Value>,
    pub(crate) format: Option<Format>,
    pub(crate) allowed: Option<Vec<Value>>,
    pub(crate) item_type: Option<ValueType>,
    pub(crate) properties: BTreeMap<String, ValueSchema>,
    pub(crate) extra: Map<String, Value>,
}

impl ValueSchema {
    /// A bare definition of `value_type`, optional, with nothing else.
    pub(crate) fn of(value_type: ValueType) -> Self {
        Self {
            value_type,
            required: false,
            description: None,
            default: None,
            format: None,
            allowed: None,
            item_type: None,
            properties: BTreeMap::new(),
            extra: Map::new(),
        }
    }

    /// The type.
    pub fn value_type(&self) -> ValueType {
        self.value_type
    }

    /// Whether the value must be given (`required: true`).
    pub fn required(&self) -> bool {
        self.required
    }

    /// The description.
    pub fn description(&self) -> Option<&str> {
        self.description.as_deref()
    }

    /// The value used when none is given.
    pub fn default(&self) -> Option<&Value> {
        self.default.as_ref()
    }

    /// The format hint (of a string, or of an array's string items).
    pub fn format(&self) -> Option<&Format> {
        self.format.as_ref()
    }

    /// The allowed values (`enum`).
    pub fn allowed(&self) -> Option<&[Value]> {
        self.allowed.as_deref()
    }

    /// The type of an array's items.
    pub fn item_type(&self) -> Option<ValueType> {
        self.item_type
    }

    /// The properties of an object (`objectProperties`), by name.
    pub fn properties(&self) -> &BTreeMap<String, ValueSchema> {
        &self.properties
    }

    /// Fields this definition carries that agentroom does not read, kept as written.
    pub fn extra(&self) -> &Map<String, Value> {
        &self.extra
    }

    /// Checks `value` against this definition and returns it with the defaults of absent object
    /// properties applied; `path` names the value in errors.
    pub fn check(&self, path: &str, value: &Value) -> Result<Value, ValueError> {
        if !self.value_type.admits(value) {
            return Err(ValueError::new(path, self.value_type.article(), value));
        }
        if let Some(allowed) = &self.allowed
            && !allowed.iter().any(|a| same_value(a, value))
        {
            let list: Vec<String> = allowed.iter().map(Value::to_string).collect();
            return Err(ValueError::new(
                path,
                format!("one of {}", list.join(", ")),
                value,
            ));
        }
        match value {
            Value::String(text) => {
                self.check_format(path, text)?;
                Ok(value.clone())
            }
            Value::Array(items) => {
                let mut checked = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    let item_path = format!("{path}[{i}]");
                    if let Some(item_type) = self.item_type
                        && !item_type.admits(item)
                    {
                        return Err(ValueError::new(&item_path, item_type.article(), item));
                    }
                    if let Value::String(text) = item {
                        self.check_format(&item_path, text)?;
                    }
                    checked.push(item.clone());
                }
                Ok(Value::Array(checked))
            }
            Value::Object(fields) if !self.properties.is_empty() => {
                check_fields(path, &self.properties, fields).map(Value::Object)
            }
            _ => Ok(value.clone()),
        }
    }

    fn check_format(&self, path: &str, text: &str) -> Result<(), ValueError> {
        match &self.format {
            Some(format) if !format.accepts(text) => Err(ValueError::new(
                path,
                format.expected(),
                &Value::String(text.to_owned()),
            )),
            _ => Ok(()),
        }
    }
}

/// Checks the fields of an object (a task's inputs, or an object value) against `defined`:
/// unknown fields are refused, absent ones take their default, required ones must be given
/// (`null` counts as absent). Returns the fields with defaults applied.
pub(crate) fn check_fields<'d>(
    path: &str,
    defined: impl IntoIterator<Item = (&'d String, &'d ValueSchema)> + Clone,
    fields: &Map<String, Value>,
) -> Result<Map<String, Value>, ValueError> {
    let field_path = |name: &str| {
        if path.is_empty() {
            name.to_owned()
        } else {
            format!("{path}.{name}")
        }
    };
    if let Some(unknown) = fields
        .keys()
        .find(|k| !defined.clone().into_iter().any(|(name, _)| name == *k))
    {
        let names: Vec<&str> = defined
            .clone()
            .into_iter()
            .map(|(n, _)| n.as_str())
            .collect();
        let expected = if names.is_empty() {
            "no fields here".to_owned()
        } else {
            format!("one of the defined names ({})", names.join(", "))
        };
        return Err(ValueError {
            path: field_path(unknown),
            expected,
            found: "an undefined name".to_owned(),
        });
    }
    let mut checked = Map::new();
    for (name, schema) in defined {
        let path = field_path(name);
        match fields.get(name).filter(|v| !v.is_null()) {
            Some(value) => {
                checked.insert(name.clone(), schema.check(&path, value)?);
            }
            None => match &schema.default {
                Some(default) => {
                    checked.insert(name.clone(), default.clone());
                }
                None if schema.required => {
                    return Err(ValueError {
                        path,
                        expected: format!("{} (it is required)", schema.value_type.article()),
                        found: "nothing".to_owned(),
                    });
                }
                None => {}
            },
        }
    }
    Ok(checked)
}

/// A value that does not satisfy its definition.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{path}`: expected {expected}, found {found}")]
pub struct ValueError {
    path: String,
    expected: String,
    found: String,
}

impl ValueError {
    fn new(path: &str, expected: impl Into<String>, found: &Value) -> Self {
        Self {
            path: path.to_owned(),
            expected: expected.into(),
            found: describe(found),
        }
    }

    /// The value's path: the input name, then `.property` and `[index]` within it.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// What was expected.
    pub fn expected(&self) -> &str {
        &self.expected
    }

    /// What was found.
    pub fn found(&self) -> &str {
        &self.found
    }
}

/// How a JSON value reads in an error message.
pub(crate) fn describe(value: &Value) -> String {
    let shown = |v: &Value| {
        let text = v.to_string();
        if text.chars().count() > 60 {
            format!("{}…", text.chars().take(60).collect::<String>())
        } else {
            text
        }
    };
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(_) => format!("the string {}", shown(value)),
        Value::Array(_) => format!("the array {}", shown(value)),
        Value::Object(_) => format!("the object {}", shown(value)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema(value_type: ValueType) -> ValueSchema {
        ValueSchema::of(value_type)
    }

    #[test]
    fn types_admit_their_values_only() {
        let cases = [
            (ValueType::String, json!("x"), json!(1)),
            (ValueType::Number, json!(1.5), json!("1.5")),
            (ValueType::Integer, json!(3), json!(3.5)),
            (ValueType::Boolean, json!(false), json!("false")),
            (ValueType::Object, json!({}), json!([])),
            (ValueType::Array, json!([]), json!({})),
        ];
        for (t, ok, bad) in cases {
            assert!(t.admits(&ok), "{t} {ok}");
            assert!(!t.admits(&bad), "{t} {bad}");
        }
        assert!(ValueType::Integer.admits(&json!(4.0)));
        assert!(ValueType::Integer.admits(&json!(u64::MAX)));
    }

    #[test]
    fn enum_compares_numbers_by_value() {
        let mut s = schema(ValueType::Number);
        s.allowed = Some(vec![json!(1), json!(2.5)]);
        assert!(s.check("n", &json!(1.0)).is_ok());
        let error = s.check("n", &json!(3)).unwrap_err();
        assert_eq!(
            error.to_string(),
            "`n`: expected one of 1, 2.5, found the number 3"
        );
    }

    #[test]
    fn array_items_are_checked_for_type_and_format() {
        let mut s = schema(ValueType::Array);
        s.item_type = Some(ValueType::String);
        s.format = Some(Format::Uri);
        assert!(s.check("urls", &json!(["https://a.org"])).is_ok());
        let error = s.check("urls", &json!(["https://a.org", 3])).unwrap_err();
        assert_eq!(error.path(), "urls[1]");
        let error = s.check("urls", &json!(["nope"])).unwrap_err();
        assert_eq!(error.path(), "urls[0]");
        assert!(error.expected().contains("URI"), "{error}");
    }

    #[test]
    fn object_properties_are_checked_with_defaults_applied() {
        let mut port = schema(ValueType::Integer);
        port.default = Some(json!(5432));
        let mut host = schema(ValueType::String);
        host.required = true;
        let mut s = schema(ValueType::Object);
        s.properties = BTreeMap::from([("host".to_owned(), host), ("port".to_owned(), port)]);
        assert_eq!(
            s.check("db", &json!({"host": "h"})).unwrap(),
            json!({"host": "h", "port": 5432})
        );
        let error = s.check("db", &json!({"port": 1})).unwrap_err();
        assert_eq!(error.path(), "db.host");
        let error = s
            .check("db", &json!({"host": "h", "user": "u"}))
            .unwrap_err();
        assert_eq!(error.path(), "db.user");
        let error = s
            .check("db", &json!({"host": "h", "port": "1"}))
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "`db.port`: expected an integer, found the string \"1\""
        );
    }

    #[test]
    fn an_object_without_properties_takes_any_fields() {
        assert!(
            schema(ValueType::Object)
                .check("o", &json!({"a": [1, {"b": null}]}))
                .is_ok()
        );
    }

    #[test]
    fn long_values_are_shortened_in_messages() {
        let long = "x".repeat(200);
        let error = schema(ValueType::Integer)
            .check("n", &Value::String(long))
            .unwrap_err();
        assert!(error.found().chars().count() < 90, "{error}");
    }
}
