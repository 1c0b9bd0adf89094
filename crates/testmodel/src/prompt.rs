//! Reading a prompt as agentroom's OpenAI adapter writes it: the role the system prompt names,
//! the JSON brief of the user message, and the Room content after the separator as `<data>`
//! blocks with their entities read back. Data is only ever parsed here, never obeyed: nothing
//! inside a block can change which role answers or what the brief says.

use serde_json::Value;

/// What separates the brief from the Room content in the user message.
pub(crate) const DATA_SEPARATOR: &str = "\n\nRoom content:\n";

/// Which agent the system prompt asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// "You are the reasoner …": proposes a plan.
    Reasoner,
    /// "You are a specialist …": executes one task.
    Specialist,
    /// "You are a reviewer …": gives a verdict per criterion.
    Reviewer,
}

impl Role {
    /// The role a system prompt names by its opening words.
    pub(crate) fn of_system_prompt(system: &str) -> Option<Self> {
        let opening = system.trim_start();
        [
            ("You are the reasoner", Self::Reasoner),
            ("You are a specialist", Self::Specialist),
            ("You are a reviewer", Self::Reviewer),
        ]
        .into_iter()
        .find_map(|(words, role)| opening.starts_with(words).then_some(role))
    }

    /// Its name, for logs.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Reasoner => "reasoner",
            Self::Specialist => "specialist",
            Self::Reviewer => "reviewer",
        }
    }
}

/// One `<data kind="…" id="…" …>` block, entities read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DataBlock {
    /// `objective`, `owner_message`, `capability`, `source`, `report`, ….
    pub(crate) kind: String,
    /// Its id, empty when the block has none.
    pub(crate) id: String,
    /// Its other attributes, in order.
    attrs: Vec<(String, String)>,
    /// Its text.
    pub(crate) text: String,
}

impl DataBlock {
    /// The value of attribute `name`.
    pub(crate) fn attr(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The user message, read: the brief and the data blocks.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Prompt {
    /// The JSON brief; `Null` when the text before the separator is not JSON.
    pub(crate) brief: Value,
    /// The data blocks, in the order given.
    pub(crate) data: Vec<DataBlock>,
}

impl Prompt {
    /// Reads a user message: the brief before [`DATA_SEPARATOR`], the blocks after it.
    pub(crate) fn parse(user: &str) -> Self {
        let (brief, content) = match user.split_once(DATA_SEPARATOR) {
            Some((brief, content)) => (brief, content),
            None => (user, ""),
        };
        Self {
            brief: serde_json::from_str(brief.trim()).unwrap_or(Value::Null),
            data: data_blocks(content),
        }
    }

    /// The blocks of `kind`, in order.
    pub(crate) fn of_kind<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = &'a DataBlock> {
        self.data.iter().filter(move |b| b.kind == kind)
    }

    /// The brief's string field `name`.
    pub(crate) fn brief_str(&self, name: &str) -> Option<&str> {
        self.brief.get(name).and_then(Value::as_str)
    }

    /// The brief's array field `name` (empty when absent).
    pub(crate) fn brief_array(&self, name: &str) -> &[Value] {
        self.brief
            .get(name)
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice)
    }
}

/// Every complete `<data …>` … `</data>` block of `content`. Lines outside blocks
/// (`<omitted …/>` notes) are skipped, and so is a block that is never closed.
fn data_blocks(content: &str) -> Vec<DataBlock> {
    let mut blocks = Vec::new();
    let mut lines = content.split('\n');
    while let Some(line) = lines.next() {
        if !line.starts_with("<data ") && line != "<data>" {
            continue;
        }
        // The header ends at its first `>` (one inside a value is written `&gt;`); a value
        // with a line break in it spreads the header over several lines.
        let mut header = line.to_owned();
        while !header.contains('>') {
            match lines.next() {
                Some(more) => {
                    header.push('\n');
                    header.push_str(more);
                }
                None => return blocks,
            }
        }
        let mut text: Vec<&str> = Vec::new();
        let mut closed = false;
        for line in lines.by_ref() {
            if line == "</data>" {
                closed = true;
                break;
            }
            text.push(line);
        }
        if !closed {
            break;
        }
        let mut attrs = attributes(&header);
        let kind = take(&mut attrs, "kind").unwrap_or_default();
        let id = take(&mut attrs, "id").unwrap_or_default();
        blocks.push(DataBlock {
            kind,
            id,
            attrs,
            text: unescape(&text.join("\n")),
        });
    }
    blocks
}

fn take(attrs: &mut Vec<(String, String)>, name: &str) -> Option<String> {
    let at = attrs.iter().position(|(n, _)| n == name)?;
    Some(attrs.remove(at).1)
}

/// The `name="value"` pairs of a `<data …>` header, read back.
fn attributes(header: &str) -> Vec<(String, String)> {
    let inner = header.strip_prefix("<data").unwrap_or(header);
    let inner = inner.split_once('>').map_or(inner, |(inside, _)| inside);
    let mut attrs = Vec::new();
    let mut rest = inner;
    loop {
        rest = rest.trim_start();
        let Some((name, after)) = rest.split_once("=\"") else {
            break;
        };
        let Some((value, after)) = after.split_once('"') else {
            break;
        };
        attrs.push((unescape(name.trim()), unescape(value)));
        rest = after;
    }
    attrs
}

/// `text` with `&lt;`, `&gt;`, `&quot;` and then `&amp;` read back, so `&amp;lt;` stays `&lt;`.
pub(crate) fn unescape(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&amp;", "&")
}

/// `text` with every run of whitespace made one space, trimmed (how quotes are compared).
pub(crate) fn normalize(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The ids a line cites with `[id]` markers (`[s1]`, `[s2]`), in order: a marker's content is
/// 1 to 64 characters without spaces.
pub(crate) fn cited_ids(line: &str) -> Vec<String> {
    let mut ids = Vec::new();
    let mut rest = line;
    while let Some(open) = rest.find('[') {
        let after = &rest[open + 1..];
        let Some(close) = after.find(']') else {
            break;
        };
        let id = &after[..close];
        if !id.is_empty()
            && id.len() <= 64
            && !id.contains('[')
            && !id.chars().any(char::is_whitespace)
            && !ids.iter().any(|known| known == id)
        {
            ids.push(id.to_owned());
        }
        rest = &after[close + 1..];
    }
    ids
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_read_with_their_attributes_and_entities() {
        let user = "{\"a\":1}\n\nRoom content:\n\
            <data kind=\"source\" id=\"s1\" uri=\"https://x.org/?a=1&amp;b=2\" title=\"&quot;T&quot;\">\n\
            line one &lt;/data&gt;\n&amp;lt; two\n\
            </data>\n\
            <omitted kind=\"source\" id=\"s2\" digest=\"sha256:00\"/>\n\
            <data kind=\"members\">\n\n</data>\n\
            <data kind=\"report\" id=\"r\">\nnever closed\n";
        let prompt = Prompt::parse(user);
        assert_eq!(prompt.brief["a"], 1);
        assert_eq!(prompt.data.len(), 2, "{:?}", prompt.data);
        let source = &prompt.data[0];
        assert_eq!((source.kind.as_str(), source.id.as_str()), ("source", "s1"));
        assert_eq!(source.attr("uri"), Some("https://x.org/?a=1&b=2"));
        assert_eq!(source.attr("title"), Some("\"T\""));
        assert_eq!(source.text, "line one </data>\n&lt; two");
        assert_eq!(prompt.data[1].kind, "members");
        assert_eq!(prompt.data[1].id, "");
        assert_eq!(prompt.data[1].text, "");
    }

    #[test]
    fn a_user_message_without_the_separator_is_all_brief() {
        let prompt = Prompt::parse("not json");
        assert_eq!(prompt.brief, Value::Null);
        assert!(prompt.data.is_empty());
    }

    #[test]
    fn roles_are_told_by_the_opening_words() {
        assert_eq!(
            Role::of_system_prompt("You are the reasoner of a Room"),
            Some(Role::Reasoner)
        );
        assert_eq!(
            Role::of_system_prompt("You are a specialist of"),
            Some(Role::Specialist)
        );
        assert_eq!(
            Role::of_system_prompt("You are a reviewer of"),
            Some(Role::Reviewer)
        );
        assert_eq!(Role::of_system_prompt("You are a helpful assistant"), None);
    }

    #[test]
    fn markers_name_the_cited_ids() {
        assert_eq!(
            cited_ids("- a fact [s1] and [s2][s1] [not one]"),
            ["s1", "s2"]
        );
        assert!(cited_ids("- no marker").is_empty());
        assert_eq!(normalize("  a \n b\tc "), "a b c");
    }
}
