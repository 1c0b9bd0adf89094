//! The REST API's extractors: the authorized caller, the idempotency key, a strict JSON body,
//! a page of a list, and the ids in a path that must name something of the caller's Room.
//! Each refuses with the one [`ApiError`], so a handler only extracts, calls the service and
//! serializes.
//!
//! Path extractors run before the body is read (axum runs the parts extractors first, in
//! argument order, and the body extractor last), so an unknown id is a 404 before a body of
//! the wrong shape is a 422 or one above the limit a 413.

use std::sync::Arc;

use agentroom_domain::ids::{
    ContributionId, EventId, MemoryEntryId, ObjectiveId, OperationId, PrincipalId,
};
use agentroom_domain::objective::Objective;
use agentroom_domain::review::Contribution;
use agentroom_ports::{OperationRecord, StoredRoom};
use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::http::HeaderMap;
use axum::http::header::CONTENT_TYPE;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::auth::Caller;
use super::handlers::{keyed_input_id, revoke_input};
use super::{MAX_BODY_BYTES, State as ApiState};
use crate::body::{ReadError, declared_above, read_limited};
use crate::error::ApiError;

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = ApiError;

    /// The caller the bearer-token guard authorized and put in the request.
    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        parts
            .extensions
            .get::<Caller>()
            .cloned()
            .ok_or_else(|| ApiError::internal("a guarded route ran without its guard"))
    }
}

/// The `Idempotency-Key` header, if the request has a readable one.
#[derive(Debug, Clone, Default)]
pub(crate) struct IdempotencyKey(pub(crate) Option<String>);

impl<S: Send + Sync> FromRequestParts<S> for IdempotencyKey {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        Ok(IdempotencyKey(
            parts
                .headers
                .get("idempotency-key")
                .and_then(|value| value.to_str().ok())
                .map(str::to_owned),
        ))
    }
}

/// A JSON body of at most [`MAX_BODY_BYTES`], parsed into a type that refuses unknown
/// fields: above the limit 413 (from `Content-Length` before reading, or when reading passes
/// it), a content type that is not JSON 415 (none at all is read as JSON), not JSON 400,
/// JSON of the wrong shape (unknown or missing fields, wrong types) 422.
#[derive(Debug)]
pub(crate) struct StrictJson<T>(pub(crate) T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for StrictJson<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, _: &S) -> Result<Self, ApiError> {
        let bytes = read_bytes(request).await?;
        parse_json(&bytes).map(StrictJson)
    }
}

/// [`StrictJson`] for endpoints that take no fields: an empty body is read as `{}`.
#[derive(Debug)]
pub(crate) struct StrictJsonOrEmpty<T>(pub(crate) T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for StrictJsonOrEmpty<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, _: &S) -> Result<Self, ApiError> {
        let bytes = read_bytes(request).await?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return parse_json(b"{}").map(StrictJsonOrEmpty);
        }
        parse_json(&bytes).map(StrictJsonOrEmpty)
    }
}

/// Whether a `Content-Type` names JSON: `application/json` or any `+json` type.
fn is_json(headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(value) = headers.get(CONTENT_TYPE) else {
        return Ok(());
    };
    let text = value.to_str().unwrap_or_default();
    let essence = text
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    if essence == "application/json" || essence.ends_with("+json") {
        Ok(())
    } else {
        Err(ApiError::UnsupportedMediaType(
            String::from_utf8_lossy(value.as_bytes()).into_owned(),
        ))
    }
}

/// The body's bytes, at most [`MAX_BODY_BYTES`], if its content type is JSON (or absent).
async fn read_bytes(request: Request) -> Result<Bytes, ApiError> {
    let (parts, body) = request.into_parts();
    // Above the limit by `Content-Length` is a 413 before the type is looked at.
    if declared_above(&parts.headers, MAX_BODY_BYTES).is_some() {
        return Err(too_large());
    }
    is_json(&parts.headers)?;
    read_limited(&parts.headers, body, MAX_BODY_BYTES)
        .await
        .map_err(|error| match error {
            ReadError::TooLarge => too_large(),
            ReadError::TimedOut { after } => ApiError::BodyTimeout { after },
            ReadError::Unreadable(error) => {
                ApiError::BadRequest(format!("the request body could not be read: {error}"))
            }
        })
}

fn too_large() -> ApiError {
    ApiError::BodyTooLarge {
        limit: MAX_BODY_BYTES,
    }
}

/// Not JSON 400, an object naming a key twice 400 `duplicate_key` (serde_json would keep the
/// last silently, so what the client meant is unknown), JSON of the wrong shape 422.
fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let value: Value = serde_json::from_slice(bytes).map_err(ApiError::MalformedJson)?;
    // Valid JSON by now, so the only error left is a repeated key.
    if let Err(error) = serde_json::from_slice::<UniqueKeys>(bytes) {
        return Err(ApiError::DuplicateKey(error.to_string()));
    }
    serde_json::from_value(value).map_err(|error| ApiError::InvalidBody(error.to_string()))
}

/// Any JSON value none of whose objects (at any depth) names a key twice; deserializing one
/// fails naming the first repeated key.
struct UniqueKeys;

impl<'de> serde::Deserialize<'de> for UniqueKeys {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(UniqueKeysVisitor)
    }
}

struct UniqueKeysVisitor;

impl<'de> serde::de::Visitor<'de> for UniqueKeysVisitor {
    type Value = UniqueKeys;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }

    fn visit_i64<E>(self, _: i64) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }

    fn visit_u64<E>(self, _: u64) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }

    fn visit_f64<E>(self, _: f64) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }

    fn visit_str<E>(self, _: &str) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }

    fn visit_unit<E>(self) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<UniqueKeys, A::Error> {
        while seq.next_element::<UniqueKeys>()?.is_some() {}
        Ok(UniqueKeys)
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<UniqueKeys, A::Error> {
        let mut keys = std::collections::HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if keys.contains(&key) {
                return Err(serde::de::Error::custom(format!(
                    "the key `{key}` appears twice in one object"
                )));
            }
            map.next_value::<UniqueKeys>()?;
            keys.insert(key);
        }
        Ok(UniqueKeys)
    }
}

/// The path's second parameter (after `{room}`) as text.
async fn second_segment<S: Send + Sync>(parts: &mut Parts, state: &S) -> Result<String, ApiError> {
    let Path((_, segment)) = Path::<(String, String)>::from_request_parts(parts, state)
        .await
        .map_err(|rejection| ApiError::BadRequest(rejection.body_text()))?;
    Ok(segment)
}

/// `{objective}` in the path: an objective of the caller's Room, open or closed (404
/// otherwise).
#[derive(Debug, Clone, Copy)]
pub(crate) struct KnownObjective(pub(crate) ObjectiveId);

impl FromRequestParts<ApiState> for KnownObjective {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, api: &ApiState) -> Result<Self, ApiError> {
        ObjectiveView::from_request_parts(parts, api)
            .await
            .map(|view| KnownObjective(view.id))
    }
}

/// `{objective}` in the path, with the Room to show it from: the Room as the request was
/// authorized when the objective is open, with the objective's record put back when it
/// closed and left the live state (issue 21); 404 for an objective the Room never had.
#[derive(Debug, Clone)]
pub(crate) struct ObjectiveView {
    pub(crate) id: ObjectiveId,
    pub(crate) room: Arc<StoredRoom>,
}

impl ObjectiveView {
    /// The objective.
    pub(crate) fn objective(&self) -> Result<&Objective, ApiError> {
        self.room
            .state
            .objective(self.id)
            .ok_or_else(|| ApiError::NotFound(format!("no objective {} in this room", self.id)))
    }
}

impl FromRequestParts<ApiState> for ObjectiveView {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, api: &ApiState) -> Result<Self, ApiError> {
        let caller = Caller::from_request_parts(parts, api).await?;
        let text = second_segment(parts, api).await?;
        let id: ObjectiveId = text
            .parse()
            .map_err(|_| ApiError::NotFound(format!("no objective {text} in this room")))?;
        // A closed objective left the live state: its record shows it (one more read).
        let room = if caller.stored.state.objective(id).is_some() {
            caller.stored
        } else {
            Arc::new(api.rooms.room_for_objective(&caller.room, id).await?)
        };
        let view = ObjectiveView { id, room };
        view.objective()?;
        Ok(view)
    }
}

/// `{principal}` in a members path: a current member of the caller's Room (404 otherwise,
/// before any body is read).
#[derive(Debug, Clone)]
pub(crate) struct KnownMember(pub(crate) PrincipalId);

impl<S: Send + Sync> FromRequestParts<S> for KnownMember {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let caller = Caller::from_request_parts(parts, state).await?;
        let text = second_segment(parts, state).await?;
        let unknown = || ApiError::NotFound(format!("no member {text} in this room"));
        let principal = PrincipalId::parse(&text).map_err(|_| unknown())?;
        if !caller.stored.state.members().is_member(&principal) {
            return Err(unknown());
        }
        Ok(KnownMember(principal))
    }
}

/// `{entry}` in a memory path: an entry of the caller's Room's memory, retracted or not
/// (404 otherwise, before any body is read; the domain refuses what a retracted one may not
/// do, M1).
#[derive(Debug, Clone, Copy)]
pub(crate) struct KnownMemoryEntry(pub(crate) MemoryEntryId);

impl<S: Send + Sync> FromRequestParts<S> for KnownMemoryEntry {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let caller = Caller::from_request_parts(parts, state).await?;
        let text = second_segment(parts, state).await?;
        let unknown = || ApiError::NotFound(format!("no memory entry {text} in this room"));
        let id: MemoryEntryId = text.parse().map_err(|_| unknown())?;
        caller.stored.state.memory().get(id).ok_or_else(unknown)?;
        Ok(KnownMemoryEntry(id))
    }
}

/// `{event}` in the path: an owner message pending in the caller's Room (404 otherwise).
#[derive(Debug, Clone, Copy)]
pub(crate) struct PendingEvent(pub(crate) EventId);

impl<S: Send + Sync> FromRequestParts<S> for PendingEvent {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let caller = Caller::from_request_parts(parts, state).await?;
        let text = second_segment(parts, state).await?;
        let unknown =
            || ApiError::NotFound(format!("no pending owner message {text} in this room"));
        let id: EventId = text.parse().map_err(|_| unknown())?;
        if !caller.stored.state.intake().contains_key(&id) {
            return Err(unknown());
        }
        Ok(PendingEvent(id))
    }
}

/// `{contribution}` in a path: a contribution of the Room the caller may read
/// (`RoomState::sees_contribution`), whatever the age of its objective, with the Room to
/// show it from (its objective's record put back when it closed and left the live state);
/// 404 otherwise, so another's work is not even confirmed to exist.
#[derive(Debug, Clone)]
pub(crate) struct ReadableContribution {
    pub(crate) id: ContributionId,
    pub(crate) room: Arc<StoredRoom>,
}

impl ReadableContribution {
    /// The contribution.
    pub(crate) fn contribution(&self) -> Result<&Contribution, ApiError> {
        self.room
            .state
            .contributions()
            .get(&self.id)
            .ok_or_else(|| ApiError::NotFound(format!("no contribution {} in this room", self.id)))
    }
}

impl FromRequestParts<ApiState> for ReadableContribution {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, api: &ApiState) -> Result<Self, ApiError> {
        let caller = Caller::from_request_parts(parts, api).await?;
        let text = second_segment(parts, api).await?;
        let unknown = || ApiError::NotFound(format!("no contribution {text} in this room"));
        let id: ContributionId = text.parse().map_err(|_| unknown())?;
        let room = if caller.stored.state.contributions().contains_key(&id) {
            caller.stored
        } else {
            Arc::new(api.rooms.room_for_contribution(&caller.room, id).await?)
        };
        let state = &room.state;
        state
            .contributions()
            .get(&id)
            .filter(|contribution| state.sees_contribution(&caller.principal, contribution))
            .ok_or_else(unknown)?;
        Ok(ReadableContribution { id, room })
    }
}

/// `{operation}` in a late-result path: an operation whose result the Room holds (404
/// otherwise).
#[derive(Debug, Clone, Copy)]
pub(crate) struct HeldOperation(pub(crate) OperationId);

impl FromRequestParts<ApiState> for HeldOperation {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, api: &ApiState) -> Result<Self, ApiError> {
        let caller = Caller::from_request_parts(parts, api).await?;
        let text = second_segment(parts, api).await?;
        let op: OperationId = text
            .parse()
            .map_err(|_| ApiError::NotFound(format!("no held result of operation {text}")))?;
        // Live, or kept by a closed objective's record (deciding it is refused by D4).
        if !api
            .rooms
            .holds_late_result(&caller.room, &caller.stored, op)
            .await?
        {
            return Err(ApiError::NotFound(format!(
                "no held result of operation {op}"
            )));
        }
        Ok(HeldOperation(op))
    }
}

/// `{principal}` in a member's revoke path: a current member of the caller's Room, or (T6)
/// one whose revocation under this request's `Idempotency-Key` was decided already, so a
/// retry reaches the service and finishes revoking its tokens if that failed; 404 otherwise,
/// before any body is read.
#[derive(Debug, Clone)]
pub(crate) struct RevokedMember(pub(crate) PrincipalId);

impl FromRequestParts<ApiState> for RevokedMember {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, api: &ApiState) -> Result<Self, ApiError> {
        let caller = Caller::from_request_parts(parts, api).await?;
        let text = second_segment(parts, api).await?;
        let unknown = || ApiError::NotFound(format!("no member {text} in this room"));
        let principal = PrincipalId::parse(&text).map_err(|_| unknown())?;
        if caller.stored.state.members().is_member(&principal) {
            return Ok(RevokedMember(principal));
        }
        let IdempotencyKey(Some(key)) = IdempotencyKey::from_request_parts(parts, api).await?
        else {
            return Err(unknown());
        };
        let id = keyed_input_id(&caller, &key, &revoke_input(&principal));
        if api.rooms.input_decided(&caller.room, id).await? {
            Ok(RevokedMember(principal))
        } else {
            Err(unknown())
        }
    }
}

/// `{operation}` in an operation path: an operation of the caller's Room, as stored (404
/// otherwise, for another Room's too).
#[derive(Debug, Clone)]
pub(crate) struct RoomOperation(pub(crate) OperationRecord);

impl FromRequestParts<ApiState> for RoomOperation {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, api: &ApiState) -> Result<Self, ApiError> {
        let caller = Caller::from_request_parts(parts, api).await?;
        let text = second_segment(parts, api).await?;
        let unknown = || ApiError::NotFound(format!("no operation {text} in this room"));
        let op: OperationId = text.parse().map_err(|_| unknown())?;
        let record = api
            .rooms
            .operation(&caller.room, op)
            .await?
            .ok_or_else(unknown)?;
        Ok(RoomOperation(record))
    }
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn typed(content_type: Option<&'static str>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        if let Some(value) = content_type {
            headers.insert(CONTENT_TYPE, HeaderValue::from_static(value));
        }
        headers
    }

    /// Issue 17: serde_json keeps the last of two equal keys; the strict body refuses them,
    /// naming the key, at any depth, and still takes what has no repeat.
    #[test]
    fn a_key_named_twice_is_a_400_naming_it() {
        #[derive(Debug, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct Raise {
            amount_micros: i64,
        }
        let twice = br#"{"amount_micros": 1, "amount_micros": 1000000000}"#;
        let error = parse_json::<Raise>(twice).err();
        let error = error.map(|e| (e.status().as_u16(), e.code(), e.to_string()));
        assert!(
            matches!(&error, Some((400, "duplicate_key", message)) if message.contains("`amount_micros`")),
            "{error:?}"
        );
        let nested = br#"{"a": [{"b": 1, "c": {"d": 1, "d": 2}}]}"#;
        let error = parse_json::<Value>(nested).err().map(|e| e.to_string());
        assert!(error.is_some_and(|m| m.contains("`d`")));
        // The same key in two objects is not a repeat.
        let fine = br#"{"a": {"k": 1}, "b": {"k": 2}, "c": [{"k": 3}, {"k": 4}], "k": null}"#;
        assert!(parse_json::<Value>(fine).is_ok());
        assert!(matches!(
            parse_json::<Raise>(br#"{"amount_micros": 5}"#),
            Ok(Raise { amount_micros: 5 })
        ));
    }

    #[test]
    fn a_body_of_another_media_type_is_a_415_and_none_is_read_as_json() {
        for fine in [
            None,
            Some("application/json"),
            Some("Application/JSON; charset=utf-8"),
            Some("application/merge-patch+json"),
        ] {
            assert!(is_json(&typed(fine)).is_ok(), "{fine:?}");
        }
        for wrong in ["text/plain", "application/x-www-form-urlencoded"] {
            let error = is_json(&typed(Some(wrong))).err();
            assert_eq!(
                error.map(|e| (e.status().as_u16(), e.code())),
                Some((415, "unsupported_media_type")),
                "{wrong}"
            );
        }
    }
}
