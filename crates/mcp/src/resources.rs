//! Resources: each objective's board (`agentroom://objectives/{objective}/board`), readable by
//! those who may read objectives, holding the tasks the reader may see (the domain decides
//! which, as for A2E's `planning/plan/board`), and each report version
//! (`agentroom://objectives/{objective}/reports/{version}`), readable with `report.read`: what
//! `read_report` answers for it (body, sources with their excerpts, criteria, reviews). A
//! client that subscribes to one (`resources/subscribe`, or `subscriptions/listen` of protocol
//! 2026-07-28) is told when it changes (`notifications/resources/updated`): after each decision
//! of the Room where this process decides, by polling where it only records. A subscription lives as long as the
//! session and its token: a revoked token's subscriptions end at the next change.

use std::collections::{BTreeSet, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentroom_domain::ids::{ObjectiveId, PrincipalId, RoomId};
use agentroom_domain::room::Permission;
use agentroom_planning::wire::Board;
use rmcp::model::{
    Extensions, ReadResourceResult, Resource, ResourceContents, ResourceTemplate,
    ResourceUpdatedNotification, ResourceUpdatedNotificationParam, ServerNotification,
    SubscriptionFilter,
};
use rmcp::service::{SubscriptionContext, SubscriptionSink};
use rmcp::{Peer, RoleServer};

use crate::{Caller, Posting, RoomTools, Token, ToolError};

/// The scheme and authority of this server's resource URIs.
const PREFIX: &str = "agentroom://objectives/";
/// How often a process that only records looks for changes of subscribed resources.
const POLL: Duration = Duration::from_secs(1);
/// How often a follower waiting for its Room's next decision looks whether its session
/// closed.
const CLOSED_CHECK: Duration = Duration::from_secs(5);
/// The most `subscriptions/listen` streams one principal of a Room holds open at once in this
/// process (each holds an HTTP request open; REST's notification streams have the same bound).
pub const MAX_LISTENS_PER_PRINCIPAL: usize = 16;
/// The most resources one session may subscribe to.
pub const MAX_SUBSCRIPTIONS: usize = 64;

/// The board template, as listed.
pub(crate) const BOARD_TEMPLATE: &str = "agentroom://objectives/{objective}/board";
/// The report version template, as listed.
pub(crate) const REPORT_TEMPLATE: &str = "agentroom://objectives/{objective}/reports/{version}";

/// A resource this server serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ResourceId {
    /// An objective's board.
    Board(ObjectiveId),
    /// A report version of an objective.
    Report(ObjectiveId, u32),
}

impl ResourceId {
    /// The resource `uri` names, or why it names none.
    pub(crate) fn parse(uri: &str) -> Result<Self, ToolError> {
        let unknown = || ToolError::NotFound(format!("no resource {uri}"));
        let rest = uri.strip_prefix(PREFIX).ok_or_else(unknown)?;
        match rest.split('/').collect::<Vec<_>>().as_slice() {
            [objective, "board"] => {
                Ok(ResourceId::Board(objective.parse().map_err(|_| unknown())?))
            }
            [objective, "reports", version] => Ok(ResourceId::Report(
                objective.parse().map_err(|_| unknown())?,
                version
                    .parse()
                    .ok()
                    .filter(|v: &u32| *v > 0)
                    .ok_or_else(unknown)?,
            )),
            _ => Err(unknown()),
        }
    }

    /// Its URI.
    pub(crate) fn uri(self) -> String {
        match self {
            ResourceId::Board(objective) => format!("{PREFIX}{objective}/board"),
            ResourceId::Report(objective, version) => {
                format!("{PREFIX}{objective}/reports/{version}")
            }
        }
    }
}

/// The `subscriptions/listen` streams open in this process, by Room and principal; shared by
/// every session's tools.
#[derive(Debug, Default)]
pub(crate) struct Listens(Mutex<HashMap<(RoomId, PrincipalId), usize>>);

/// One open listen stream, counted until it is dropped.
struct Listening<'a> {
    listens: &'a Listens,
    key: (RoomId, PrincipalId),
}

impl Listens {
    fn open(&self, caller: &Caller) -> Result<Listening<'_>, ToolError> {
        let key = (caller.room.clone(), caller.principal.clone());
        let mut open = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let count = open.entry(key.clone()).or_insert(0);
        if *count >= MAX_LISTENS_PER_PRINCIPAL {
            return Err(ToolError::Refused(format!(
                "{} holds {MAX_LISTENS_PER_PRINCIPAL} subscriptions open already (the most); \
                 cancel one first",
                caller.principal
            )));
        }
        *count += 1;
        Ok(Listening { listens: self, key })
    }
}

impl Drop for Listening<'_> {
    fn drop(&mut self) {
        let mut open = self
            .listens
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(count) = open.get_mut(&self.key) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                open.remove(&self.key);
            }
        }
    }
}

/// A session's subscriptions.
#[derive(Debug, Default)]
pub(crate) struct Subscriptions {
    uris: Mutex<BTreeSet<String>>,
    /// Whether the task that follows the Room for this session runs.
    following: AtomicBool,
}

impl Subscriptions {
    fn snapshot(&self) -> Vec<String> {
        self.uris
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .cloned()
            .collect()
    }

    fn add(&self, uri: String) -> Result<(), ToolError> {
        let mut uris = self
            .uris
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !uris.contains(&uri) && uris.len() >= MAX_SUBSCRIPTIONS {
            return Err(ToolError::InvalidInput(format!(
                "a session subscribes to at most {MAX_SUBSCRIPTIONS} resources"
            )));
        }
        uris.insert(uri);
        Ok(())
    }

    fn remove(&self, uri: &str) {
        self.uris
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(uri);
    }

    fn clear(&self) {
        self.uris
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clear();
    }
}

impl RoomTools {
    /// The resources the caller may read now: the board of each objective with a plan, and
    /// with `report.read` each report version.
    pub(crate) async fn resources(&self, context: &Extensions) -> Result<Vec<Resource>, ToolError> {
        let (caller, stored) = self.authorized(context, Permission::ObjectiveRead).await?;
        let reports = stored.state.may(&caller.principal, Permission::ReportRead);
        let stored = self.with_history(&caller).await?;
        let mut resources = Vec::new();
        for objective in stored.state.objectives().iter() {
            let title = objective.title().lines().next().unwrap_or_default();
            if objective.current_plan().is_some() {
                resources.push(
                    Resource::new(
                        ResourceId::Board(objective.id()).uri(),
                        format!("board of {}", objective.id()),
                    )
                    .with_title(format!("Board: {title}"))
                    .with_mime_type("application/json"),
                );
            }
            if reports {
                for report in objective.reports() {
                    resources.push(
                        Resource::new(
                            ResourceId::Report(objective.id(), report.version).uri(),
                            format!("report v{} of {}", report.version, objective.id()),
                        )
                        .with_title(format!("Report v{}: {title}", report.version))
                        .with_mime_type("application/json"),
                    );
                }
            }
        }
        Ok(resources)
    }

    /// The resource templates.
    pub(crate) fn resource_templates() -> Vec<ResourceTemplate> {
        vec![
            ResourceTemplate::new(BOARD_TEMPLATE, "objective board")
                .with_mime_type("application/json"),
            ResourceTemplate::new(REPORT_TEMPLATE, "report version")
                .with_mime_type("application/json"),
        ]
    }

    /// Reads `uri` for the caller.
    pub(crate) async fn read(
        &self,
        context: &Extensions,
        uri: &str,
    ) -> Result<ReadResourceResult, ToolError> {
        let id = ResourceId::parse(uri)?;
        let caller = self.caller(context).await?;
        let text = self.render(&caller, id).await?;
        Ok(ReadResourceResult::new(vec![
            ResourceContents::text(text, uri).with_mime_type("application/json"),
        ]))
    }

    /// `id`'s content as `caller` may see it.
    async fn render(&self, caller: &Caller, id: ResourceId) -> Result<String, ToolError> {
        let stored = self.coordinator.room(&caller.room).await?;
        match id {
            ResourceId::Board(objective) => {
                if !stored
                    .state
                    .may(&caller.principal, Permission::ObjectiveRead)
                {
                    return Err(ToolError::Forbidden(Permission::ObjectiveRead));
                }
                // The state loaded for the check is the one the board is read from.
                let stored = self.showing(caller, stored, objective).await?;
                let found = stored.state.objective(objective).ok_or_else(|| {
                    ToolError::NotFound(format!("no objective {objective} in this room"))
                })?;
                let plan =
                    agentroom_coordinator::board(&stored.state, found, Some(&caller.principal))
                        .ok_or_else(|| {
                            ToolError::NotFound(format!(
                                "objective {objective} has no plan in this room"
                            ))
                        })?;
                let board = Board::new(
                    plan.plan_id,
                    plan.name,
                    plan.columns.names().to_vec(),
                    plan.rows,
                )
                .ok_or_else(|| {
                    ToolError::Internal("a task is in a column the board lacks".into())
                })?;
                serde_json::to_string(&board).map_err(|error| ToolError::Internal(Box::new(error)))
            }
            ResourceId::Report(objective, version) => {
                if !stored.state.may(&caller.principal, Permission::ReportRead) {
                    return Err(ToolError::Forbidden(Permission::ReportRead));
                }
                let stored = self.showing(caller, stored, objective).await?;
                let report = self
                    .report_version(&stored.state, objective, Some(version))
                    .await?;
                serde_json::to_string(&report).map_err(|error| ToolError::Internal(Box::new(error)))
            }
        }
    }

    /// Subscribes the session to `uri` (readable by the caller now), and starts following the
    /// Room for it if nothing does yet.
    pub(crate) async fn subscribe(
        &self,
        context: &Extensions,
        uri: &str,
        peer: Peer<RoleServer>,
    ) -> Result<(), ToolError> {
        let id = ResourceId::parse(uri)?;
        let caller = self.caller(context).await?;
        self.render(&caller, id).await?;
        self.subscriptions.add(id.uri())?;
        if !self.subscriptions.following.swap(true, Ordering::SeqCst) {
            let token = self.token_of(context).ok_or(ToolError::Unauthenticated)?;
            let tools = self.clone();
            tokio::spawn(async move { tools.follow(token, caller, peer).await });
        }
        Ok(())
    }

    /// Ends the session's subscription to `uri`.
    pub(crate) fn unsubscribe(&self, uri: &str) {
        if let Ok(id) = ResourceId::parse(uri) {
            self.subscriptions.remove(&id.uri());
        }
    }

    /// Runs one `subscriptions/listen` subscription (protocol 2026-07-28): the resources it
    /// accepted, each readable by the caller now, followed until the client cancels it or the
    /// token no longer authenticates the caller.
    pub(crate) async fn listen_to(&self, context: SubscriptionContext) -> Result<(), ToolError> {
        let extensions = &context.request_context().extensions;
        let caller = self.caller(extensions).await?;
        let token = self
            .token_of(extensions)
            .ok_or(ToolError::Unauthenticated)?;
        // Counted while this stream is open (its HTTP request with it).
        let _open = self.listens.open(&caller)?;
        let uris = context
            .accepted()
            .resource_subscriptions
            .clone()
            .unwrap_or_default();
        for uri in &uris {
            self.render(&caller, ResourceId::parse(uri)?).await?;
        }
        let sink = Notify::Subscription(context.sink().clone());
        tokio::select! {
            () = context.cancelled() => {}
            () = self.clone().follow_with(token, caller, Uris::Fixed(uris), sink) => {}
        }
        Ok(())
    }

    /// Tells `peer` each time a subscribed resource changes, until the session ends or the
    /// token no longer authenticates `caller`.
    async fn follow(self, token: Token, caller: Caller, peer: Peer<RoleServer>) {
        let subscriptions = Arc::clone(&self.subscriptions);
        self.follow_with(token, caller, Uris::Session, Notify::Peer(peer))
            .await;
        // A later subscription of the session (with a new token, say) follows again.
        subscriptions.following.store(false, Ordering::SeqCst);
    }

    /// Sends through `notify` each time one of `uris` changes, until it can no longer be
    /// sent or the token no longer authenticates `caller`.
    async fn follow_with(self, token: Token, caller: Caller, uris: Uris, notify: Notify) {
        let watched = || match &uris {
            Uris::Session => self.subscriptions.snapshot(),
            Uris::Fixed(fixed) => fixed.clone(),
        };
        let mut last: HashMap<String, u64> = HashMap::new();
        for uri in watched() {
            if let Ok(id) = ResourceId::parse(&uri)
                && let Ok(text) = self.render(&caller, id).await
            {
                last.insert(uri, fingerprint(&text));
            }
        }
        let mut commits = (self.posting == Posting::Decide).then(|| self.coordinator.watch());
        loop {
            match &mut commits {
                Some(receiver) => tokio::select! {
                    commit = receiver.recv() => match commit {
                        None => return,
                        Some(commit) if commit.room != caller.room => continue,
                        Some(_) => {
                            // A burst of decisions is one change to tell.
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            while receiver.try_recv().is_ok() {}
                        }
                    },
                    // A quiet Room does not keep a closed session's follower alive.
                    () = tokio::time::sleep(CLOSED_CHECK) => {
                        if notify.closed() {
                            return;
                        }
                        continue;
                    }
                },
                None => tokio::time::sleep(POLL).await,
            }
            if notify.closed() {
                return;
            }
            let uris = watched();
            if uris.is_empty() {
                continue;
            }
            // T3: a subscription ends with its token.
            match crate::authenticate(&self.coordinator, &token).await {
                Ok((room, principal)) if room == caller.room && principal == caller.principal => {}
                _ => {
                    tracing::info!(principal = %caller.principal, "subscriptions end with their token");
                    self.subscriptions.clear();
                    return;
                }
            }
            for uri in uris {
                let Ok(id) = ResourceId::parse(&uri) else {
                    continue;
                };
                let now = match self.render(&caller, id).await {
                    Ok(text) => fingerprint(&text),
                    Err(ToolError::Forbidden(_) | ToolError::NotFound(_)) => 0,
                    Err(error) => {
                        tracing::warn!(%error, %uri, "a subscribed resource could not be read");
                        continue;
                    }
                };
                if last.insert(uri.clone(), now) != Some(now) && !notify.updated(uri).await {
                    return;
                }
            }
        }
    }
}

/// Which resources a follower watches.
enum Uris {
    /// The session's `resources/subscribe` set, as it changes.
    Session,
    /// A `subscriptions/listen` request's accepted set.
    Fixed(Vec<String>),
}

/// Where a follower says a resource changed.
enum Notify {
    /// The session's peer (`resources/subscribe`).
    Peer(Peer<RoleServer>),
    /// A `subscriptions/listen` request's stream.
    Subscription(SubscriptionSink),
}

impl Notify {
    fn closed(&self) -> bool {
        match self {
            Notify::Peer(peer) => peer.is_transport_closed(),
            Notify::Subscription(_) => false,
        }
    }

    /// Whether the notification could be sent.
    async fn updated(&self, uri: String) -> bool {
        let param = ResourceUpdatedNotificationParam::new(uri);
        match self {
            Notify::Peer(peer) => peer.notify_resource_updated(param).await.is_ok(),
            Notify::Subscription(sink) => sink
                .send(ServerNotification::ResourceUpdatedNotification(
                    ResourceUpdatedNotification::new(param),
                ))
                .await
                .is_ok(),
        }
    }
}

/// The part of a `subscriptions/listen` filter this server accepts: at most
/// [`MAX_SUBSCRIPTIONS`] of the resources it serves.
pub(crate) fn acceptable(requested: &SubscriptionFilter) -> SubscriptionFilter {
    let uris: Vec<String> = requested
        .resource_subscriptions
        .iter()
        .flatten()
        .filter(|uri| ResourceId::parse(uri).is_ok())
        .take(MAX_SUBSCRIPTIONS)
        .cloned()
        .collect();
    let mut accepted = SubscriptionFilter::new();
    accepted.resource_subscriptions = Some(uris);
    accepted
}

fn fingerprint(text: &str) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut hasher);
    hasher.finish()
}
