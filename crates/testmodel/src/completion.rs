//! One chat completion: the request checked for a system and a user message, the role told by
//! the system prompt, the reply computed from the user message alone, and the OpenAI
//! `chat.completion` envelope around it with usage counted as bytes / 4, rounded up.

use serde_json::{Value, json};

use crate::prompt::{Prompt, Role};
use crate::{reasoner, reviewer, specialist};

/// Why a request is not a chat completion this model answers (a 400).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Invalid(pub(crate) String);

/// The answer to `request`, numbered `n` (`tm-<n>`), and the role that gave it.
pub(crate) fn complete(request: &Value, n: impl FnOnce() -> u64) -> Result<(Role, Value), Invalid> {
    let Some(request) = request.as_object() else {
        return Err(Invalid("the body must be a JSON object".to_owned()));
    };
    if request.get("stream").and_then(Value::as_bool) == Some(true) {
        return Err(Invalid(
            "`stream` is not supported by this model".to_owned(),
        ));
    }
    let Some(messages) = request.get("messages").and_then(Value::as_array) else {
        return Err(Invalid(
            "`messages` must be an array of chat messages".to_owned(),
        ));
    };
    let mut prompt_bytes = 0;
    let mut system = None;
    let mut user = None;
    for message in messages {
        let role = message.get("role").and_then(Value::as_str);
        let Some(content) = message.get("content").and_then(text_of) else {
            return Err(Invalid(
                "every message needs a `role` and a text `content`".to_owned(),
            ));
        };
        prompt_bytes += content.len();
        match role {
            Some("system") if system.is_none() => system = Some(content),
            Some("user") if user.is_none() => user = Some(content),
            Some(_) => {}
            None => {
                return Err(Invalid(
                    "every message needs a `role` and a text `content`".to_owned(),
                ));
            }
        }
    }
    let (Some(system), Some(user)) = (system, user) else {
        return Err(Invalid(
            "a chat completion here needs a system message and a user message".to_owned(),
        ));
    };
    let Some(role) = Role::of_system_prompt(&system) else {
        return Err(Invalid(
            "the system prompt must begin with \"You are the reasoner\", \"You are a \
             specialist\" or \"You are a reviewer\""
                .to_owned(),
        ));
    };
    let prompt = Prompt::parse(&user);
    let reply = match role {
        Role::Reasoner => reasoner::reply(&prompt),
        Role::Specialist => specialist::reply(&prompt),
        Role::Reviewer => reviewer::reply(&prompt),
    };
    let mut content = reply.to_string();
    // Like a real model, it stops at `max_tokens`: the reply is cut (and unreadable), the
    // finish reason says `length`, and the usage never exceeds what the caller reserved for.
    let max_tokens = ["max_completion_tokens", "max_tokens"]
        .iter()
        .find_map(|name| request.get(*name).and_then(Value::as_u64))
        .and_then(|max| usize::try_from(max).ok());
    let mut finish_reason = "stop";
    if let Some(max) = max_tokens
        && content.len().div_ceil(4) > max
    {
        let mut end = max.saturating_mul(4).min(content.len());
        while !content.is_char_boundary(end) {
            end -= 1;
        }
        content.truncate(end);
        finish_reason = "length";
    }
    let prompt_tokens = prompt_bytes.div_ceil(4);
    let completion_tokens = content.len().div_ceil(4);
    let model = request
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("agentroom-testmodel");
    Ok((
        role,
        json!({
            "id": format!("tm-{}", n()),
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish_reason
            }],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens
            }
        }),
    ))
}

/// The role the request's first system message names, if it names one (how requests are
/// counted per role for injected faults, before they are answered).
pub(crate) fn role_of(request: &Value) -> Option<Role> {
    let system = request
        .get("messages")?
        .as_array()?
        .iter()
        .find(|m| m.get("role").and_then(Value::as_str) == Some("system"))?;
    Role::of_system_prompt(&text_of(system.get("content")?)?)
}

/// A message's text: a string, or the `text` of its `{"type": "text"}` parts, joined.
fn text_of(content: &Value) -> Option<String> {
    match content {
        Value::String(text) => Some(text.clone()),
        Value::Array(parts) => parts
            .iter()
            .map(|part| part.get("text").and_then(Value::as_str))
            .collect::<Option<Vec<_>>>()
            .map(|texts| texts.concat()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_counts_bytes_over_four_rounded_up() {
        let request = json!({"model": "m", "messages": [
            {"role": "system", "content": "You are a reviewer."},
            {"role": "user", "content": "{\"criteria\":[]}"}
        ]});
        let (role, answer) = complete(&request, || 7).unwrap();
        assert_eq!(role, Role::Reviewer);
        assert_eq!(answer["id"], "tm-7");
        assert_eq!(answer["model"], "m");
        let content = answer["choices"][0]["message"]["content"].as_str().unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(content).unwrap(),
            json!({"verdicts": []})
        );
        let prompt = "You are a reviewer.".len() + "{\"criteria\":[]}".len();
        assert_eq!(answer["usage"]["prompt_tokens"], prompt.div_ceil(4));
        assert_eq!(
            answer["usage"]["completion_tokens"],
            content.len().div_ceil(4)
        );
    }

    #[test]
    fn a_reply_longer_than_max_tokens_is_cut_with_finish_reason_length() {
        let request = json!({"model": "m", "max_tokens": 3, "messages": [
            {"role": "system", "content": "You are a reviewer."},
            {"role": "user", "content": "{\"criteria\":[{\"id\":\"c\",\"text\":\"t\"}]}"}
        ]});
        let (_, answer) = complete(&request, || 1).unwrap();
        assert_eq!(answer["choices"][0]["finish_reason"], "length");
        let content = answer["choices"][0]["message"]["content"].as_str().unwrap();
        assert_eq!(content, "{\"verdicts\":", "12 bytes: 3 tokens");
        assert_eq!(answer["usage"]["completion_tokens"], 3);
        let roomy = json!({"max_tokens": 1000, "messages": request["messages"]});
        let (_, answer) = complete(&roomy, || 2).unwrap();
        assert_eq!(answer["choices"][0]["finish_reason"], "stop");
    }

    #[test]
    fn the_role_of_a_request_is_the_one_its_system_message_names() {
        let request = |system: &str| {
            json!({"messages": [{"role": "user", "content": "hi"},
                                {"role": "system", "content": [{"type": "text", "text": system}]}]})
        };
        assert_eq!(
            role_of(&request("You are a specialist of a Room.")),
            Some(Role::Specialist)
        );
        assert_eq!(
            role_of(&request("You are the reasoner.")),
            Some(Role::Reasoner)
        );
        assert_eq!(role_of(&request("You are a helpful assistant")), None);
        assert_eq!(role_of(&json!({"messages": "x"})), None);
        assert_eq!(role_of(&json!([])), None);
    }

    #[test]
    fn a_request_without_a_system_and_a_user_message_is_invalid() {
        for request in [
            json!([]),
            json!({"messages": "x"}),
            json!({"messages": [{"role": "user", "content": "hi"}]}),
            json!({"messages": [{"role": "system", "content": "You are a helpful assistant"},
                                {"role": "user", "content": "hi"}]}),
            json!({"stream": true, "messages": []}),
        ] {
            assert!(complete(&request, || 1).is_err(), "{request}");
        }
    }
}
