//! The HTTP client of the REST API: one request, its answer as JSON or an
//! [`OperatorError`] that says what went wrong; [`typed`] reads an answer as the API's wire
//! type (`agentroom-api-model`), so a changed contract fails loudly, naming the field.

use agentroom_api_model::ErrorBody;
use agentroom_api_model::responses::Decision;
use agentroom_domain::engine::Verdict;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{CONNECT_TIMEOUT, OperatorError, PAGE, REQUEST_TIMEOUT, Target, read_token};

// HTTP
// ---------------------------------------------------------------------------------------------

pub(super) struct Client {
    http: reqwest::Client,
    host: String,
    base: reqwest::Url,
    token: String,
}

impl Client {
    pub(super) fn new(target: &Target) -> Result<Client, OperatorError> {
        let host = target.host.trim_end_matches('/').to_owned();
        let bad = |reason: &str| OperatorError::BadHost {
            host: target.host.clone(),
            reason: reason.to_owned(),
        };
        let base = reqwest::Url::parse(&format!("{host}/v1/rooms/{}/", target.room))
            .map_err(|error| bad(&error.to_string()))?;
        if !matches!(base.scheme(), "http" | "https") {
            return Err(bad("give an http:// or https:// URL"));
        }
        let token = read_token(target)?;
        // reqwest's rustls has no built-in crypto provider here: ring, as the OpenAI adapter.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .connect_timeout(CONNECT_TIMEOUT)
            // The API never redirects; a redirect is not followed, so the token goes nowhere
            // but --host.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|error| bad(&error.to_string()))?;
        Ok(Client {
            http,
            host,
            base,
            token,
        })
    }

    fn url(&self, path: &str, query: &[(&str, String)]) -> Result<reqwest::Url, OperatorError> {
        let mut url = self
            .base
            .join(path)
            .map_err(|error| OperatorError::BadHost {
                host: self.host.clone(),
                reason: error.to_string(),
            })?;
        if !query.is_empty() {
            let mut pairs = url.query_pairs_mut();
            for (name, value) in query {
                pairs.append_pair(name, value);
            }
        }
        Ok(url)
    }

    pub(super) async fn get(
        &self,
        path: &str,
        query: &[(&str, String)],
    ) -> Result<Value, OperatorError> {
        let request = self.http.get(self.url(path, query)?);
        self.send(request).await
    }

    pub(super) async fn post(&self, path: &str, body: &Value) -> Result<Value, OperatorError> {
        let request = self
            .http
            .post(self.url(path, &[])?)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_string());
        self.send(request).await
    }

    async fn send(&self, request: reqwest::RequestBuilder) -> Result<Value, OperatorError> {
        let response = request
            .bearer_auth(&self.token)
            .send()
            .await
            .map_err(|error| self.unreachable(&error))?;
        let status = response.status().as_u16();
        let body = response
            .text()
            .await
            .map_err(|error| self.unreachable(&error))?;
        if (200..300).contains(&status) {
            return serde_json::from_str(&body).map_err(|_| {
                OperatorError::BadAnswer(format!("status {status} with a body that is not JSON"))
            });
        }
        // An error answer is the API's `ErrorBody`; anything else (a proxy's page) is shown
        // as it is.
        let parsed: Option<ErrorBody> = serde_json::from_str(&body).ok();
        let message = parsed
            .as_ref()
            .map_or_else(|| body.trim().to_owned(), |e| e.message.clone());
        Err(match (status, parsed) {
            (401, _) => OperatorError::Unauthenticated,
            (403, parsed) => OperatorError::Forbidden {
                permission: parsed.and_then(|e| e.permission),
                message,
            },
            (404, _) => OperatorError::NotFound(message),
            // The domain refused the input by a rule (the refusal is logged; nothing else
            // changed): the rule and its message.
            (409, Some(error)) if error.error == "rule_refused" => OperatorError::Refused {
                rule: error.rule.map(|rule| rule.to_string()),
                message,
            },
            _ => OperatorError::Status { status, message },
        })
    }

    fn unreachable(&self, error: &reqwest::Error) -> OperatorError {
        let reason = if error.is_timeout() {
            "no answer in time".to_owned()
        } else if error.is_connect() {
            // The innermost cause says it best ("Connection refused (os error 111)").
            let mut cause: &dyn std::error::Error = error;
            while let Some(next) = cause.source() {
                cause = next;
            }
            format!("cannot connect ({cause})")
        } else {
            error.to_string()
        };
        OperatorError::Unreachable {
            host: self.host.clone(),
            reason,
        }
    }

    /// `first` with the `field` lists of every later page appended, `next_cursor` null.
    pub(super) async fn rest_of_pages(
        &self,
        path: &str,
        mut first: Value,
        field: &str,
    ) -> Result<Value, OperatorError> {
        let mut cursor = first["next_cursor"].as_str().map(str::to_owned);
        while let Some(next) = cursor {
            let page = self
                .get(path, &[("limit", PAGE.to_string()), ("cursor", next)])
                .await?;
            let more = page[field].as_array().cloned().unwrap_or_default();
            match first[field].as_array_mut() {
                Some(list) => list.extend(more),
                None => {
                    return Err(OperatorError::BadAnswer(format!("no `{field}` list")));
                }
            }
            cursor = page["next_cursor"].as_str().map(str::to_owned);
        }
        if let Some(object) = first.as_object_mut() {
            object.insert("next_cursor".to_owned(), Value::Null);
        }
        Ok(first)
    }
}

/// `value` (the answer of `what`) read as the API's wire type `T`: a missing field or one of
/// another type is an error naming it.
pub(super) fn typed<T: DeserializeOwned>(what: &str, value: &Value) -> Result<T, OperatorError> {
    T::deserialize(value)
        .map_err(|error| OperatorError::BadAnswer(format!("the answer of {what}: {error}")))
}

/// A decided input that a rule refused is an error (nothing changed); the host answers one
/// with a 409 `rule_refused` ([`Client::post`] maps it), this reads an answer of a host that
/// still answered 200 with the refusal in its log. The first entry of the
/// decision log is the verdict on the request itself; later entries are what followed from it
/// (a resumed objective's next dispatch may be refused for want of budget, B2, while the
/// resume stands), so the API's `accepted` (every entry accepted) is not the test.
pub(super) fn decided_or_refused(answer: &Decision) -> Result<(), OperatorError> {
    if answer.already_done {
        return Ok(());
    }
    let first = answer.log.first();
    let refused = match first {
        Some(entry) => entry.verdict == Verdict::Rejected,
        None => answer.accepted == Some(false),
    };
    if !refused {
        return Ok(());
    }
    Err(OperatorError::Refused {
        rule: first.and_then(|e| e.rule).map(|rule| rule.to_string()),
        message: first.map_or_else(
            || "the request was decided and refused".to_owned(),
            |e| e.message.clone(),
        ),
    })
}

// ---------------------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use serde_json::json;

    use super::*;

    fn decision(answer: Value) -> Decision {
        typed("a test", &answer).unwrap()
    }

    #[test]
    fn a_rejected_decision_is_an_error_naming_its_rule() {
        let answer = decision(json!({"decided": true, "accepted": false, "log": [
            {"at": 0, "verdict": "rejected", "rule": "D3", "message": "the objective is already paused"}
        ]}));
        let error = decided_or_refused(&answer).unwrap_err();
        assert_eq!(
            error.to_string(),
            "refused by rule D3: the objective is already paused"
        );
        assert!(
            decided_or_refused(&decision(
                json!({"decided": true, "accepted": true, "log": []})
            ))
            .is_ok()
        );
        // The resume stands though its consequence, the next dispatch, was refused (B2).
        let resumed = decision(json!({"decided": true, "accepted": false, "log": [
            {"at": 0, "verdict": "accepted", "rule": "D3", "message": "resumed"},
            {"at": 0, "verdict": "rejected", "rule": "B2", "message": "not admitted"}
        ]}));
        assert!(decided_or_refused(&resumed).is_ok());
        assert!(
            decided_or_refused(&decision(
                json!({"decided": false, "already_done": true, "log": []})
            ))
            .is_ok()
        );
    }

    #[test]
    fn an_answer_missing_a_field_is_an_error_naming_it() {
        let error = typed::<Decision>("POST budget/raise", &json!({"decided": true}))
            .unwrap_err()
            .to_string();
        assert!(error.contains("missing field `log`"), "{error}");
        assert!(error.contains("POST budget/raise"), "{error}");
    }
}
